"""Helper of bench/load-vs-h2load.sh: runs each client pinned to core 0 against nginx pinned
to core 1, takes user+sys CPU of the client child (getrusage RUSAGE_CHILDREN) and its req/s,
repeats, and prints medians and ratios."""
import json, os, re, resource, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

BIN, N, REPS, WRK_SECS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


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
    """Runs cmd pinned to core 0; returns (cpu seconds, stdout+stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(["taskset", "-c", "0"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}")
    return cpu, p.stdout


def parse_h2load(out):
    m = re.search(r"finished in ([\d.]+)(?:s|ms), ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    if not (m and done):
        raise SystemExit(f"h2load output not understood:\n{out[-2000:]}")
    return float(m.group(2)), int(done.group(2))


def parse_hxlab(out):
    m = re.search(r"finished in ([\d.]+)(?:s|ms), ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ started, (\d+) done, (\d+) succeeded", out)
    if not (m and done):
        raise SystemExit(f"hxlab load output not understood:\n{out[-2000:]}")
    return float(m.group(2)), int(done.group(2))


def parse_wrk(out):
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    return float(rps.group(1)), int(m.group(1))


def measure(name, cmd, parse):
    cpus, rpss = [], []
    for _ in range(REPS):
        cpu, out = run_measured(cmd)
        rps, done = parse(out)
        if done == 0:
            raise SystemExit(f"{name}: no request succeeded:\n{out[-2000:]}")
        cpus.append(cpu * 1e6 / done)
        rpss.append(rps)
    return statistics.median(cpus), statistics.median(rpss)


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
        conf = f"""worker_processes 1; daemon off; error_log {tmp}/error.log; pid {tmp}/nginx.pid;
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
        u_plain = f"http://127.0.0.1:{plain}/obj"
        u_h2c = f"http://127.0.0.1:{h2c}/obj"
        u_tls = f"https://127.0.0.1:{tls}/obj"
        n = str(N)
        hx = [BIN, "load", "--no-progress", "-n", n]
        rows = []

        def row(label, mine, peers):
            rows.append((label, mine, peers))

        # Warm the server and page cache once.
        run_measured(hx + ["-c", "50", u_plain])
        row("h1 c=50", measure("hxlab", hx + ["-c", "50", u_plain], parse_hxlab),
            {"h2load": measure("h2load", ["h2load", "--h1", "-n", n, "-c", "50", u_plain], parse_h2load),
             "wrk": measure("wrk", ["wrk", "-t", "1", "-c", "50", "-d", f"{WRK_SECS}s", u_plain], parse_wrk)})
        row("h2c c=50 m=10", measure("hxlab", hx + ["-c", "50", "-m", "10", "--proto", "h2c", u_h2c], parse_hxlab),
            {"h2load": measure("h2load", ["h2load", "-n", n, "-c", "50", "-m", "10", u_h2c], parse_h2load)})
        row("h2 TLS c=50 m=10", measure("hxlab", hx + ["-c", "50", "-m", "10", "--proto", "h2", "-k", u_tls], parse_hxlab),
            {"h2load": measure("h2load", ["h2load", "-n", n, "-c", "50", "-m", "10", u_tls], parse_h2load)})

        # h3: our h3 vs our h2 against hxlab serve (single-threaded, core 1).
        try:
            ready = os.path.join(tmp, "ready.json")
            procs.append(subprocess.Popen(["taskset", "-c", "1", BIN, "serve", "--tls-port", "0", "--plain-port", "0",
                                           "--threads", "1", "--ready-file", ready],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            t0 = time.time()
            while not os.path.exists(ready) and time.time() - t0 < 20:
                time.sleep(0.05)
            with open(ready) as f:
                r = json.load(f)
            n3 = str(max(N // 4, 1000))
            h3 = [BIN, "load", "--no-progress", "-n", n3, "-c", "50", "-m", "10", "-k"]
            mine = measure("hxlab h3", h3 + ["--proto", "h3", f"https://{r['h3']}/bytes/100"], parse_hxlab)
            ours_h2 = measure("hxlab h2", h3 + ["--proto", "h2", f"https://{r['tls']}/bytes/100"], parse_hxlab)
            row("h3 c=50 m=10 (serve)", mine, {"hxlab h2": ours_h2})
        except Exception as e:  # the h3 row is informative only
            print(f"(h3 row skipped: {e})", file=sys.stderr)

        print(f"\nclient CPU per request (user+sys, µs) and req/s; median of {REPS}; n={N}; "
              "server pinned to core 1, client to core 0")
        print(f"{'row':<22}{'tool':<10}{'µs/req':>10}{'req/s':>12}{'cpu ratio':>11}{'rps ratio':>11}")
        for label, (mcpu, mrps), peers in rows:
            print(f"{label:<22}{'hxlab':<10}{mcpu:>10.2f}{mrps:>12.0f}")
            for name, (pcpu, prps) in peers.items():
                print(f"{'':<22}{name:<10}{pcpu:>10.2f}{prps:>12.0f}{mcpu / pcpu:>11.2f}{mrps / prps:>11.2f}")
            if label.startswith("h3"):
                continue  # our own h2 is a reference, not a peer to beat
            best_cpu = min(p[0] for p in peers.values())
            best_rps = max(p[1] for p in peers.values())
            goal = "met" if mcpu <= 0.8 * best_cpu and mrps >= best_rps else "NOT met"
            print(f"{'':<22}{'=> vs best peer: cpu ' + format(mcpu / best_cpu, '.2f') + 'x, req/s ' + format(mrps / best_rps, '.2f') + 'x (goal ≤0.80x cpu, ≥1.00x req/s: ' + goal + ')'}")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


main()
