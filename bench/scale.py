"""Helper of bench/scale.sh: memory per connection at many connections, and TLS handshakes/s.

Server on core 1 (hxlab serve --threads 1, nginx 1 worker, Caddy GOMAXPROCS=1 for h3), client
on core 0. Per connection = (RSS with N connections in the state − RSS of the baseline) / N,
RSS = VmRSS summed over the process tree (nginx: master + worker).
  server baseline: the server just started, before any connection (it is restarted for each
                   measurement, so every state starts from the same baseline);
  client baseline: the same client command with -c 1 in the same state.
States:
  open      handshaken, no request sent: `hxlab load --rate 0.001 -c N -D 347d` (the open model
            opens every connection at once; connection k's first request is due at k/rate, so
            only connection 0 sends one while we look)
  idle      each connection has done a request and waits: `--rate N/10 -c N`, read after 12 s
            (connection k's requests are due at k/rate and every 10 s after; ~0 in flight)
  inflight  one request in flight on each: `-n N -c N` (closed model, one request each) on a
            delayed route: hxlab serve /delay/300000 (5 min, --max-delay 600s); nginx has no delay, so a location
            behind `limit_req rate=1r/s burst=1000000` holds the requests (queued, unanswered)
h2load cannot hold connections open without requests (it sends at once and closes when its
requests are done), so it is measured in the inflight state only; it has no h3. Caddy (the h3
peer) has no delay route, so h3 inflight is hxlab only. A state is read once the connection count
(ss, TCP) reaches N and RSS is stable (two samples 1 s apart within 0.5 %)."""
import os, signal, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Lab, parse_h2load, run, tree_rss_kib  # noqa: E402

BIN = sys.argv[1]
N_TCP, N_H3 = int(sys.argv[2]), int(sys.argv[3])
HS_N, HS_C = int(sys.argv[4]), int(sys.argv[5])
ONLY = sys.argv[6].split(",") if len(sys.argv) > 6 and sys.argv[6] else ["mem", "handshakes"]
NOFILE = int(os.environ.get("SCALE_NOFILE", "20000"))
SLOW_NGINX = "limit_req_zone $server_port zone=slow:10m rate=1r/s;"


def established(port):
    out = subprocess.run(["ss", "-Htn", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if line.strip())


def settle(pids, port, n, limit=90):
    """Waits until `port` has n established connections (TCP; port None: skipped) and the RSS of
    every pid is stable; returns their RSS, KiB."""
    t0 = time.time()
    seen, since = -1, time.time()
    while port and time.time() - t0 < limit:
        k = established(port)
        if k >= n:
            break
        if k > seen:
            seen, since = k, time.time()
        elif k > 0 and time.time() - since > 5:
            # Not grown for 5 s: nginx's inflight state answers 1 request/s (limit_req), and
            # those connections are done and closed.
            print(f"  (connections stopped at {k} of {n})", flush=True)
            break
        time.sleep(0.5)
    if port and established(port) < n:
        print(f"  ! {established(port)} of {n} connections established after {time.time() - t0:.0f} s", flush=True)
    last, t1 = None, time.time()
    while last is None or time.time() - t1 < 30:
        cur = [tree_rss_kib(p) for p in pids]
        if last and all(abs(a - b) <= 0.005 * max(a, 1) for a, b in zip(cur, last)):
            return cur
        last = cur
        time.sleep(1)
    return last


def start_client(cmd):
    return subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def client_cmd(tool, proto, url, state, n):
    if tool == "h2load":
        args = ["h2load", "-n", str(n), "-c", str(n)]
        if proto.startswith("h1"):
            args.append("--h1")
        return args + [url]
    base = [BIN, "load", "--no-progress", "-q", "-k", "--proto", proto.split("+")[0], "--connect-timeout", "60s",
            "--timeout", "300s", "-c", str(n)]
    if state == "open":
        # -D must reach connection N-1's first request (due at (N-1)/0.001 s), else that
        # connection is never opened: 347 days (the most -D takes is a year) covers N ≤ 30,000.
        return base + ["--interval", "0", "--rate", "0.001", "-D", "30000000s", url]
    if state == "idle":
        return base + ["--interval", "0", "--rate", str(max(n / 10, 0.2)), "-D", "600s", url]
    return base + ["--interval", "0", "-n", str(n), url]


def one(lab, server_kind, proto, state, tool, n):
    """Starts a fresh server, takes its baseline, runs the client with n connections, waits for
    the state; returns (server KiB/conn, client RSS KiB at n)."""
    if server_kind == "hxlab":
        s = lab.hxlab(BIN, h3=(proto == "h3"),
                      extra=["--quic-max-connections", str(max(N_H3, 1024)), "--max-delay", "600s"])
    elif server_kind == "nginx":
        s = lab.nginx(extra_http=SLOW_NGINX, worker_connections=NOFILE - 100,
                      slow_location=True)
    else:
        s = lab.caddy()
    try:
        time.sleep(0.5)
        base = settle([s.pid], None, 0, limit=5)[0]
        if proto == "h1":
            scheme, port = "http", s.ports["plain"]
        elif proto in ("h2", "h1+TLS"):
            scheme, port = "https", s.ports["tls"]
        else:
            scheme, port = "https", s.ports["h3"]
        if state == "inflight":
            path = "/delay/300000" if server_kind == "hxlab" else "/slow/100"
        else:
            path = "/bytes/100" if server_kind == "hxlab" else "/100"
        url = f"{scheme}://127.0.0.1:{port}{path}"
        c = start_client(client_cmd(tool, proto, url, state, n))
        try:
            t0 = time.time()
            if state == "idle":
                time.sleep(12)
            s_rss, c_rss = settle([s.pid, c.pid], port if proto != "h3" else None, n)
            if proto == "h3" and state == "idle" and time.time() - t0 < 12:
                time.sleep(12 - (time.time() - t0))
            if c.poll() is not None:
                print(f"  ! {tool} exited early ({c.returncode}): {c.stderr.read()[-300:]}", flush=True)
                return None, None
            return (s_rss - base) / n, c_rss
        finally:
            stop(c)
    finally:
        s.close()
        lab.servers.remove(s)


def memory(lab):
    print("\n== memory per connection (KiB), server core 1, client core 0")
    print("   per connection = (RSS at N − baseline) / N; server baseline: freshly started, no connection; "
          "client baseline: the same command at -c 1")
    rows = []
    # h1+TLS: the idle state only (what an idle keep-alive connection costs once rustls holds
    # its session; no goal of its own, the peer's figure beside it).
    for proto, n, states in (("h1", N_TCP, ("open", "idle", "inflight")), ("h1+TLS", N_TCP, ("idle",)),
                             ("h2", N_TCP, ("open", "idle", "inflight")), ("h3", N_H3, ("open", "idle", "inflight"))):
        for state in states:
            peer = "nginx" if proto != "h3" else "caddy"
            tools = ["hxlab"] + (["h2load"] if state == "inflight" and proto != "h3" else [])
            # Server side: hxlab serve vs the peer, both loaded by hxlab load.
            hs, hc = one(lab, "hxlab", proto, state, "hxlab", n)
            if proto == "h3" and state == "inflight":
                ps = None
                pnote = "Caddy's file_server has no delay route: no h3 inflight row for it"
            else:
                ps, _ = one(lab, peer, proto, state, "hxlab", n)
                pnote = ""
            # Client side: hxlab load (hc, at N; baseline at -c 1) vs h2load (inflight only).
            _, hc1 = one(lab, "hxlab", proto, state, "hxlab", 1)
            cl = {"hxlab": (hc - hc1) / n if hc is not None and hc1 is not None else None}
            if "h2load" in tools:
                _, h2n = one(lab, "hxlab", proto, state, "h2load", n)
                _, h21 = one(lab, "hxlab", proto, state, "h2load", 1)
                cl["h2load"] = (h2n - h21) / n if h2n is not None and h21 is not None else None
            rows.append((proto, n, state, hs, ps, peer, pnote, cl))
            print(f"  {proto} {state} done", file=sys.stderr, flush=True)

    def f(x):
        return f"{x:>9.1f}" if x is not None else f"{'-':>9}"

    def r(a, b):
        if a is None or b is None or b <= 0:
            return f"{'-':>7}", ""
        return f"{a / b:>6.2f}x", ("met" if a <= b else "NOT met")
    print(f"\n{'proto':<7}{'N':>6} {'state':<9}| {'server':>9}{'peer':>9}{'ours/peer':>11} goal   | "
          f"{'client':>9}{'h2load':>9}{'ours/h2load':>12} goal")
    for proto, n, state, hs, ps, peer, pnote, cl in rows:
        sr, sg = r(hs, ps)
        # Issue 29's server goals: h1 idle ≤ 2 KiB per connection (nginx preallocates its
        # connection table, so its growth reads ~0), h1 in flight ≤ 1× nginx, h2 ≤ 0.8× nginx;
        # h1 open has no goal of its own.
        if proto == "h1" and state == "idle" and hs is not None:
            sg = "met" if hs <= 2.0 else "NOT met"
        elif (proto == "h1" and state == "open") or proto == "h1+TLS":
            sg = "-"
        elif proto == "h2" and hs is not None and ps:
            sg = "met" if hs <= 0.8 * ps else "NOT met"
        cr, cg = r(cl.get("hxlab"), cl.get("h2load"))
        h2l = f(cl["h2load"]) if "h2load" in cl else f"{'n/a':>9}"
        print(f"{proto:<7}{n:>6} {state:<9}| {f(hs)}{f(ps)}{sr:>11} {sg:<7}| {f(cl['hxlab'])}{h2l}{cr:>12} {cg}"
              f"   (peer: {peer}{'; ' + pnote if pnote else ''})")
    print("  server = hxlab serve; peer = nginx (h1, h1+TLS, h2 over TLS) or Caddy (h3); client = hxlab load; "
          "h2load: inflight only (it cannot hold idle connections), no h3")
    print("  server goals (issue 29): h1 idle ≤ 2 KiB per connection, h1 inflight ≤ 1x nginx, "
          "h2 ≤ 0.8x nginx; elsewhere ours ≤ peer")


def handshakes(lab):
    print(f"\n== new TLS handshakes per second against hxlab serve --threads 1 (core 1), client core 0, "
          f"{HS_N} connections, one request each")
    s = lab.hxlab(BIN, h3=False)
    tls = f"https://127.0.0.1:{s.ports['tls']}/bytes/100"
    try:
        def measure(name, cmd, parse):
            s0 = s.cpu()
            t0 = time.monotonic()
            rc, out = run(cmd)
            wall = time.monotonic() - t0
            got = parse(out) if rc == 0 else None
            if not got:
                print(f"  ! {name} failed ({rc}):\n    " + "\n    ".join(out.strip().splitlines()[-4:]), flush=True)
                return None
            ok, secs = got
            print(f"  {name:<58}{ok / secs:>9.0f} handshakes/s  ({ok} in {secs:.2f} s; server "
                  f"{(s.cpu() - s0) * 1e6 / max(ok, 1):.0f} µs CPU each)", flush=True)
            return ok / secs

        import re

        def p_hx(out):
            m = re.search(r"finished in ([\d.]+)(s|ms),", out)
            d = re.search(r"requests: \d+ started, \d+ done, (\d+) succeeded", out)
            if not (m and d):
                return None
            return int(d.group(1)), float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)

        def p_h2(out):
            m = re.search(r"finished in ([\d.]+)(s|ms),", out)
            got = parse_h2load(out)
            if not (m and got) or "0 failed" not in out:
                return None
            return got[1], float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)

        hx = [BIN, "load", "-k", "--no-progress", "--no-keepalive"]
        # Warm-up, not counted.
        run(hx + ["-n", "500", "-c", str(HS_C), "--proto", "h1", tls])
        a = measure(f"hxlab load --no-keepalive h1+TLS -c {HS_C}",
                    hx + ["-n", str(HS_N), "-c", str(HS_C), "--proto", "h1", tls], p_hx)
        # h2load has no --no-keepalive; `Connection: close` makes hxlab serve close after each
        # response and h2load opens a new connection for the client's next request.
        b = measure(f"h2load --h1 -H 'Connection: close' -c {HS_C}",
                    ["h2load", "--h1", "-H", "Connection: close", "-n", str(HS_N), "-c", str(HS_C), tls], p_h2)
        c = measure(f"hxlab load --no-keepalive h2 -c {HS_C}",
                    hx + ["-n", str(HS_N), "-c", str(HS_C), "--proto", "h2", tls], p_hx)
        # h2: no way to close after each request in h2load; -n N -c N opens N connections, one
        # request each, all at once (a different concurrency: noted).
        d = measure(f"h2load h2 -n {HS_N // 5} -c {HS_N // 5} (all at once)",
                    ["h2load", "-n", str(HS_N // 5), "-c", str(HS_N // 5), tls], p_h2)
        e = measure(f"hxlab load h2 -n {HS_N // 5} -c {HS_N // 5} (all at once)",
                    [BIN, "load", "-k", "--no-progress", "--proto", "h2", "-n", str(HS_N // 5),
                     "-c", str(HS_N // 5), tls], p_hx)
        for what, x, y in (("h1+TLS, hxlab load / h2load", a, b), ("h2 all at once, hxlab load / h2load", e, d),
                           ("hxlab load h2 --no-keepalive / h1 --no-keepalive", c, a)):
            if x and y:
                print(f"  => {what}: {x / y:.2f}x")
    finally:
        s.close()
        lab.servers.remove(s)


def main():
    lab = Lab(core=1, nofile=NOFILE)
    try:
        if "mem" in ONLY:
            memory(lab)
        if "handshakes" in ONLY:
            handshakes(lab)
    finally:
        lab.close()


main()
