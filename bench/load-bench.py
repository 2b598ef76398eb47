"""Helper of bench/load-vs-h2load.sh.

Runs every client pinned to core 0 against a server pinned to core 1 — nginx (1 worker) and
`hxlab serve --threads 1`, as the issue asks — takes the user+sys CPU time of the client child
(getrusage RUSAGE_CHILDREN) and its req/s, repeats REPS times with the tools of a row
interleaved (so a noisy minute hurts every tool of the row alike), and prints medians and
ratios against the best peer (h2load, wrk, oha).

Reference clients are measured beside them but are not peers: bench/floor-client.c (epoll)
and bench/floor-uring.c (io_uring) on the h1 rows, bench/floor-h2c.c on the h2c rows. They do
nothing but send fixed requests and find the ends of responses, so they show how much of a
client's CPU per request is the kernel's TCP path, which every client pays alike on
loopback."""
import json, os, re, resource, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

BIN, N, REPS, WRK_SECS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# Floor clients as KIND=PATH (KIND: h1 or h2c), see bench/floor-*.c.
FLOORS = [tuple(a.split("=", 1)) for a in sys.argv[5:] if "=" in a]
# HXLAB_BASE=/path/to/an/older/hxlab: its client runs beside ours in every row ("before"),
# so a change is measured against the code before it in the same run.
BASE = os.environ.get("HXLAB_BASE")
OHA = os.environ.get("OHA") or shutil.which("oha")
PEERS = {"h2load", "wrk", "oha"}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, limit=10):
    t0 = time.time()
    while time.time() - t0 < limit:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server on {port} not ready")


def run_measured(cmd, timeout=300):
    """Runs cmd pinned to core 0; returns (cpu seconds, wall seconds, stdout+stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(["taskset", "-c", "0"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}")
    return cpu, wall, p.stdout


def parse_h2load(out, wall):
    m = re.search(r"finished in ([\d.]+)(?:s|ms), ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    if not (m and done):
        raise SystemExit(f"h2load output not understood:\n{out[-2000:]}")
    return float(m.group(2)), int(done.group(2))


def parse_hxlab(out, wall):
    m = re.search(r"finished in ([\d.]+)(?:s|ms), ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ started, (\d+) done, (\d+) succeeded", out)
    if not (m and done):
        raise SystemExit(f"hxlab load output not understood:\n{out[-2000:]}")
    return float(m.group(2)), int(done.group(2))


def parse_wrk(out, wall):
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not (m and rps):
        raise SystemExit(f"wrk output not understood:\n{out[-2000:]}")
    return float(rps.group(1)), int(m.group(1))


def parse_floor(out, wall):
    m = re.search(r"floor: (\d+) requests done", out)
    if not m:
        raise SystemExit(f"floor client output not understood:\n{out[-2000:]}")
    return int(m.group(1)) / wall, int(m.group(1))


def parse_oha(out, wall):
    try:
        j = json.loads(out[out.index("{"):])
    except ValueError:
        raise SystemExit(f"oha output not understood:\n{out[-2000:]}")
    ok = sum(v for k, v in j.get("statusCodeDistribution", {}).items() if k.startswith("2"))
    return float(j["summary"]["requestsPerSec"]), int(ok)


class Row:
    def __init__(self, server, label, tools):
        if BASE:
            tools = tools + [(f"{n} before", [BASE] + cmd[1:], parse)
                             for n, cmd, parse in tools if n.startswith("hxlab")]
        self.server, self.label, self.tools = server, label, tools  # tools: [(name, cmd, parse)]
        self.cpu = {t[0]: [] for t in tools}
        self.rps = {t[0]: [] for t in tools}

    def run_once(self, rep):
        # Rotate the order each repetition: no tool always runs first after a warm-up.
        k = rep % len(self.tools)
        for name, cmd, parse in self.tools[k:] + self.tools[:k]:
            cpu, wall, out = run_measured(cmd)
            rps, done = parse(out, wall)
            if done == 0:
                raise SystemExit(f"{name}: no request succeeded:\n{out[-2000:]}")
            self.cpu[name].append(cpu * 1e6 / done)
            self.rps[name].append(rps)

    def print(self):
        med = {n: (statistics.median(self.cpu[n]), statistics.median(self.rps[n])) for n in self.cpu}
        spread = {n: (min(self.cpu[n]), max(self.cpu[n])) for n in self.cpu}
        mcpu, mrps = med["hxlab"]
        peers = {n: v for n, v in med.items() if n in PEERS}
        best_cpu = min(v[0] for v in peers.values()) if peers else None
        best_rps = max(v[1] for v in peers.values()) if peers else None
        print(f"\n{self.server} · {self.label}")
        for n, (c, r) in med.items():
            lo, hi = spread[n]
            ratio = f"{c / best_cpu:>9.2f}x" if best_cpu else f"{'':>10}"
            print(f"  {n:<16}{c:>8.2f} µs/req  ({lo:.2f}–{hi:.2f}){r:>12.0f} req/s  cpu/best peer {ratio}")
        if best_cpu:
            goal = "met" if mcpu <= 0.8 * best_cpu and mrps >= best_rps else "NOT met"
            print(f"  => hxlab vs best peer: cpu {mcpu / best_cpu:.2f}x, req/s {mrps / best_rps:.2f}x "
                  f"(goal ≤0.80x cpu and ≥1.00x req/s: {goal})")
        for n in med:
            if n.startswith("floor") and best_cpu:
                print(f"  => {n} (a client that only sends and receives) vs best peer: "
                      f"{med[n][0] / best_cpu:.2f}x; hxlab over it: +{mcpu - med[n][0]:.2f} µs/req")
        for n in med:
            if n.endswith(" before"):
                now = med[n[: -len(" before")]]
                print(f"  => {n[: -len(' before')]} now vs before: cpu {now[0] / med[n][0]:.2f}x, "
                      f"req/s {now[1] / med[n][1]:.2f}x")
        if "hxlab h2" in med:
            print(f"  => hxlab h3 vs hxlab h2 on the same server: cpu {mcpu / med['hxlab h2'][0]:.2f}x, "
                  f"req/s {mrps / med['hxlab h2'][1]:.2f}x")


def main():
    tmp = tempfile.mkdtemp(prefix="hxlab-bench-")
    procs = []
    try:
        os.chmod(tmp, 0o755)  # nginx workers run as another user when started as root
        www = os.path.join(tmp, "www")
        os.makedirs(www, mode=0o755)
        with open(os.path.join(www, "obj"), "wb") as f:
            f.write(b"x" * 100)
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                        "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-addext", "basicConstraints=critical,CA:FALSE", "-keyout", key, "-out", cert],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        plain, h2c, tls = free_port(), free_port(), free_port()
        conf = f"""worker_processes 1; daemon off; master_process off; error_log {tmp}/error.log; pid {tmp}/nginx.pid;
events {{ worker_connections 4096; }}
http {{ access_log off; keepalive_requests 10000000;
  client_body_temp_path {tmp}/b; proxy_temp_path {tmp}/p; fastcgi_temp_path {tmp}/f; uwsgi_temp_path {tmp}/u; scgi_temp_path {tmp}/s;
  server {{ listen 127.0.0.1:{plain}; listen 127.0.0.1:{h2c} http2; listen 127.0.0.1:{tls} ssl http2;
    ssl_protocols TLSv1.3; ssl_certificate {cert}; ssl_certificate_key {key}; root {www}; }} }}
"""
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write(conf)
        procs.append(subprocess.Popen(["taskset", "-c", "1", "nginx", "-p", tmp, "-c", os.path.join(tmp, "nginx.conf")]))
        for p in (plain, h2c, tls):
            wait_port(p)

        ready = os.path.join(tmp, "ready.json")
        procs.append(subprocess.Popen(["taskset", "-c", "1", BIN, "serve", "--tls-port", "0", "--plain-port", "0",
                                       "--threads", "1", "--cert-out", os.path.join(tmp, "serve-cert.pem"),
                                       "--ready-file", ready],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        t0 = time.time()
        while not os.path.exists(ready) and time.time() - t0 < 20:
            time.sleep(0.05)
        with open(ready) as f:
            r = json.load(f)

        n = str(N)
        hx = [BIN, "load", "--no-progress", "-n", n]
        servers = [
            ("nginx (1 worker)", f"http://127.0.0.1:{plain}/obj", f"http://127.0.0.1:{h2c}/obj",
             f"https://127.0.0.1:{tls}/obj", ("127.0.0.1", str(plain), "/obj")),
            ("hxlab serve --threads 1", f"http://{r['plain']}/bytes/100", f"http://{r['plain']}/bytes/100",
             f"https://{r['tls']}/bytes/100", tuple(r["plain"].rsplit(":", 1)) + ("/bytes/100",)),
        ]
        rows = []
        for name, u1, u2c, utls, (fhost, fport, fpath) in servers:
            h1_tools = [("hxlab", hx + ["-c", "50", u1], parse_hxlab),
                        ("h2load", ["h2load", "--h1", "-n", n, "-c", "50", u1], parse_h2load),
                        ("wrk", ["wrk", "-t", "1", "-c", "50", "-d", f"{WRK_SECS}s", u1], parse_wrk)]
            for kind, floor in FLOORS:
                if kind == "h1":
                    h1_tools.append((os.path.basename(floor), [floor, fhost, fport, fpath, "50", n], parse_floor))
            rows.append(Row(name, "h1 c=50", h1_tools))
            h2c_host, h2c_port = u2c.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
            h2c_tools = [("hxlab", hx + ["-c", "50", "-m", "10", "--proto", "h2c", u2c], parse_hxlab),
                         ("h2load", ["h2load", "-n", n, "-c", "50", "-m", "10", u2c], parse_h2load)]
            for kind, floor in FLOORS:
                if kind == "h2c":
                    h2c_tools.append((os.path.basename(floor), [floor, h2c_host, h2c_port, fpath, "50", "10", n],
                                      parse_floor))
            rows.append(Row(name, "h2c c=50 m=10", h2c_tools))
            rows.append(Row(name, "h2 TLS c=50 m=10", [
                ("hxlab", hx + ["-c", "50", "-m", "10", "--proto", "h2", "-k", utls], parse_hxlab),
                ("h2load", ["h2load", "-n", n, "-c", "50", "-m", "10", utls], parse_h2load)]))

        # h3: only hxlab serve speaks it here (nginx-light has no QUIC). Our h2 on the same
        # server is the reference; oha is the peer when it is installed (OHA=path or on PATH).
        n3 = str(max(N // 4, 1000))
        h3 = [BIN, "load", "--no-progress", "-n", n3, "-c", "50", "-m", "10", "-k"]
        h3_tools = [("hxlab", h3 + ["--proto", "h3", f"https://{r['h3']}/bytes/100"], parse_hxlab),
                    ("hxlab h2", h3 + ["--proto", "h2", f"https://{r['tls']}/bytes/100"], parse_hxlab)]
        if OHA:
            h3_tools.append(("oha", [OHA, "--no-tui", "--output-format", "json", "-n", n3, "-c", "50", "-p", "10",
                                     "--http-version", "3", "--insecure", f"https://{r['h3']}/bytes/100"], parse_oha))
        else:
            print("(oha not found: set OHA=path or `cargo install oha --features http3`; h3 row without it)",
                  file=sys.stderr)
        rows.append(Row("hxlab serve --threads 1", f"h3 c=50 m=10 (n={n3})", h3_tools))

        # Warm the servers and the page cache once.
        run_measured(hx + ["-c", "50", servers[0][1]])
        run_measured(hx + ["-c", "50", servers[1][1]])
        for rep in range(REPS):
            for row in rows:
                row.run_once(rep)
            print(f"repetition {rep + 1}/{REPS} done", file=sys.stderr)

        print(f"\nclient CPU per request (user+sys) and req/s: median of {REPS} interleaved runs (min–max CPU); "
              f"n={N}; server pinned to core 1, client to core 0; 100-byte object")
        for row in rows:
            row.print()
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


main()
