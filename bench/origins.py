"""Helper of bench/origins.sh: hxlab serve beside nginx, h2o and Caddy, server CPU per request.

Every server runs on core 1 with one worker/thread (hxlab serve --threads 1, nginx
worker_processes 1, h2o num-threads 1, Caddy GOMAXPROCS=1); the client runs on core 0.
h1/h2 rows: h2load (--h1 for HTTP/1.1) against hxlab, nginx and h2o, one after another, the
order rotating each repetition. h3 rows: `hxlab load` (h2load here has no h3) against hxlab
and Caddy, h3 and h2 on the same server. CPU = user+sys of the server's whole process tree
(every thread, nginx's master and worker, h2o's helper processes) over the run, divided by
the requests that succeeded. Medians of the repetitions.
The h1 row also measures bench/floor-h1.c (the least an HTTP/1.1 origin can do per request:
one recv and one send, nothing parsed but the end of each head) for objects up to 64 KiB, in
the same rotation: what every server pays the kernel, so how far a ratio can go at all; and
the same floor on tokio (crates/hxlab-serve/examples/floor_h1_tokio.rs: a task per
connection, as hxlab serve ran cleartext HTTP/1.1 before its epoll sets), which shows what
tokio's task per connection costs over a bare epoll loop, and where hxlab stands against both."""
import os, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Lab, SIZES, free_port, fmt, hx_path, hxload_server_cpu, median, parse_h2load, peer_path, run  # noqa: E402

BIN, REPS, DUR, CONNS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# `--nginx-sendfile`: nginx with sendfile and tcp_nopush on, as Debian ships it (see Lab.nginx).
NGINX_SENDFILE = os.environ.get("NGINX_SENDFILE") == "1"
SIZE_LIST = sys.argv[5].split(",") if len(sys.argv) > 5 and sys.argv[5] else list(SIZES)
# --rows: the TCP rows to run (by label) and "h3" for the h3 rows; all when not given.
ROW_LIST = sys.argv[6].split(",") if len(sys.argv) > 6 and sys.argv[6] else None

TCP_ROWS = [  # label, URL kind, h2load args
    ("h1", "plain", ["--h1"]),
    ("h1+TLS", "tls", ["--h1"]),
    ("h2 TLS -m10", "tls", ["-m", "10"]),
    ("h2c -m10", "h2c", ["-m", "10"]),
]
if ROW_LIST is not None:
    TCP_ROWS = [r for r in TCP_ROWS if r[0] in ROW_LIST]
H3_ROWS = ROW_LIST is None or "h3" in ROW_LIST
# What a peer cannot do, said in the output rather than skipped silently.
CANNOT = {}



# Issue 29's goals: server CPU per request at most these times the peer's, on every row.
GOALS = {"nginx": 0.80, "h2o": 1.00}
H3_GOAL = 0.20

def url(server, kind, size):
    port = server.ports.get(kind)
    if port is None:
        return None
    scheme = "http" if kind in ("plain", "h2c") else "https"
    path = hx_path(size) if server.name == "hxlab" else peer_path(size)
    return f"{scheme}://127.0.0.1:{port}{path}"


def h2load(server, u, args, dur):
    before = server.cpu()
    rc, out = run(["h2load", "-D", str(dur), "-c", str(CONNS)] + args + [u])
    cpu = server.cpu() - before
    got = parse_h2load(out)
    if not got or got[1] == 0 or "0 failed" not in out:
        tail = "\n    ".join(out.strip().splitlines()[-4:])
        print(f"  ! h2load {' '.join(args)} {u} against {server.name} failed:\n    {tail}", flush=True)
        return None
    rps, ok = got
    return rps, cpu * 1e6 / ok


def hxload(server, proto, u, dur, tmp):
    got = hxload_server_cpu(BIN, server, proto, u, dur, tmp, CONNS)
    return got[:2] if got else None


# The tokio floor, built by bench/origins.sh beside the release binary.
TOKIO_FLOOR = os.path.join(os.path.dirname(BIN), "examples", "floor_h1_tokio")


def start_floors(lab, tmp):
    """The floors of the h1 row on core 1, one per object size they can serve (≤ 64 KiB):
    bench/floor-h1.c ("floor") and the same on tokio ("floor-tokio"). Returns size -> servers."""
    if ROW_LIST is not None and "h1" not in ROW_LIST:
        return {}
    exe = os.path.join(tmp, "floor-h1")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "floor-h1.c")
    rc, out = run(["gcc", "-O2", "-o", exe, src])
    if rc != 0:
        sys.exit(f"bench/floor-h1.c does not build:\n{out}")
    kinds = [("floor", exe)]
    if os.access(TOKIO_FLOOR, os.X_OK):
        kinds.append(("floor-tokio", TOKIO_FLOOR))
    else:
        print(f"! no tokio floor at {TOKIO_FLOOR} (run bench/origins.sh without --no-build): "
              "the h1 row has the C floor only", flush=True)
    floors = {}
    for size in SIZE_LIST:
        if SIZES[size] <= 65536:
            for name, path in kinds:
                port = free_port()
                p = lab._spawn(name, [path, str(port), str(SIZES[size])])
                floors.setdefault(size, []).append(lab._started(name, p, {"plain": port}, wait=(port,)))
    return floors


def main():
    lab = Lab(core=1)
    tmp = tempfile.mkdtemp(prefix="origins-")
    try:
        hx = lab.hxlab(BIN, h3=False)   # the h1/h2 rows: no Alt-Svc, as nginx and h2o send none
        if H3_ROWS:
            hx3 = lab.hxlab(BIN, h3=True)   # the h3 rows, and their h2 reference
            hx3.name = "hxlab"
            caddy = lab.caddy()
        ng, h2o = lab.nginx(sendfile=NGINX_SENDFILE), lab.h2o()
        tcp_servers = [hx, ng, h2o]
        floors = start_floors(lab, tmp)
        time.sleep(0.5)
        # Warm every server once (page cache, allocator, TLS): 1 s of h2 per server and size.
        for size in SIZE_LIST:
            for s in tcp_servers if TCP_ROWS else ():  # `--rows h3` alone: no TCP row to warm
                if ROW_LIST is None:
                    h2load(s, url(s, "tls", size), ["-m", "10"], 1)
                else:  # only some rows: warm with the first of them
                    _, kind, args = TCP_ROWS[0]
                    h2load(s, url(s, kind, size), args, 1)
            for s in (hx3, caddy) if H3_ROWS else ():
                hxload(s, "h3", url(s, "h3", size), 1, tmp)
        res = {}  # (server, row, size) -> [(rps, cpu)]
        for rep in range(REPS):
            for size in SIZE_LIST:
                for label, kind, args in TCP_ROWS:
                    servers = tcp_servers + (floors.get(size, []) if label == "h1" else [])
                    k = rep % len(servers)
                    for s in servers[k:] + servers[:k]:
                        res.setdefault((s.name, label, size), []).append(h2load(s, url(s, kind, size), args, DUR))
                h3_runs = [(hx3, "h2"), (hx3, "h3"), (caddy, "h2"), (caddy, "h3")] if H3_ROWS else []
                k = rep % max(len(h3_runs), 1)
                for s, proto in h3_runs[k:] + h3_runs[:k]:
                    kind = "h3" if proto == "h3" else "tls"
                    res.setdefault((s.name, f"{proto} (hxlab load)", size), []).append(
                        hxload(s, proto, url(s, kind, size), DUR, tmp))
            print(f"repetition {rep + 1}/{REPS} done", file=sys.stderr, flush=True)

        def med(server, row, size):
            runs = [r for r in res.get((server, row, size), []) if r]
            if not runs:
                return None, None
            return median([r[0] for r in runs]), median([r[1] for r in runs])

        def spread(server, peer, row, size):
            """hx/peer of each repetition (the two measured in the same rotation): 'lo–hi'."""
            pairs = zip(res.get((server, row, size), []), res.get((peer, row, size), []))
            r = [a[1] / b[1] for a, b in pairs if a and b]
            return f"{min(r):.2f}–{max(r):.2f}" if r else "-"

        print(f"\nServer CPU per request (user+sys of the server's process tree, µs) and req/s; server on core 1 "
              f"(hxlab serve --threads 1, nginx 1 worker{', sendfile and tcp_nopush on' if NGINX_SENDFILE else ''}, "
              f"h2o num-threads 1, Caddy GOMAXPROCS=1), client on core 0; "
              f"c={CONNS}, {DUR} s per run, median of {REPS}; objects: {', '.join(SIZE_LIST)} bytes "
              f"(100KiB = 102400).")
        print("peer/hx = peer CPU/req ÷ hxlab CPU/req (above 1: hxlab cheaper); hx/peer = its inverse (of the "
              "medians), and its lowest and highest in single repetitions (reps); "
              "goals (issue 29): hx/peer ≤ 0.80 against nginx, ≤ 1.00 against h2o, on every row; "
              "h3 ≤ 0.20 against Caddy.")
        verdict = []
        for peer in ("nginx", "h2o"):
            print(f"\n== hxlab vs {peer} (client: h2load; h2 rows -m 10)")
            print(f"{'row':<13}{'size':>7}{'hxlab req/s':>13}{peer + ' req/s':>13}{'hxlab µs':>10}{peer + ' µs':>10}"
                  f"{'peer/hx':>9}{'hx/peer':>9}{'reps':>12}  goal")
            for size in SIZE_LIST:
                for label, kind, _ in TCP_ROWS:
                    hr, hc = med("hxlab", label, size)
                    pr, pc = med(peer, label, size)
                    if (peer, kind) in CANNOT:
                        print(f"{label:<13}{size:>7}  {peer} cannot: {CANNOT[(peer, kind)]}")
                        continue
                    if hc is None or pc is None:
                        print(f"{label:<13}{size:>7}  a run failed (see above): no figure")
                        verdict.append(f"{peer} {label} {size}: no figure")
                        continue
                    goal = "met" if hc <= GOALS[peer] * pc else "NOT met"
                    if goal != "met":
                        verdict.append(f"{peer} {label} {size}: hx/peer {hc / pc:.2f}")
                    print(f"{label:<13}{size:>7}{hr:>13.0f}{pr:>13.0f}{hc:>10.2f}{pc:>10.2f}"
                          f"{pc / hc:>8.2f}x{hc / pc:>8.2f}x{spread('hxlab', peer, label, size):>12}  {goal}")

        for size in SIZE_LIST:
            fr, fc = med("floor", "h1", size)
            hr, hc = med("hxlab", "h1", size)
            nr, nc = med("nginx", "h1", size)
            if fc and hc and nc:
                print(f"\nfloor, h1 {size}: bench/floor-h1.c {fc:.2f} µs/req ({fr:.0f} req/s) = {fc / nc:.2f}x nginx "
                      f"(reps {spread('floor', 'nginx', 'h1', size)}); hxlab = {hc / fc:.2f}x the floor "
                      f"(reps {spread('hxlab', 'floor', 'h1', size)}; the floor pays only the kernel's share every "
                      f"server pays)")
            tr, tc = med("floor-tokio", "h1", size)
            if tc and fc and hc and nc:
                print(f"floor on tokio, h1 {size}: floor_h1_tokio {tc:.2f} µs/req ({tr:.0f} req/s) = {tc / fc:.2f}x "
                      f"the floor (reps {spread('floor-tokio', 'floor', 'h1', size)}), {tc / nc:.2f}x nginx; "
                      f"hxlab = {hc / tc:.2f}x the tokio floor (reps {spread('hxlab', 'floor-tokio', 'h1', size)}): "
                      f"tokio's task per connection costs {tc - fc:+.2f} µs/req over epoll; hxlab (cleartext "
                      f"HTTP/1.1 from epoll sets, its own request path) {hc - tc:+.2f} µs/req against the tokio floor, "
                      f"{hc - fc:+.2f} against the C floor")

        if not H3_ROWS:
            print("\nrows run: " + ", ".join(r[0] for r in TCP_ROWS) + " (--rows); not run: the other rows")
            print("goals not met: " + ("; ".join(verdict) if verdict else "none"))
            return
        print("\n== h3 (client: hxlab load -c %d -m 10; h2load here has no h3): hxlab vs Caddy, and h3 vs h2 on "
              "the same server" % CONNS)
        print(f"{'server':<8}{'size':>7}{'h2 req/s':>11}{'h3 req/s':>11}{'h2 µs':>9}{'h3 µs':>9}{'h3/h2 cpu':>11}")
        for size in SIZE_LIST:
            for s in ("hxlab", "caddy"):
                r2, c2 = med(s, "h2 (hxlab load)", size)
                r3, c3 = med(s, "h3 (hxlab load)", size)
                ratio = f"{c3 / c2:>10.2f}x" if c2 and c3 else f"{'-':>11}"
                print(f"{s:<8}{size:>7}{fmt(r2, '.0f', 11)}{fmt(r3, '.0f', 11)}{fmt(c2, '.2f', 9)}{fmt(c3, '.2f', 9)}"
                      f"{ratio}")
        print(f"\n{'h3 row':<13}{'size':>7}{'hxlab req/s':>13}{'caddy req/s':>13}{'hxlab µs':>10}{'caddy µs':>10}"
              f"{'peer/hx':>9}{'hx/peer':>9}{'reps':>12}  goal")
        for size in SIZE_LIST:
            for proto in ("h3", "h2"):
                hr, hc = med("hxlab", f"{proto} (hxlab load)", size)
                pr, pc = med("caddy", f"{proto} (hxlab load)", size)
                if hc is None or pc is None:
                    print(f"{proto + ' -m10':<13}{size:>7}  a run failed (see above): no figure")
                    continue
                goal = ""
                if proto == "h3":
                    goal = "  met" if hc <= H3_GOAL * pc else "  NOT met"
                    if hc > H3_GOAL * pc:
                        verdict.append(f"caddy h3 {size}: hx/peer {hc / pc:.2f}")
                row = f"{proto} (hxlab load)"
                print(f"{proto + ' -m10':<13}{size:>7}{hr:>13.0f}{pr:>13.0f}{hc:>10.2f}{pc:>10.2f}"
                      f"{pc / hc:>8.2f}x{hc / pc:>8.2f}x{spread('hxlab', 'caddy', row, size):>12}{goal}")
        print("\nnot measured: h3 against nginx and h2o (nginx-light 1.22 and h2o 2.2.5 in Debian 12 have no QUIC); "
              "h1/h2c against Caddy (not asked; Caddy is the h3 peer)")
        print("goals not met: " + ("; ".join(verdict) if verdict else "none"))
    finally:
        lab.close()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


main()
