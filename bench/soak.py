"""Helper of bench/soak.sh: a long open-model h2 run of `hxlab load` against `hxlab serve`.

Server `hxlab serve --threads 1` on core 1, client `hxlab load --proto h2 --rate R -c C -m M`
on core 0 for MINUTES. The client's RSS (VmRSS from /proc) is sampled every second; its send
lag p99 per window comes from `--print-intervals` (the `lag p99 ms` column: the send lag of
the requests sent in each interval). Prints the first window against the last (goal: RSS
within 5 %), and the send lag p99 of each."""
import os, re, statistics, subprocess, sys, tempfile, time, json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Lab, tree_rss_kib  # noqa: E402

BIN, MINUTES, RATE, CONNS, M = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
WINDOW = 60 if MINUTES >= 2 else max(5, int(MINUTES * 60 / 3))


def main():
    lab = Lab(core=1)
    tmp = tempfile.mkdtemp(prefix="soak-")
    client = None
    try:
        s = lab.hxlab(BIN, h3=False)
        url = f"https://127.0.0.1:{s.ports['tls']}/bytes/100"
        js = os.path.join(tmp, "r.json")
        dur = int(MINUTES * 60)
        cmd = [BIN, "load", "--no-progress", "-q", "-k", "--proto", "h2", "--rate", RATE, "-c", CONNS, "-m", M,
               "-D", f"{dur}s", "--interval", f"{WINDOW}s", "--print-intervals", "--json", js, url]
        print(f"client: taskset -c 0 {' '.join(cmd[:-3])} ... {url}", flush=True)
        out_path = os.path.join(tmp, "out.txt")
        with open(out_path, "w") as out:
            client = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=out, stderr=subprocess.STDOUT)
            t0 = time.monotonic()
            samples = []  # (seconds since start, RSS KiB)
            while client.poll() is None:
                rss = tree_rss_kib(client.pid)
                if rss:
                    samples.append((time.monotonic() - t0, rss))
                time.sleep(1 - ((time.monotonic() - t0) % 1))
        text = open(out_path).read()
        if client.returncode != 0:
            raise SystemExit(f"hxlab load failed ({client.returncode}):\n{text[-2000:]}")
        r = json.load(open(js))
        print(text.strip())
        total = samples[-1][0] if samples else 0
        first = [v for t, v in samples if t < WINDOW]
        last = [v for t, v in samples if t >= total - WINDOW]
        rows = [line.split() for line in text.splitlines() if re.match(r"^\s*\d+\.\d{3}\s", line)]
        lag = [row[7] if len(row) > 7 else "-" for row in rows]
        p99 = [row[6] for row in rows]
        f_rss, l_rss = statistics.mean(first), statistics.mean(last)
        growth = (l_rss - f_rss) / f_rss * 100
        print(f"\nsoak: {MINUTES:g} min at --rate {RATE} h2 -c {CONNS} -m {M}; requests done {r['requests_done']}, "
              f"failed {r['requests_failed']}, not sent {r.get('requests_not_sent', 0)}; "
              f"client RSS sampled every 1 s ({len(samples)} samples), windows of {WINDOW} s")
        print(f"  client RSS  first window {f_rss / 1024:8.1f} MiB   last window {l_rss / 1024:8.1f} MiB   "
              f"change {growth:+.1f} %  (max {max(v for _, v in samples) / 1024:.1f} MiB)  "
              f"goal within 5 %: {'met' if abs(growth) <= 5 else 'NOT met'}")
        if rows:
            print(f"  send lag p99  first window {lag[0]} ms   last window {lag[-1]} ms")
            print(f"  latency p99   first window {p99[0]} ms   last window {p99[-1]} ms")
        per_min = {}
        for t, v in samples:
            per_min.setdefault(int(t // WINDOW), []).append(v)
        print("  client RSS per window (MiB, mean): " +
              " ".join(f"{statistics.mean(v) / 1024:.1f}" for _, v in sorted(per_min.items())))
    finally:
        if client is not None and client.poll() is None:
            client.terminate()
            client.wait()
        lab.close()
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


main()
