#!/usr/bin/env python3
"""The three holes of issue 38, measured against one or more `hxlab serve` binaries in one run
(e.g. the build before the fix and after it): unread HTTP/1.1 pipelines (peak and settled
memory, a legitimate request's latency meanwhile), HTTP/2 connections whose streams wait for
window and whose peer sends FIN (server sockets left in CLOSE-WAIT, descriptors held), and a
FIFO in --dir (its answer, and another file's latency meanwhile).

Usage: bench/attack-holes.py BIN [BIN ...]    (traffic stays on 127.0.0.1; bounded in time)
"""
import json, os, socket, struct, subprocess, sys, tempfile, threading, time

def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0

def start(binary, extra, tmp):
    ready = os.path.join(tmp, "ready.json")
    if os.path.exists(ready):
        os.unlink(ready)
    p = subprocess.Popen([binary, "serve", "--bind", "127.0.0.1", "--tls-port", "0", "--plain-port", "0",
                          "--no-h3", "--ready-file", ready] + extra,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if os.path.exists(ready):
            try:
                r = json.load(open(ready))
                return p, r
            except ValueError:
                pass
        time.sleep(0.05)
    p.kill()
    raise SystemExit(f"{binary}: no ready file")

def addr(s):
    host, port = s.rsplit(":", 1)
    return host, int(port)

def get(a, path, limit=5.0):
    """One HTTP/1.1 GET: (status, seconds), status 0 on timeout."""
    t0 = time.monotonic()
    try:
        c = socket.create_connection(addr(a), timeout=limit)
        c.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            b = c.recv(65536)
            if not b:
                break
            data += b
        c.close()
        return int(data[9:12] or 0), time.monotonic() - t0
    except (OSError, ValueError):
        return 0, time.monotonic() - t0

def pipelines(pid, plain):
    idle = rss(pid)
    pipeline = b""
    while True:
        req = f"GET /bytes/{14000 + pipeline.count(b'GET')} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
        if len(pipeline) + len(req) > 65536:
            break
        pipeline += req
    peak = [idle]
    stop = threading.Event()
    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss(pid))
            time.sleep(0.05)
    th = threading.Thread(target=sample); th.start()
    conns = []
    for _ in range(100):
        c = socket.create_connection(addr(plain))
        c.sendall(pipeline)
        conns.append(c)
    time.sleep(4)
    status, took = get(plain, "/bytes/10")
    time.sleep(2)
    stop.set(); th.join()
    for c in conns:
        c.close()
    time.sleep(10)
    settled = rss(pid)
    return {"idle_MB": idle >> 20, "peak_MB": peak[0] >> 20, "legit_ms": round(took * 1000), "legit_status": status,
            "10s_after_MB": settled >> 20}

def frame(kind, flags, stream, payload):
    n = len(payload)
    return bytes([n >> 16 & 255, n >> 8 & 255, n & 255, kind, flags]) + struct.pack(">I", stream) + payload

def h2_get(path):
    # :method GET, :scheme http, :path (literal, indexed name 4), :authority x
    return bytes([0x82, 0x86, 0x44, len(path)]) + path.encode() + bytes([0x41, 1]) + b"x"

def close_wait(port):
    n = 0
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in open(f).read().splitlines()[1:]:
            p = line.split()
            if p[1].endswith(":%04X" % port) and p[3] == "08":
                n += 1
    return n

def zero_window(pid, plain, n=2000):
    conns = []
    msg = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, struct.pack(">HI", 4, 0))
    for sid in range(1, 20, 2):
        msg += frame(1, 5, sid, h2_get("/bytes/1G"))
    for _ in range(n):
        c = socket.create_connection(addr(plain))
        c.sendall(msg)
        conns.append(c)
    time.sleep(1)
    for c in conns:
        c.shutdown(socket.SHUT_WR)
    time.sleep(2)
    port = addr(plain)[1]
    out = {"close_wait_2s": close_wait(port), "fds_2s": len(os.listdir(f"/proc/{pid}/fd")), "rss_MB": rss(pid) >> 20}
    for c in conns:
        c.close()
    return out

def fifo(plain):
    res = {}
    t = threading.Thread(target=lambda: res.__setitem__("fifo", get(plain, "/static/fifo", 3.0)))
    t.start()
    time.sleep(0.2)
    status, took = get(plain, "/static/a.txt", 3.0)
    t.join()
    return {"fifo_status": res["fifo"][0], "fifo_ms": round(res["fifo"][1] * 1000),
            "other_file_status": status, "other_file_ms": round(took * 1000)}

def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for binary in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            d = os.path.join(tmp, "dir"); os.mkdir(d)
            open(os.path.join(d, "a.txt"), "w").write("hello")
            os.mkfifo(os.path.join(d, "fifo"))
            p, ready = start(binary, ["--dir", d], tmp)
            try:
                print(binary, "h1 unread pipelines:", pipelines(p.pid, ready["plain"]), flush=True)
                print(binary, "h2c zero-window + FIN:", zero_window(p.pid, ready["plain"]), flush=True)
                print(binary, "fifo in --dir:", fifo(ready["plain"]), flush=True)
            finally:
                # A writer ends a FIFO open still blocked in the old server, so it can exit.
                try:
                    fd = os.open(os.path.join(d, "fifo"), os.O_WRONLY | os.O_NONBLOCK); os.close(fd)
                except OSError:
                    pass
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill(); p.wait()

main()
