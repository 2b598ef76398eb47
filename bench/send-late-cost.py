#!/usr/bin/env python3
"""What deciding late costs on loopback (issue 40's CPU rule): server CPU per request of
`hxlab serve --threads 1` (core 1) under h2load (core 0, -c 50, h2 rows -m 10) on the TCP rows
of bench/origins.sh (h1, h1+TLS, h2 TLS, h2c; 100 B and 100 KiB), for several builds or flag
sets side by side, repetitions interleaved (A B C A B C ...) so drift hits all alike.
Prints medians and each configuration's ratio to the first.

Usage: bench/send-late-cost.py [--reps N] [--duration S] LABEL=BIN[:FLAG,FLAG...] ...
  e.g. before=/work/target-before/release/hxlab after=target/release/hxlab
       after-off=target/release/hxlab:--notsent-lowat,off
Traffic stays on 127.0.0.1; every server it starts is ended by PID.
"""
import os, statistics, sys
sys.path.insert(0, os.path.dirname(__file__))
from benchlib import Lab, run, parse_h2load

ROWS = [("h1", "plain", ["--h1"]), ("h1+TLS", "tls", ["--h1"]), ("h2 TLS -m10", "tls", ["-m", "10"]),
        ("h2c -m10", "plain", ["-m", "10"])]
SIZES = [100, 102400]


def main():
    args = sys.argv[1:]
    reps, dur = 5, 3
    while args and args[0].startswith("--"):
        if args[0] == "--reps":
            reps = int(args[1])
        elif args[0] == "--duration":
            dur = int(args[1])
        else:
            sys.exit(__doc__)
        args = args[2:]
    configs = []
    for a in args:
        label, _, rest = a.partition("=")
        binary, _, flags = rest.partition(":")
        configs.append((label, binary, [f for f in flags.split(",") if f]))
    if not configs:
        sys.exit(__doc__)
    lab = Lab(core=1)
    cpu = {}
    try:
        servers = [(label, lab.hxlab(binary, extra=flags)) for label, binary, flags in configs]
        for rep in range(reps):
            for row, kind, h2args in ROWS:
                for size in SIZES:
                    for label, s in servers:
                        scheme = "http" if kind == "plain" else "https"
                        u = f"{scheme}://127.0.0.1:{s.ports[kind]}/bytes/{size}"
                        before = s.cpu()
                        rc, out = run(["h2load", "-D", str(dur), "-c", "50"] + h2args + [u])
                        used = s.cpu() - before
                        got = parse_h2load(out)
                        if got and got[1] > 0:
                            cpu.setdefault((row, size, label), []).append(used * 1e6 / got[1])
            print(f"repetition {rep + 1}/{reps} done", flush=True)
    finally:
        lab.close()
    base = configs[0][0]
    print(f"\nserver CPU µs/request, median of {reps} (interleaved), -c 50, {dur} s per run; ratio to {base}")
    print(f"{'row':14}{'size':>7}" + "".join(f"{l:>14}" for l, _, _ in configs) +
          "".join(f"{l + '/' + base:>20}" for l, _, _ in configs[1:]))
    for row, _, _ in ROWS:
        for size in SIZES:
            med = [statistics.median(cpu.get((row, size, l), [float("nan")])) for l, _, _ in configs]
            line = f"{row:14}{size:>7}" + "".join(f"{m:>14.2f}" for m in med)
            line += "".join(f"{m / med[0]:>19.3f}x" for m in med[1:])
            print(line)


if __name__ == "__main__":
    main()
