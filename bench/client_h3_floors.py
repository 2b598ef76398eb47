"""Helper of bench/client-h3-floors.sh: client CPU per request of our h2 and h3 clients beside
two bare HTTP/3 "floor" clients on different QUIC stacks — quinn-proto (the proto_h3 example
of hxlab-load) and Cloudflare's quiche (bench/floor-quiche) — against the same server.

One `hxlab serve --threads 1` on core 1 (benchlib.Lab, as bench/client_h3.py); every client on
core 0, 50 connections × 10 concurrent requests, the same -n, for a 100-byte and a 100 KiB
object. Client CPU = user+sys of the client process (getrusage of the child, the same for
every client), per completed request; the server's CPU per request beside it; for the floors,
the UDP datagrams they sent and received per request (their own counts). The clients of a
size run one after another, the order rotating each repetition; medians (min–max).

"quiche+coalesce" is the same floor on a copy of quiche with one line changed so a packet
carries as many STREAM frames as fit (stock quiche puts one STREAM frame in a packet, so 10
requests are 10 packets where quinn-proto sends one); see bench/client-h3-floors.sh.

usage: client_h3_floors.py HXLAB PROTO_H3 FLOOR_QUICHE FLOOR_QUICHE_COALESCE REPS N CONNS SIZES"""
import os, re, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Lab, SIZES, hx_path, measure_clients, median, parse_hxlab_json  # noqa: E402

BIN, PROTO_H3, QUICHE, QUICHE_CO = sys.argv[1:5]
REPS, N, CONNS = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
SIZE_LIST = sys.argv[8].split(",") if len(sys.argv) > 8 and sys.argv[8] else list(SIZES)
M = 10
FLOOR_LINE = re.compile(r": (\d+) done, .*?([\d.]+) req/s, tx ([\d.]+) rx ([\d.]+) datagrams/req")


def parse_floor(out):
    """(req/s, done, (tx, rx) datagrams per request) of a floor client's line."""
    m = FLOOR_LINE.search(out)
    if not m:
        return None
    return float(m.group(2)), int(m.group(1)), (float(m.group(3)), float(m.group(4)))


def main():
    lab = Lab(core=1)
    tmp = tempfile.mkdtemp(prefix="client-h3-floors-")
    try:
        # proto_h3 exits without closing its connections: the server holds them until its idle
        # timeout (30 s), so its per-address and total QUIC connection limits (256, 1024) are
        # raised here, or the runs after a few floor runs would be refused.
        hx = lab.hxlab(BIN, h3=True, extra=["--quic-max-per-address", "100000", "--quic-max-connections", "100000"])
        tls = f"https://127.0.0.1:{hx.ports['tls']}"
        js = os.path.join(tmp, "r.json")

        def hxlab(proto, n):
            return [BIN, "load", "--no-progress", "-q", "-k", "--proto", proto, "-n", str(n), "-c", str(CONNS),
                    "-m", str(M), "--json", js, "URL"], \
                lambda out: (parse_hxlab_json(js)[:2] + (None,) if os.path.exists(js) else None)

        def tools(size):
            n = N if SIZES[size] <= 1024 else max(N // 5, CONNS * M)
            u = tls + hx_path(size)
            t = [("hxlab h2", *hxlab("h2", n)), ("hxlab h3", *hxlab("h3", n)),
                 ("quinn-proto floor", [PROTO_H3, "URL", str(n), str(CONNS), str(M)], parse_floor),
                 ("quiche floor", [QUICHE, "URL", str(n), str(CONNS), str(M)], parse_floor),
                 ("quiche+coalesce", [QUICHE_CO, "URL", str(n), str(CONNS), str(M)], parse_floor)]
            return n, [(name, [u if c == "URL" else c for c in cmd], parse) for name, cmd, parse in t]

        res = measure_clients(tools, SIZE_LIST, REPS, hx, js, timeout=300)

        print(f"\nClient CPU per request (user+sys of the client process, µs) against one `hxlab serve --threads 1` "
              f"(core 1), client on core 0, {CONNS} connections, {M} requests in flight on each, median of {REPS} "
              f"(min–max); server µs/req; datagrams sent/received per request (floors' own counts)")
        for size in SIZE_LIST:
            n, ts = tools(size)
            print(f"\n== {size + '-byte' if size.isdigit() else size} object, n={n}")
            med = {}
            for name, _, _ in ts:
                runs = [r for r in res.get((name, size), []) if r]
                if not runs:
                    print(f"  {name:<18} failed (see above)")
                    continue
                c = [r[0] for r in runs]
                med[name] = (median(c), median([r[1] for r in runs]), median([r[2] for r in runs]))
                dg = ""
                if runs[0][3]:
                    dg = (f"   datagrams tx {median([r[3][0] for r in runs]):.3f}"
                          f" rx {median([r[3][1] for r in runs]):.3f} /req")
                fails = len(res.get((name, size), [])) - len(runs)
                print(f"  {name:<18}{med[name][0]:>8.2f} µs/req ({min(c):.2f}–{max(c):.2f}){med[name][1]:>10.0f} req/s"
                      f"   server {med[name][2]:>6.2f} µs/req{dg}" + (f"   ({fails} failed)" if fails else ""))
            for a, b in [("hxlab h3", "hxlab h2"), ("quinn-proto floor", "hxlab h2"), ("quiche floor", "hxlab h2"),
                         ("quiche+coalesce", "hxlab h2"), ("quiche floor", "quinn-proto floor"),
                         ("quiche+coalesce", "quinn-proto floor")]:
                if a in med and b in med:
                    print(f"  => {a} / {b} client cpu: {med[a][0] / med[b][0]:.2f}x, "
                          f"req/s {med[a][1] / med[b][1]:.2f}x, server cpu {med[a][2] / med[b][2]:.2f}x")
    finally:
        lab.close()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


main()
