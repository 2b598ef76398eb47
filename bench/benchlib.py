"""Shared helpers of bench/origins.py, bench/client-h3.py, bench/scale.py and bench/soak.py.

Starts the servers the benchmarks compare (hxlab serve, nginx, h2o, Caddy), each pinned to a
core and configured alike — one worker / one thread / GOMAXPROCS=1, the same ECDSA P-256
certificate (for `localhost` and 127.0.0.1), the same static objects, no access log — and
reads what a process tree costs from /proc: CPU time (user+sys, every thread of every
process in the tree) and resident memory (VmRSS summed over the tree). Traffic stays on
127.0.0.1. Every process started here is ended by its own PID (Servers.close, called from
the scripts' `finally`)."""
import json, os, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

TICK = os.sysconf("SC_CLK_TCK")
SIZES = {"100": 100, "100KiB": 100 * 1024}


def free_port(kind=socket.SOCK_STREAM):
    """A port free for TCP and UDP alike (h3 servers use the TLS port number on UDP)."""
    while True:
        s = socket.socket(socket.AF_INET, kind)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        other = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if kind == socket.SOCK_STREAM
                              else socket.SOCK_STREAM)
        try:
            other.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            other.close()


def wait_port(port, limit=15, proc=None, name="server"):
    t0 = time.time()
    while time.time() - t0 < limit:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"{name} exited ({proc.returncode}) before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{name}: port {port} not ready after {limit} s")


def tree(pid):
    """pid and every live descendant."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def tree_cpu(pid):
    """User+sys CPU seconds of pid's process tree (every thread; live processes)."""
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


def tree_rss_kib(pid):
    """VmRSS of pid's process tree, KiB."""
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return total


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec=".2f", width=0):
    return f"{'-':>{width}}" if x is None else f"{x:{width}{spec}}"


class Server:
    def __init__(self, name, proc, ports):
        self.name, self.proc, self.ports = name, proc, ports

    @property
    def pid(self):
        return self.proc.pid

    def cpu(self):
        return tree_cpu(self.pid)

    def rss_kib(self):
        return tree_rss_kib(self.pid)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Lab:
    """A scratch directory with a certificate and the objects, and the servers started in it."""

    def __init__(self, core=1, nofile=None, bind="127.0.0.1"):
        # SIGTERM (or the wrapper's end) runs the scripts' `finally`: no server left behind.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        self.tmp = tempfile.mkdtemp(prefix="hxlab-bench-")
        os.chmod(self.tmp, 0o755)  # nginx and h2o workers run as an unprivileged user
        self.core = core
        self.nofile = nofile
        # Where the peers listen: 0.0.0.0 to be reached from a `hxlab link` namespace.
        self.bind = bind
        self.www = os.path.join(self.tmp, "www")
        os.makedirs(self.www, mode=0o755)
        for name, n in SIZES.items():
            with open(os.path.join(self.www, name), "wb") as f:
                f.write(b"x" * n)
            os.chmod(os.path.join(self.www, name), 0o644)
        self.cert, self.key = os.path.join(self.tmp, "cert.pem"), os.path.join(self.tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "2", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-addext", "basicConstraints=critical,CA:FALSE", "-keyout", self.key, "-out", self.cert],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.chmod(self.key, 0o644)  # read by h2o/nginx after they drop privileges; scratch key only
        self.servers = []

    def _spawn(self, name, cmd, env=None):
        log = os.path.join(self.tmp, f"{name}-{len(self.servers)}.log")
        with open(log, "w") as out:
            p = subprocess.Popen(["taskset", "-c", str(self.core)] + cmd, stdout=out, stderr=subprocess.STDOUT,
                                 env=env, cwd=self.tmp)
        p.log = log
        return p

    def _started(self, name, proc, ports, wait=()):
        s = Server(name, proc, ports)
        self.servers.append(s)
        for port in wait:
            try:
                wait_port(port, proc=proc, name=name)
            except SystemExit:
                print(open(proc.log).read()[-2000:])
                raise
        return s

    def hxlab(self, binary, threads=1, h3=True, extra=()):
        """`hxlab serve --threads N`; ports: tls (also h3 on UDP), plain."""
        ready = os.path.join(self.tmp, f"hx-ready-{len(self.servers)}.json")
        tls, plain = free_port(), free_port()
        cmd = [binary, "serve", "--threads", str(threads), "--tls-port", str(tls), "--plain-port", str(plain),
               "--cert", self.cert, "--key", self.key, "--ready-file", ready] + list(extra)
        if not h3:
            cmd.append("--no-h3")
        p = self._spawn("hxlab", cmd)
        t0 = time.time()
        while not os.path.exists(ready):
            if p.poll() is not None or time.time() - t0 > 20:
                print(open(p.log).read()[-2000:])
                raise SystemExit("hxlab serve did not start")
            time.sleep(0.05)
        ports = {"tls": tls, "plain": plain, "h2c": plain}
        if h3:
            ports["h3"] = tls
        return self._started("hxlab", p, ports)

    def nginx(self, extra_http="", worker_connections=4096, slow_location=False, sendfile=False):
        """nginx, 1 worker (plus its master); ports: plain (h1), h2c, tls (h1+h2 by ALPN).
        sendfile: `sendfile on; tcp_nopush on;` as Debian's /etc/nginx/nginx.conf ships them (and
        as the lab's nginx origin, crates/hxlab-lab/origins/nginx.toml); off by default, nginx's
        own default, which issue 29's figures and goals were measured with."""
        plain, h2c, tls = free_port(), free_port(), free_port()
        d = os.path.join(self.tmp, "nginx")
        os.makedirs(d, exist_ok=True)
        rlimit = f"worker_rlimit_nofile {self.nofile};" if self.nofile else ""
        # /slow/: requests held unanswered (bench/scale.py's inflight state; needs a
        # `limit_req_zone ... zone=slow` in extra_http).
        site = f"root {self.www};" + (f" location /slow/ {{ limit_req zone=slow burst=1000000; alias {self.www}/; }}"
                                      if slow_location else "")
        deployed = "sendfile on; tcp_nopush on;" if sendfile else ""
        conf = f"""worker_processes 1; daemon off; error_log {d}/error.log; pid {d}/nginx.pid; {rlimit}
events {{ worker_connections {worker_connections}; }}
http {{ access_log off; keepalive_requests 10000000; keepalive_timeout 600s; http2_max_concurrent_streams 128;
  {deployed}
  default_type application/octet-stream; open_file_cache max=100 inactive=60s;
  client_body_temp_path {d}/b; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f; uwsgi_temp_path {d}/u;
  scgi_temp_path {d}/s; http2_idle_timeout 600s; client_header_timeout 600s; send_timeout 600s; {extra_http}
  ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate {self.cert}; ssl_certificate_key {self.key};
  server {{ listen {self.bind}:{plain} backlog=16384; {site} }}
  server {{ listen {self.bind}:{h2c} http2 backlog=16384; {site} }}
  server {{ listen {self.bind}:{tls} ssl http2 backlog=16384; {site} }}
}}
"""
        with open(os.path.join(d, "nginx.conf"), "w") as f:
            f.write(conf)
        p = self._spawn("nginx", ["nginx", "-p", d, "-c", os.path.join(d, "nginx.conf")])
        return self._started("nginx", p, {"plain": plain, "h2c": h2c, "tls": tls}, wait=(plain, h2c, tls))

    def h2o(self):
        """h2o, num-threads 1; ports: plain (h1 and h2c by prior knowledge), tls (h1+h2)."""
        plain, tls = free_port(), free_port()
        conf = f"""num-threads: 1
error-log: /dev/stderr
listen:
  host: {self.bind}
  port: {plain}
listen:
  host: {self.bind}
  port: {tls}
  ssl:
    certificate-file: {self.cert}
    key-file: {self.key}
    minimum-version: TLSv1.2
    ocsp-update-interval: 0
hosts:
  default:
    paths:
      /:
        file.dir: {self.www}
"""
        path = os.path.join(self.tmp, "h2o.conf")
        with open(path, "w") as f:
            f.write(conf)
        p = self._spawn("h2o", ["h2o", "-c", path])
        return self._started("h2o", p, {"plain": plain, "h2c": plain, "tls": tls}, wait=(plain, tls))

    def caddy(self):
        """Caddy (GOMAXPROCS=1), h1+h2+h3 on one TLS port (h3 on its UDP twin), our certificate.
        Caddy picks a certificate by SNI; `default_sni localhost` lets clients that reach it as
        https://127.0.0.1 (no SNI) in, so traffic stays on 127.0.0.1 whatever localhost means."""
        tls = free_port()
        conf = f"""{{
  auto_https off
  admin off
  default_sni localhost
  servers {{
    protocols h1 h2 h3
  }}
}}
https://localhost:{tls}, https://127.0.0.1:{tls} {{
  bind {self.bind}
  tls {self.cert} {self.key}
  root * {self.www}
  file_server
}}
"""
        path = os.path.join(self.tmp, "Caddyfile")
        with open(path, "w") as f:
            f.write(conf)
        env = dict(os.environ, GOMAXPROCS="1", HOME=self.tmp, XDG_DATA_HOME=os.path.join(self.tmp, "xdg"),
                   XDG_CONFIG_HOME=os.path.join(self.tmp, "xdg"))
        p = self._spawn("caddy", ["caddy", "run", "--config", path, "--adapter", "caddyfile"], env=env)
        return self._started("caddy", p, {"tls": tls, "h3": tls}, wait=(tls,))

    def close(self):
        for s in reversed(self.servers):
            s.close()
        if not os.environ.get("KEEP"):
            shutil.rmtree(self.tmp, ignore_errors=True)


def hx_path(size):
    """hxlab serve's path for an object of SIZES[size] bytes."""
    return f"/bytes/{SIZES[size]}"


def peer_path(size):
    return f"/{size}"


def run(cmd, core=0, timeout=900):
    """Runs cmd pinned to `core`; returns (returncode, stdout+stderr)."""
    p = subprocess.run(["taskset", "-c", str(core)] + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout


def parse_h2load(out):
    """(req/s, requests succeeded) of an h2load run, None when it failed."""
    m = re.search(r"finished in ([\d.]+)(?:s|ms), ([\d.]+) req/s", out)
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    if not (m and done):
        return None
    return float(m.group(2)), int(done.group(2))


def parse_hxlab_json(path):
    """(req/s, requests succeeded, result) of an `hxlab load --json FILE` run."""
    with open(path) as f:
        r = json.load(f)
    dur = r.get("duration_s") or 0
    return (r["requests_done"] / dur if dur else 0.0), r["requests_succeeded"], r


def measure_clients(tools, sizes, reps, server, js, timeout=900):
    """Client CPU per request of several clients against one `server`, as bench/client_h3.py
    and bench/client_h3_floors.py measure it. `tools(size)` gives (n, [(name, cmd, parse)]);
    `parse(out)` gives (req/s, completed, *extra) or None. Each client runs once as a warm-up
    (n cut to 2000, not counted), then `reps` times per size in rotating order. Returns
    {(name, size): [(client µs/req, req/s, server µs/req, *extra) or None]}: None for a run
    that failed, hung past `timeout` or completed fewer than n (said on stdout). `js` (the
    JSON file an hxlab client writes) is removed before each run."""
    res = {}
    for size in sizes:
        n, ts = tools(size)
        for name, cmd, parse in ts:
            run_measured([c if c != str(n) else str(min(n, 2000)) for c in cmd], timeout=timeout)
    for rep in range(reps):
        for size in sizes:
            n, ts = tools(size)
            k = rep % len(ts)
            for name, cmd, parse in ts[k:] + ts[:k]:
                if os.path.exists(js):
                    os.unlink(js)
                s0 = server.cpu()
                try:
                    rc, cpu, wall, out = run_measured(cmd, timeout=timeout)
                except Exception as e:  # a client that hangs: counted as failed, not fatal
                    rc, cpu, wall, out = -1, 0, 0, f"{e}"
                scpu = server.cpu() - s0
                got = parse(out) if rc == 0 else None
                if not got or got[1] < n:
                    print(f"  ! {name} {size}: rc {rc}, {got[1] if got else 0}/{n} done:\n    "
                          + "\n    ".join(out.strip().splitlines()[-4:]), flush=True)
                    res.setdefault((name, size), []).append(None)
                    continue
                rps, ok, *extra = got
                res.setdefault((name, size), []).append((cpu * 1e6 / ok, rps, scpu * 1e6 / ok, *extra))
        print(f"repetition {rep + 1}/{reps} done", file=sys.stderr, flush=True)
    return res


def udp_rcvbuf_errors():
    """The kernel's count of UDP receive-buffer drops (any socket; one per GRO batch dropped)."""
    with open("/proc/net/snmp") as f:
        rows = [line.split() for line in f if line.startswith("Udp:")]
    return int(rows[1][rows[0].index("RcvbufErrors")])


def hxload_server_cpu(binary, server, proto, u, dur, tmp, conns, streams=10):
    """One `hxlab load --proto PROTO -D DUR -c CONNS -m STREAMS` run against `server`:
    (req/s, the server's CPU µs per request, UDP receive-buffer drops per 1000 requests), or
    None when it failed (said on stdout)."""
    js = os.path.join(tmp, "load.json")
    drops = udp_rcvbuf_errors()
    before = server.cpu()
    rc, out = run([binary, "load", "--no-progress", "-q", "-k", "--proto", proto, "-D", f"{dur}s",
                   "-c", str(conns), "-m", str(streams), "--json", js, u], timeout=dur + 120)
    cpu = server.cpu() - before
    drops = udp_rcvbuf_errors() - drops
    if rc != 0 or not os.path.exists(js):
        print(f"  ! hxlab load --proto {proto} {u} against {server.name} failed ({rc}):\n    {out[-500:]}",
              flush=True)
        return None
    rps, ok, r = parse_hxlab_json(js)
    os.unlink(js)
    if ok == 0 or r.get("requests_failed"):
        print(f"  ! hxlab load --proto {proto} {u} against {server.name}: {ok} ok, "
              f"{r.get('requests_failed')} failed; {r.get('error_samples')}", flush=True)
        return None
    return rps, cpu * 1e6 / ok, drops * 1000 / ok


def have(tool):
    return shutil.which(tool) is not None


def find_oha(install=True):
    """oha with HTTP/3 (OHA=path, or on PATH, or ~/.cargo/bin); installs it when missing and
    install is True (`cargo install oha --features http3 --locked`, minutes of compiling)."""
    cand = os.environ.get("OHA") or shutil.which("oha") or os.path.expanduser("~/.cargo/bin/oha")
    if cand and os.access(cand, os.X_OK):
        return cand
    if not install:
        return None
    if not have("cargo"):
        print("oha missing and no cargo to install it: the oha rows are skipped")
        return None
    print("oha missing: installing it with `cargo install oha --features http3 --locked` (several minutes) ...",
          flush=True)
    p = subprocess.run(["nice", "cargo", "install", "oha", "--features", "http3", "--locked"])
    cand = os.path.expanduser("~/.cargo/bin/oha")
    if p.returncode != 0 or not os.access(cand, os.X_OK):
        print("oha install failed: the oha rows are skipped")
        return None
    return cand


def parse_oha_json(out):
    """(req/s, requests succeeded) of `oha --output-format json` (older oha: -j)."""
    try:
        j = json.loads(out[out.index("{"):])
    except ValueError:
        return None
    ok = sum(v for k, v in j.get("statusCodeDistribution", {}).items() if k.startswith("2"))
    return float(j["summary"]["requestsPerSec"]), int(ok)


def run_measured(cmd, core=0, timeout=900):
    """Runs cmd pinned to `core`; returns (returncode, user+sys CPU seconds of it, wall s, output).
    taskset execs cmd, so the child's rusage is the tool's own."""
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rc, out = run(cmd, core, timeout)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rc, cpu, wall, out
