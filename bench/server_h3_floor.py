"""Helper of bench/server-h3-floor.sh: server CPU per request of `hxlab serve --threads 1` (h3)
beside the bare quinn-proto HTTP/3 server (crates/hxlab-serve/examples/proto_h3_server.rs, with
GSO as the socket allows and capped at 10 segments) and Caddy, as bench/origins.py measures
its h3 rows.

Every server on core 1 (benchlib.Lab), the client `hxlab load --proto h3 -c CONNS -m 10` on
core 0. The floor answers every request with a fixed response of its SIZE, so one floor
process runs per size and GSO mode. Server CPU = user+sys of the server's process tree over
the run ÷ requests that succeeded; the servers of a size run one after another, the order
rotating each repetition; medians (min–max of the repetitions).

usage: server_h3_floor.py HXLAB FLOOR REPS DURATION CONNS SIZES
       server_h3_floor.py HXLAB FLOOR perf DURATION CONNS SIZE   (perf record of the floor)"""
import collections, os, re, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Lab, SIZES, free_port, fmt, hx_path, hxload_server_cpu, median, peer_path, run  # noqa: E402

BIN, FLOOR = sys.argv[1], sys.argv[2]
PERF = sys.argv[3] == "perf"
REPS = 1 if PERF else int(sys.argv[3])
DUR, CONNS = int(sys.argv[4]), int(sys.argv[5])
SIZE_LIST = sys.argv[6].split(",") if len(sys.argv) > 6 and sys.argv[6] else list(SIZES)
H3_GOAL = 0.20
# The floor's GSO modes: name, extra arguments.
FLOOR_MODES = [("floor", []), ("floor/10", ["--segments", "10"])]


def start_floor(lab, size, name, extra):
    """proto_h3_server on core 1 for objects of `size`; waits for its listening line."""
    port = free_port()
    p = lab._spawn("floor", [FLOOR, str(port), str(SIZES[size]), lab.cert, lab.key] + extra)
    t0 = time.time()
    while "listening" not in open(p.log).read():
        if p.poll() is not None or time.time() - t0 > 15:
            print(open(p.log).read()[-2000:])
            raise SystemExit(f"{name} ({size}) did not start")
        time.sleep(0.05)
    s = lab._started(name, p, {"h3": port})
    return s


def floor_totals(s):
    """Stops a floor (SIGTERM) and returns its last line: requests, sendmsg calls and datagrams."""
    s.close()
    lines = [l for l in open(s.proc.log).read().splitlines() if "requests answered" in l]
    return lines[-1].replace("proto_h3_server: ", "") if lines else "(no totals line)"


def url(server, size):
    path = peer_path(size) if server.name == "caddy" else hx_path(size)
    return f"https://127.0.0.1:{server.ports['h3']}{path}"


def hxload(server, u, dur, tmp):
    """One `hxlab load --proto h3` run: (req/s, server µs/request, UDP receive-buffer drops per
    1000 requests), None when it failed."""
    return hxload_server_cpu(BIN, server, "h3", u, dur, tmp, CONNS)


def bucket(dso, sym):
    """A rough category of one symbol of the floor's profile."""
    if dso.startswith("[kernel"):
        if re.search(r"copy_to_iter|copy_from_iter|copy_user|copy_from_user|copy_to_user|memcpy|csum_partial_copy", sym):
            return "kernel: copies to/from user"
        return "kernel: UDP/IP send and receive, syscalls, scheduling"
    if re.search(r"aes|gcm|ghash|aead|ring_core|ring::|PacketKey|HeaderKey|chacha|sha256|hkdf|hmac|ecdsa|p256|x25519", sym, re.I):
        return "crypto (ring: AES-GCM, header protection, handshakes)"
    if re.search(r"memmove|memcpy|memset", sym):
        return "memcpy/memmove (user space)"
    if re.search(r"malloc|_int_free|cfree|^free$|unlink_chunk|realloc|consolidate|tcache|_int_malloc", sym):
        return "malloc/free"
    if "vdso" in dso or "clock_gettime" in sym:
        return "clock"
    if "quinn_udp" in sym:
        return "quinn-udp (sendmsg/recvmmsg wrappers, cmsgs)"
    if "rustls" in sym:
        return "rustls (handshakes, key schedule)"
    if re.search(r"quinn_proto|btree|hashbrown|vec_deque|binary_heap|BinaryHeap|bytes::|VarInt|tracing|slab|rand", sym):
        return "quinn-proto (frames, streams, ACKs, recovery, packets)"
    if "proto_h3_server" in sym or "hxlab" in sym:
        return "the floor's loop (with quinn-proto inlined into it)"
    if "libc" in dso:
        return "libc other (syscall wrappers)"
    return "other"


def perf_run(lab, tmp):
    size = SIZE_LIST[0]
    fl = start_floor(lab, size, "floor", [])
    hxload(fl, url(fl, size), 1, tmp)  # warm-up, not recorded
    data = os.path.join(tmp, "perf.data")
    # perf on core 0 beside the client; it only drains its buffers there.
    rec = subprocess.Popen(["taskset", "-c", "0", "perf", "record", "-F", "4999", "-p", str(fl.pid), "-o", data,
                            "--", "sleep", str(DUR + 1)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        got = hxload(fl, url(fl, size), DUR, tmp)
        rec.wait(timeout=DUR + 60)
    finally:
        if rec.poll() is None:
            rec.terminate()
            rec.wait()
    if got:
        print(f"floor at {size} under perf: {got[0]:.0f} req/s, {got[1]:.2f} µs/request (perf's overhead "
              f"included), {got[2]:.1f} UDP drops per 1000 requests")
    print(f"floor totals (warm-up included): {floor_totals(fl)}")
    out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "dso,sym", "--stdio", "-q"],
                         capture_output=True, text=True, timeout=600).stdout
    tot, top = collections.Counter(), []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(.*)", line)
        if not m:
            continue
        pct, dso, sym = float(m.group(1)), m.group(2), m.group(3).strip()
        tot[bucket(dso, sym)] += pct
        if len(top) < 25:
            top.append(f"{pct:6.2f} %  {dso}  {sym[:110]}")
    print(f"\nproto_h3_server at {size}, self time by category (perf record -F 4999, {DUR} s):")
    for k, v in tot.most_common():
        print(f"{v:6.1f} %  {k}")
    print("\ntop symbols:")
    print("\n".join(top))
    keep = os.path.join(tempfile.gettempdir(), f"server-h3-floor-perf-{int(time.time())}.data")
    os.replace(data, keep)
    print(f"\nperf.data kept at {keep}")


def main():
    lab = Lab(core=1)
    tmp = tempfile.mkdtemp(prefix="server-h3-floor-")
    try:
        if PERF:
            return perf_run(lab, tmp)
        hx = lab.hxlab(BIN, h3=True)
        caddy = lab.caddy()
        floors = {(size, name): start_floor(lab, size, name, extra)
                  for size in SIZE_LIST for name, extra in FLOOR_MODES}
        time.sleep(0.5)

        def servers(size):
            return [hx] + [floors[(size, n)] for n, _ in FLOOR_MODES] + [caddy]

        for size in SIZE_LIST:  # warm-up: 1 s each, not counted
            for s in servers(size):
                hxload(s, url(s, size), 1, tmp)
        res = {}  # (server name, size) -> [(rps, µs)]
        for rep in range(REPS):
            for size in SIZE_LIST:
                ss = servers(size)
                k = rep % len(ss)
                for s in ss[k:] + ss[:k]:
                    res.setdefault((s.name, size), []).append(hxload(s, url(s, size), DUR, tmp))
            print(f"repetition {rep + 1}/{REPS} done", file=sys.stderr, flush=True)

        def med(name, size):
            runs = [r for r in res.get((name, size), []) if r]
            if not runs:
                return None, None, "", None
            cpus = [r[1] for r in runs]
            return (median([r[0] for r in runs]), median(cpus), f"{min(cpus):.1f}–{max(cpus):.1f}",
                    median([r[2] for r in runs]))

        names = ["hxlab", "floor", "floor/10", "caddy"]
        print(f"\nServer CPU per request (user+sys of the server's process tree, µs) and req/s; server on core 1 "
              f"(hxlab serve --threads 1; proto_h3_server: floor = GSO up to 45 segments (64 KiB), "
              f"floor/10 = GSO capped at 10 as quinn's driver; Caddy GOMAXPROCS=1), client hxlab load --proto h3 "
              f"-c {CONNS} -m 10 on core 0; {DUR} s per run, median of {REPS} (min–max µs); "
              f"objects: {', '.join(SIZE_LIST)} bytes (100KiB = 102400).")
        print("drops: UDP datagrams the kernel dropped for a full receive buffer (either end) per 1000 requests.")
        print(f"\n{'server':<10}{'size':>8}{'req/s':>10}{'µs/req':>10}  {'min–max':<14}{'drops':>8}")
        for size in SIZE_LIST:
            for n in names:
                r, c, span, d = med(n, size)
                print(f"{n:<10}{size:>8}{fmt(r, '.0f', 10)}{fmt(c, '.2f', 10)}  {span:<14}{fmt(d, '.1f', 8)}")
        print(f"\nratios of CPU per request (goal, issue 29: hxlab/caddy ≤ {H3_GOAL:.2f})")
        print(f"{'size':>8}{'floor/caddy':>13}{'floor10/caddy':>15}{'hxlab/caddy':>13}{'hxlab/floor':>13}"
              f"{'hxlab/floor10':>15}{'floor10/floor':>15}")
        for size in SIZE_LIST:
            c = {n: med(n, size)[1] for n in names}

            def ratio(a, b, w):
                return fmt(c[a] / c[b] if c[a] and c[b] else None, ".2f", w - 1) + "x"
            print(f"{size:>8}{ratio('floor', 'caddy', 13)}{ratio('floor/10', 'caddy', 15)}"
                  f"{ratio('hxlab', 'caddy', 13)}{ratio('hxlab', 'floor', 13)}{ratio('hxlab', 'floor/10', 15)}"
                  f"{ratio('floor/10', 'floor', 15)}")
        print("\nthe floors' own counts over all their runs (warm-up included):")
        for (size, name), s in floors.items():
            print(f"  {name:<9}{size:>7}: {floor_totals(s)}")
    finally:
        lab.close()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


main()
