"""Helper of bench/shards.sh: a single `hxlab load` process, the same run as 2 shards merged,
and h2load, interleaved REPS times against one `hxlab serve --threads 1` (core 1), clients on
core 0; then `hxlab merge` of 100 real shard files, timed."""
import json, os, re, socket, statistics, subprocess, sys, tempfile, time

BIN, N, REPS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
C, M = 100, 10


def start_server(tmp):
    ready = os.path.join(tmp, "ready.json")
    p = subprocess.Popen(["taskset", "-c", "1", BIN, "serve", "--bind", "127.0.0.1", "--plain-port", "0",
                          "--tls-port", "0", "--no-h3", "--threads", "1", "--ready-file", ready],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        if os.path.exists(ready):
            try:
                return p, json.load(open(ready))["plain"]
            except (ValueError, KeyError):
                pass
        time.sleep(0.05)
    p.kill()
    raise SystemExit("hxlab serve did not become ready")


def single(url):
    out = subprocess.run(["taskset", "-c", "0", BIN, "load", "--proto", "h2c", "-c", str(C), "-m", str(M),
                          "-n", str(N), "-q", "--no-progress", "--json", "-", url],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    return json.loads(out)


def sharded(url, tmp):
    start = time.time() + 1.0
    procs = [subprocess.Popen(["taskset", "-c", "0", BIN, "load", "--proto", "h2c", "-c", str(C), "-m", str(M),
                               "-n", str(N), "--shard", f"{i}/2", "--start-at", f"{start:.3f}", "-q",
                               "--no-progress", "--json", "-", url],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = []
    for p in procs:
        o, e = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"shard failed: {e}")
        outs.append(o)
    m = subprocess.run([BIN, "merge", "-q", "-"], input="".join(outs), capture_output=True, text=True,
                       timeout=60, check=True).stdout
    return json.loads(m)


def h2load(url):
    out = subprocess.run(["taskset", "-c", "0", "h2load", "-c", str(C), "-m", str(M), "-n", str(N), url],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    rps = float(re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", out).group(1))
    done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
    lat = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", out)
    return {"rps": rps, "done": done, "mean": lat.group(3) if lat else "?"}


def percentiles(r):
    """p50/p99/p99.9 from the RunResult's latency histogram, through hxlab's own summary."""
    text = subprocess.run([BIN, "merge", "--mixed", "-o", os.devnull, "-"], input=json.dumps(r),
                          capture_output=True, text=True, timeout=60, check=True).stdout
    row = next(l for l in text.splitlines() if l.startswith("time for request:"))
    cols = row.split()
    # name(3 words) min max mean sd p50 p90 p99 p99.9 count
    return {"p50": cols[7], "p99": cols[9], "p99.9": cols[10]}


def main():
    tmp = tempfile.mkdtemp()
    srv, addr = start_server(tmp)
    url = f"http://{addr}/bytes/100"
    rows = {"1 process": [], "2 shards (merged)": [], "h2load": []}
    try:
        for rep in range(REPS):
            r = single(url)
            assert r["requests_done"] == N, r["requests_done"]
            rows["1 process"].append((r["requests_done"] / r["duration_s"], percentiles(r)))
            r = sharded(url, tmp)
            assert r["requests_done"] == N, r["requests_done"]
            assert [s["index"] for s in r["shards"]] == [0, 1]
            skew = max(s["start_skew_s"] for s in r["shards"]) - min(s["start_skew_s"] for s in r["shards"])
            rows["2 shards (merged)"].append((r["requests_done"] / r["duration_s"], percentiles(r) | {"skew": f"{skew*1e3:.2f}ms"}))
            h = h2load(url)
            assert h["done"] == N, h
            rows["h2load"].append((h["rps"], {"mean": h["mean"]}))
            print(f"rep {rep + 1}/{REPS} done", file=sys.stderr)

        print(f"\n## one run vs 2 shards, h2c -c {C} -m {M} -n {N}, hxlab serve --threads 1 on core 1, clients on core 0, {REPS} reps")
        print(f"{'':<20}{'req/s (median)':>16}{'min':>12}{'max':>12}   per-rep latency")
        med = {}
        for name, vals in rows.items():
            rps = [v[0] for v in vals]
            med[name] = statistics.median(rps)
            print(f"{name:<20}{med[name]:>16.0f}{min(rps):>12.0f}{max(rps):>12.0f}   " + "; ".join(
                " ".join(f"{k} {v}" for k, v in v[1].items()) for v in vals))
        print(f"ratio 2 shards / 1 process: {med['2 shards (merged)'] / med['1 process']:.3f}")
        print(f"ratio 1 process / h2load:   {med['1 process'] / med['h2load']:.3f}")

        # 100 real shard files, then the merge timed.
        files = []
        start = time.time() + 2.0
        for i in range(100):
            f = os.path.join(tmp, f"shard-{i}.json")
            subprocess.run(["taskset", "-c", "0", BIN, "load", "-c", "100", "-n", "2000", "--shard", f"{i}/100",
                            "--run-id", "bench", "-q", "--no-progress", "--json", f, url], check=True, timeout=60)
            files.append(f)
        times = []
        for _ in range(5):
            t0 = time.monotonic()
            out = subprocess.run([BIN, "merge", "-q", "-o", os.path.join(tmp, "merged.json")] + files,
                                 capture_output=True, text=True, timeout=60)
            times.append(time.monotonic() - t0)
            if out.returncode != 0:
                raise SystemExit(out.stderr)
        m = json.load(open(os.path.join(tmp, "merged.json")))
        assert m["requests_done"] == 2000 and len(m["shards"]) == 100
        size = sum(os.path.getsize(f) for f in files)
        print(f"\n## hxlab merge of 100 shard files ({size / 1e6:.1f} MB): median {statistics.median(times) * 1e3:.0f} ms, "
              f"max {max(times) * 1e3:.0f} ms over 5 (goal < 1000 ms); merged requests_done {m['requests_done']}")
    finally:
        srv.terminate()
        srv.wait(timeout=10)


main()
