"""Helper of bench/header-table.sh: the cost of the header table (issue 42's benchmark).

One `hxlab serve --threads 1` (its default table, 4096) on core 1; `hxlab load` on core 0,
-c 50 with 10 streams per connection, a 100-byte object, over h3 and h2, each with
`--header-table 4096` (the dynamic table both ways) and `--header-table 0` (what the client
advertises and uses: the server's encoder then has no table either, so the wire is
static-only both ways). Client CPU = user+sys of the client process per request; the
server's CPU per request beside it; header bytes per request and response from the run's
record. Runs rotate each repetition; medians (min–max). Goal: the table costs at most 5 %
of h3 CPU per request, client and server."""
import json, os, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Lab, hx_path, measure_clients, median  # noqa: E402

BIN, REPS, N, CONNS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
M = 10


def main():
    lab = Lab(core=1)
    tmp = tempfile.mkdtemp(prefix="header-table-")
    try:
        hx = lab.hxlab(BIN, h3=True)
        u = f"https://127.0.0.1:{hx.ports['tls']}" + hx_path("100")
        js = os.path.join(tmp, "r.json")

        def parse(out):
            if not os.path.exists(js):
                return None
            r = json.load(open(js))
            ok = r["requests_succeeded"]
            b = r["bytes"]
            return (ok / r["duration_s"], ok, b["header_sent"] / max(ok, 1), b["header_received"] / max(ok, 1))

        def tools(size):
            t = []
            for proto in ("h3", "h2"):
                for table in ("4096", "0"):
                    cmd = [BIN, "load", "--no-progress", "-q", "-k", "--proto", proto, "-n", str(N), "-c",
                           str(CONNS), "-m", str(M), "--header-table", table, "--json", js, u]
                    t.append((f"{proto} table {table}", cmd, parse))
            return N, t

        res = measure_clients(tools, ["100"], REPS, hx, js)
        print(f"\nCPU per request (µs, user+sys) of `hxlab load` (core 0) and of one `hxlab serve --threads 1` "
              f"(core 1), -c {CONNS} -m {M}, 100-byte object, n={N}, median of {REPS} (min–max); "
              f"header bytes per request and per response (HEADERS payloads + QPACK streams)")
        med = {}
        for name, _, _ in tools("100")[1]:
            runs = [r for r in res.get((name, "100"), []) if r]
            if not runs:
                print(f"  {name:<15} failed (see above)")
                continue
            c = [r[0] for r in runs]
            s = [r[2] for r in runs]
            med[name] = (median(c), median(s))
            print(f"  {name:<15} client {median(c):>7.2f} ({min(c):.2f}–{max(c):.2f})  server {median(s):>7.2f} "
                  f"({min(s):.2f}–{max(s):.2f})  {median([r[1] for r in runs]):>8.0f} req/s  "
                  f"header bytes/req {median([r[3] for r in runs]):>6.1f} sent, {median([r[4] for r in runs]):>6.1f} received")
        for proto in ("h3", "h2"):
            a, b = f"{proto} table 4096", f"{proto} table 0"
            if a in med and b in med:
                rc, rs = med[a][0] / med[b][0], med[a][1] / med[b][1]
                goal = "" if proto == "h2" else (f"  (goal ≤1.05x: client {'met' if rc <= 1.05 else 'NOT met'}, "
                                                 f"server {'met' if rs <= 1.05 else 'NOT met'})")
                print(f"  => {proto}: table on / off, client {rc:.3f}x, server {rs:.3f}x{goal}")
    finally:
        lab.close()


if __name__ == "__main__":
    main()
