"""Helper of bench/client-h3.sh: client CPU per request, h3 vs h2, hxlab load beside oha and h2load.

One `hxlab serve --threads 1` on core 1; every client on core 0, -c 50 with 10 streams per
connection (h2load -m 10, oha -p 10, hxlab load -m 10), the same -n, for a 100-byte and a
100 KiB object. Client CPU = user+sys of the client process (getrusage of the child), per
request that succeeded; the server's CPU per request is shown beside it. The tools of a size
run one after another, the order rotating each repetition; medians (min–max)."""
import os, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (Lab, SIZES, find_oha, hx_path, median, parse_h2load, parse_hxlab_json,  # noqa: E402
                      measure_clients, parse_oha_json)

BIN, REPS, N, CONNS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
SIZE_LIST = sys.argv[5].split(",") if len(sys.argv) > 5 and sys.argv[5] else list(SIZES)
M = 10


def main():
    oha = find_oha(install=os.environ.get("NO_OHA_INSTALL") != "1")
    lab = Lab(core=1)
    tmp = tempfile.mkdtemp(prefix="client-h3-")
    try:
        hx = lab.hxlab(BIN, h3=True)
        tls = f"https://127.0.0.1:{hx.ports['tls']}"
        js = os.path.join(tmp, "r.json")

        def hxlab(proto, n):
            return [BIN, "load", "--no-progress", "-q", "-k", "--proto", proto, "-n", str(n), "-c", str(CONNS),
                    "-m", str(M), "--json", js], lambda out: (parse_hxlab_json(js)[:2] if os.path.exists(js) else None)

        def tools(size):
            n = N if SIZES[size] <= 1024 else max(N // 5, CONNS * M)
            u = tls + hx_path(size)
            t = [("hxlab h3", *hxlab("h3", n)), ("hxlab h2", *hxlab("h2", n)),
                 ("h2load h2", ["h2load", "-n", str(n), "-c", str(CONNS), "-m", str(M)], parse_h2load)]
            if oha:
                o = [oha, "--no-tui", "--output-format", "json", "--insecure", "-n", str(n), "-c", str(CONNS),
                     "-p", str(M)]
                t += [("oha h3", o + ["--http-version", "3"], parse_oha_json),
                      ("oha h2", o + ["--http2"], parse_oha_json)]
            return n, [(name, cmd + [u], parse) for name, cmd, parse in t]

        if not oha:
            print("(oha not available: no oha rows — install it with `cargo install oha --features http3 --locked` "
                  "or set OHA=path)")
        res = measure_clients(tools, SIZE_LIST, REPS, hx, js)

        print(f"\nClient CPU per request (user+sys of the client, µs) against one `hxlab serve --threads 1` (core 1), "
              f"client on core 0, -c {CONNS}, {M} streams per connection, median of {REPS} (min–max); "
              f"server µs/req beside it")
        verdict = []
        for size in SIZE_LIST:
            n, ts = tools(size)
            print(f"\n== {size + '-byte' if size.isdigit() else size} object, n={n}")
            med = {}
            for name, _, _ in ts:
                runs = [r for r in res.get((name, size), []) if r]
                if not runs:
                    print(f"  {name:<11} failed (see above)")
                    continue
                c = [r[0] for r in runs]
                med[name] = (median(c), median([r[1] for r in runs]), median([r[2] for r in runs]))
                print(f"  {name:<11}{med[name][0]:>8.2f} µs/req ({min(c):.2f}–{max(c):.2f}){med[name][1]:>10.0f} req/s"
                      f"   server {med[name][2]:>6.2f} µs/req")

            def ratio(a, b, goal=None, what=""):
                if a in med and b in med:
                    r = med[a][0] / med[b][0]
                    g = ""
                    if goal:
                        g = f"  (goal ≤{goal:.2f}x: {'met' if r <= goal else 'NOT met'})"
                        if r > goal:
                            verdict.append(f"{size} {a}/{b} {r:.2f}")
                    print(f"  => {a} / {b} client cpu: {r:.2f}x, req/s {med[a][1] / med[b][1]:.2f}x{g}{what}")
            # Issue 29, goal 3: ≤ 1.5x at 100 B, ≤ 1.8x at 100 KiB.
            ratio("hxlab h3", "hxlab h2", 1.5 if SIZES[size] <= 1024 else 1.8)
            ratio("hxlab h3", "oha h3")
            ratio("hxlab h2", "h2load h2")
            ratio("hxlab h2", "oha h2")
            ratio("oha h3", "oha h2", what="  (the peer's own h3 cost over its h2)")
        print("\ngoals not met: " + ("; ".join(verdict) if verdict else "none"))
    finally:
        lab.close()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


main()
