"""Helper of bench/header-table.sh: the cost of the header table (issue 42's benchmark).

One `hxlab serve --threads 1` (its default table, 4096) on core 1; `hxlab load` on core 0,
-c 50 with 10 streams per connection, a 100-byte object, over h3 and h2, each with
`--header-table 4096` (the dynamic table both ways) and `--header-table 0` (what the client
advertises and uses: the server's encoder then has no table either, so the wire is
static-only both ways). Client CPU = user+sys of the client process per request; the
server's CPU per request beside it; header bytes per request and response from the run's
record. Runs rotate each repetition; medians (min–max). Goal: the table costs at most 5 %
of h3 CPU per request, client and server. Then the peer in the same run: gtlsclient
(ngtcp2 with nghttp3's QPACK) against the server with its table on and off (HEADER_TABLE_PEER=0 skips
it), and Chromium's header bytes for a page (HEADER_TABLE_PAGE=0 skips it)."""
import json, os, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import Lab, hx_path, measure_clients, median, run  # noqa: E402

BIN, REPS, N, CONNS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
M = 10


def main():
    lab = Lab(core=1)
    tmp = tempfile.mkdtemp(prefix="header-table-")
    try:
        hx = lab.hxlab(BIN, h3=True)
        u = f"https://127.0.0.1:{hx.ports['tls']}" + hx_path("100")
        js = os.path.join(tmp, "r.json")

        def parse(out):
            if not os.path.exists(js):
                return None
            r = json.load(open(js))
            ok = r["requests_succeeded"]
            b = r["bytes"]
            return (ok / r["duration_s"], ok, b["header_sent"] / max(ok, 1), b["header_received"] / max(ok, 1))

        def tools(size):
            t = []
            for proto in ("h3", "h2"):
                for table in ("4096", "0"):
                    cmd = [BIN, "load", "--no-progress", "-q", "-k", "--proto", proto, "-n", str(N), "-c",
                           str(CONNS), "-m", str(M), "--header-table", table, "--json", js, u]
                    t.append((f"{proto} table {table}", cmd, parse))
            return N, t

        res = measure_clients(tools, ["100"], REPS, hx, js)
        print(f"\nCPU per request (µs, user+sys) of `hxlab load` (core 0) and of one `hxlab serve --threads 1` "
              f"(core 1), -c {CONNS} -m {M}, 100-byte object, n={N}, median of {REPS} (min–max); "
              f"header bytes per request and per response (HEADERS payloads + QPACK streams)")
        med = {}
        for name, _, _ in tools("100")[1]:
            runs = [r for r in res.get((name, "100"), []) if r]
            if not runs:
                print(f"  {name:<15} failed (see above)")
                continue
            c = [r[0] for r in runs]
            s = [r[2] for r in runs]
            med[name] = (median(c), median(s))
            print(f"  {name:<15} client {median(c):>7.2f} ({min(c):.2f}–{max(c):.2f})  server {median(s):>7.2f} "
                  f"({min(s):.2f}–{max(s):.2f})  {median([r[1] for r in runs]):>8.0f} req/s  "
                  f"header bytes/req {median([r[3] for r in runs]):>6.1f} sent, {median([r[4] for r in runs]):>6.1f} received")
        for proto in ("h3", "h2"):
            a, b = f"{proto} table 4096", f"{proto} table 0"
            if a in med and b in med:
                rc, rs = med[a][0] / med[b][0], med[a][1] / med[b][1]
                goal = "" if proto == "h2" else (f"  (goal ≤1.05x: client {'met' if rc <= 1.05 else 'NOT met'}, "
                                                 f"server {'met' if rs <= 1.05 else 'NOT met'})")
                print(f"  => {proto}: table on / off, client {rc:.3f}x, server {rs:.3f}x{goal}")
    finally:
        lab.close()


def peer_nghttp3(binary, reps, n):
    """The same question asked of a peer in the same run: ngtcp2's example client
    (`gtlsclient`, Debian's ngtcp2-client, with nghttp3's QPACK; Debian's h2load has no
    HTTP/3) fetching the 100-byte object n times over one connection from
    `hxlab serve --header-table 4096` and `--header-table 0` (what the server advertises
    decides whether nghttp3's encoder may use a table; the server's encoder takes min(its
    own, nghttp3's)). gtlsclient's CPU per request and the server's, and the QPACK
    references the server decoded and encoded (its /stats), which show the table was used
    (or not) both ways."""
    import shutil
    import urllib.request

    if not shutil.which("gtlsclient"):
        print("\n  ! gtlsclient not found (apt install ngtcp2-client): no peer rows")
        return
    lab = Lab(core=1)
    tmp = tempfile.mkdtemp(prefix="header-table-peer-")
    js = os.path.join(tmp, "unused.json")
    med = {}
    try:
        print(f"\nThe peer: gtlsclient (ngtcp2 0.12, nghttp3 0.8) -n {n} over one connection, 100-byte object, "
              f"on core 0, against one `hxlab serve --threads 1` per table setting (core 1); median of {reps}")
        for table in ("4096", "0"):
            hx = lab.hxlab(binary, h3=True, extra=["--header-table", table])
            port = hx.ports["tls"]
            u = f"https://127.0.0.1:{port}" + hx_path("100")
            stats_url = f"http://127.0.0.1:{hx.ports['plain']}/stats"

            def stats():
                d = json.load(urllib.request.urlopen(stats_url))
                q = d["h3_qpack"]
                return d["by_protocol"]["h3"]["requests"], q["dynamic_refs_decoded"], q["dynamic_refs_encoded"]

            last = [0]

            def parse(out):
                done = stats()[0] - last[0]
                return 0.0, done

            name = f"nghttp3, server table {table}"

            def tools(size):
                last[0] = stats()[0]
                return n, [(name, ["gtlsclient", "-q", "--no-quic-dump", "--no-http-dump", "-n", str(n),
                                   "--exit-on-all-streams-close", "127.0.0.1", str(port), u], parse)]

            before = stats()
            res = measure_clients(tools, ["100"], reps, hx, js)
            after = stats()
            runs = [r for r in res.get((name, "100"), []) if r]
            hx.close()
            if not runs:
                print(f"  {name:<26} failed (see above)")
                continue
            c, s = [r[0] for r in runs], [r[2] for r in runs]
            med[table] = (median(c), median(s))
            print(f"  {name:<26} client {median(c):>7.2f} ({min(c):.2f}–{max(c):.2f})  server {median(s):>7.2f} "
                  f"({min(s):.2f}–{max(s):.2f})  dynamic refs decoded {after[1] - before[1]}, "
                  f"encoded {after[2] - before[2]}")
        if "4096" in med and "0" in med:
            rc, rs = med["4096"][0] / med["0"][0], med["4096"][1] / med["0"][1]
            print(f"  => h3 with nghttp3 as the client: table on / off, nghttp3 {rc:.3f}x, our server {rs:.3f}x")
    finally:
        lab.close()


if __name__ == "__main__":
    main()
    if os.environ.get("HEADER_TABLE_PEER", "1") == "1":
        peer_nghttp3(BIN, REPS, N)


def page_heads(binary, runs=3):
    """Header bytes per request and per response of a 30-resource page as Chromium requests
    it, over h2 and h3, from one `hxlab serve` (default table, then `--header-table 0`): the
    server's /stats head counters (HEADERS/HPACK blocks, and on h3 the QPACK streams both
    ways) before and after `hxlab page URL --proto P --runs N`, divided by the requests."""
    import urllib.request

    import subprocess
    lab = Lab(core=1)
    try:
        # Chromium's QUIC trusts the lab's certificate by its key's hash (it ignores -k).
        spki = subprocess.run(
            f"openssl x509 -in '{lab.cert}' -pubkey -noout | openssl pkey -pubin -outform der"
            " | openssl dgst -sha256 -binary | base64", shell=True, check=True, capture_output=True,
            text=True).stdout.strip()
        print(f"\nHeader bytes per request / per response, Chromium loading /page?n=30 (31 requests a load), "
              f"{runs} loads each, read from `hxlab serve`'s /stats (h3: HEADERS + QPACK streams)")
        for table in ("4096", "0"):
            hx = lab.hxlab(binary, h3=True, extra=["--header-table", table])
            stats_url = f"http://127.0.0.1:{hx.ports['plain']}/stats"
            for proto in ("h2", "h3"):
                def snap():
                    s = json.load(urllib.request.urlopen(stats_url))
                    p = s["by_protocol"].get(proto, {})
                    return p.get("requests", 0), p.get("request_header_bytes", 0), p.get("response_header_bytes", 0)
                a = snap()
                rc, out = run([binary, "page", "-k", "--spki", spki, "--proto", proto, "--runs", str(runs),
                               f"https://127.0.0.1:{hx.ports['tls']}/page?n=30&size=1000"], core=0, timeout=600)
                b = snap()
                n = b[0] - a[0]
                if rc != 0 or n == 0:
                    print(f"  ! page {proto} table {table}: rc {rc}\n    {out[-400:]}")
                    continue
                print(f"  server table {table:>4}  {proto}: {n:>4} requests, {(b[1] - a[1]) / n:>6.1f} B/request, "
                      f"{(b[2] - a[2]) / n:>6.1f} B/response")
            hx.close()
    finally:
        lab.close()


if __name__ == "__main__" and os.environ.get("HEADER_TABLE_PAGE", "1") == "1":
    page_heads(BIN)
