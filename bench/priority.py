#!/usr/bin/env python3
"""Urgent behind bulk (issue 40): how long a 20 kB `u=0` response, asked for on the same
connection once 300 kB of a 3 MB `u=5` response has arrived, takes from its request to its
last byte — for hxlab serve (before: round-robin without a send low-water mark; after: each
scheduler with the default mark), h2o, nginx and Caddy, on h2 and h3, from independent
clients (python-h2, aioquic: crates/hxlab/tests/peers/urgent_behind_bulk.py) behind
`hxlab link` at 10 Mbit/s and 50 ms RTT, with the queue at the BDP (64 KiB) and at the link's
default (1000 packets). The floor is one RTT + the queue's drain + the transmission.

Usage: bench/priority.py BIN [RUNS]     (needs root for the link; traffic stays in its namespace)
"""
import json, os, statistics, subprocess, sys
sys.path.insert(0, os.path.dirname(__file__))
from benchlib import Lab

PY = os.environ.get("HXLAB_PRIORITY_PYTHON", "/opt/hxlab-ci/priority/bin/python")
PEER = os.path.join(os.path.dirname(__file__), "..", "crates", "hxlab", "tests", "peers", "urgent_behind_bulk.py")
BULK, SMALL = 3_000_000, 20_000


def runs(binary, port, proto, bulk, small, queue, n):
    script = (f"for i in $(seq {n}); do {PY} {PEER} {proto} $HXLAB_LINK_HOST {port} --bulk {bulk} "
              f"--small {small} --after 300000 --sni localhost --timeout 60 || echo FAIL; done")
    out = subprocess.run([binary, "link", "--down", "10mbit", "--up", "10mbit", "--delay", "25ms", "--queue", queue,
                          "--", "sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True, timeout=600, env=dict(os.environ, HXLAB_LINK_QUIET="1")).stdout
    waits = [json.loads(l)["wait_ms"] for l in out.splitlines() if l.startswith("{")]
    return statistics.median(waits) if waits else None


def main():
    binary = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    lab = Lab(core=1, bind="0.0.0.0")
    with open(os.path.join(lab.www, "bulk"), "wb") as f:
        f.write(b"x" * BULK)
    with open(os.path.join(lab.www, "small"), "wb") as f:
        f.write(b"x" * SMALL)
    for name in ("bulk", "small"):
        os.chmod(os.path.join(lab.www, name), 0o644)
    hx = (f"/bytes/{BULK}", f"/bytes/{SMALL}")
    files = ("/bulk", "/small")
    rows = []
    try:
        servers = [
            ("hxlab before (round-robin, no low-water mark)", lab.hxlab(binary, extra=["--bind", "0.0.0.0", "--cc", "cubic", "--scheduler", "round-robin", "--notsent-lowat", "off"]), hx, True),
            ("hxlab rfc9218 (default)", lab.hxlab(binary, extra=["--bind", "0.0.0.0", "--cc", "cubic"]), hx, True),
            ("hxlab round-robin", lab.hxlab(binary, extra=["--bind", "0.0.0.0", "--cc", "cubic", "--scheduler", "round-robin"]), hx, True),
            ("hxlab fifo", lab.hxlab(binary, extra=["--bind", "0.0.0.0", "--cc", "cubic", "--scheduler", "fifo"]), hx, True),
            ("h2o 2.2", lab.h2o(), files, False),
            ("nginx 1.22", lab.nginx(), files, False),
            ("Caddy 2.6", lab.caddy(), files, True),
        ]
        for queue in ("64KiB", "1000p"):
            for name, server, (bulk, small), h3 in servers:
                h2 = runs(binary, server.ports["tls"], "h2", bulk, small, queue, n)
                q = runs(binary, server.ports["tls"], "h3", bulk, small, queue, n) if h3 else None
                rows.append((queue, name, h2, q))
                print(f"{queue:6} {name:48} h2 {h2 if h2 is not None else '-':>8} ms   h3 {q if q is not None else '-':>8} ms", flush=True)
    finally:
        lab.close()
    floor = 50 + 65536 * 8 / 10e6 * 1000 + SMALL * 8 / 10e6 * 1000
    print(f"floor at the BDP queue (RTT + 64 KiB/rate + 20 kB/rate): {floor:.0f} ms; medians of {n} runs;"
          " hxlab with --cc cubic, peers with the kernel's default (bbr here: they cannot set one)")


if __name__ == "__main__":
    main()
