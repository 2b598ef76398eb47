#!/usr/bin/env python3
"""The peers' table of docs/priorities-probe.md: `hxlab probe --priorities` (default link:
10 Mbit/s each way, 50 ms RTT, queue at the BDP) against hxlab serve in each scheduling mode,
h2o, nginx, Caddy, and nghttpx in front of hxlab serve and of nginx, every server bound to
0.0.0.0 on this machine (the probe reaches it through its link). Prints one row per server
and protocol: verdict, the urgent small's wait, committed bytes, bulk during the small, and
the incremental, PRIORITY_UPDATE and RFC 7540 findings.

Usage: bench/priorities_probe.py BIN        (needs root for the link; peers from .ci/run,
       nghttpx from Debian's nghttp2-proxy)
"""
import json, os, shutil, subprocess, sys
sys.path.insert(0, os.path.dirname(__file__))
from benchlib import Lab, free_port, wait_port

BULK, SMALL = 3_000_000, 20_000


def probe(binary, bulk, small, extra=()):
    cmd = [binary, "probe", "-k", bulk, "--priorities", "--small", small, "--json", "-", *extra]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    try:
        return json.loads(out.stdout)["priorities"]["scorecards"]
    except (ValueError, KeyError, TypeError):
        print(f"probe failed ({out.returncode}): {out.stderr.strip()}", flush=True)
        return []


def row(name, c):
    u = c.get("urgency") or {}
    inc = c.get("incremental") or {}
    upd = c.get("priority_update") or {}
    old = c.get("rfc7540") or {}
    ms = lambda v: "-" if v is None else f"{v:.0f}"
    return (f"| {name} | {c['protocol']} | {c.get('verdict') or 'none'} | {ms(u.get('wait_ms'))} | "
            f"{u.get('committed_bytes', '-')} ({ms(u.get('committed_ms'))} ms) | {u.get('bulk_bytes_during_small', '-')} | "
            f"{inc.get('honoured', '-')} ({inc.get('non_incremental_share', 0):.2f} / {inc.get('incremental_share', 0):.2f}) | "
            f"{upd.get('honoured', '-')} ({upd.get('share_before', 0):.2f} → {upd.get('share_after', 0):.2f}) | "
            f"{old.get('class', '-')} | {c.get('error') or ''} |")


def nghttpx(lab, backend_port):
    """nghttpx (1 worker) on 0.0.0.0, TLS with h2 (Debian's build has no h3), proxying to an
    HTTP/1.1 backend on 127.0.0.1."""
    port = free_port()
    d = os.path.join(lab.tmp, f"nghttpx-{port}")
    os.makedirs(d)
    p = lab._spawn("nghttpx", ["nghttpx", "--conf=/dev/null", f"--frontend=0.0.0.0,{port}", f"--backend=127.0.0.1,{backend_port}",
                               "--workers=1", "--no-ocsp", "--accesslog-file=/dev/null",
                               f"--errorlog-file={d}/error.log", f"--pid-file={d}/pid", lab.key, lab.cert])
    return lab._started("nghttpx", p, {"tls": port}, wait=(port,))


def main():
    binary = sys.argv[1]
    lab = Lab(core=1, bind="0.0.0.0")
    for name, n in (("bulk", BULK), ("small", SMALL)):
        path = os.path.join(lab.www, name)
        with open(path, "wb") as f:
            f.write(b"x" * n)
        os.chmod(path, 0o644)
    hx = (f"/bytes/{BULK}", f"/bytes/{SMALL}")
    files = ("/bulk", "/small")
    print("| server | protocol | verdict | wait ms | committed B | bulk B during small | incremental (u=3 / u=3,i) | PRIORITY_UPDATE (before → after) | RFC 7540 | notes |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    try:
        servers = []
        for mode in ("rfc9218", "round-robin", "fifo"):
            servers.append((f"hxlab serve --scheduler {mode}", lab.hxlab(binary, extra=["--bind", "0.0.0.0", "--scheduler", mode]), hx, None))
        servers.append(("hxlab serve before (round-robin, --notsent-lowat off)", lab.hxlab(binary, extra=["--bind", "0.0.0.0", "--scheduler", "round-robin", "--notsent-lowat", "off"]), hx, None))
        servers.append(("h2o 2.2", lab.h2o(), files, None))
        ng = lab.nginx()
        servers.append(("nginx 1.22", ng, files, None))
        servers.append(("Caddy 2.6 (SNI localhost)", lab.caddy(), files, "localhost"))
        if shutil.which("nghttpx"):
            backend = lab.hxlab(binary, extra=["--no-h3"])
            servers.append(("nghttpx 1.52 → hxlab serve (h1)", nghttpx(lab, backend.ports["plain"]), hx, None))
            servers.append(("nghttpx 1.52 → nginx (h1)", nghttpx(lab, ng.ports["plain"]), files, None))
        for name, server, (bulk, small), sni in servers:
            port = server.ports["tls"]
            host = sni or "127.0.0.1"
            extra = ["--connect-to", f"127.0.0.1:{port}"] if sni else []
            for c in probe(binary, f"https://{host}:{port}{bulk}", f"https://{host}:{port}{small}", extra):
                print(row(name, c), flush=True)
    finally:
        lab.close()


if __name__ == "__main__":
    main()
