#!/usr/bin/env bash
# hxlab serve vs nginx (1 worker), side by side in one run: a 100-byte object over h1,
# h1+TLS, h2 over TLS (-m1 and -m10) and h2c. Each server is pinned to core 1, h2load to
# core 0; rows alternate between the two servers, REPS times, and the median req/s is kept.
# Also prints the server's CPU time per request (user+sys from /proc, µs) and its ratio: on a
# shared 2-core machine h2load itself (or a neighbour) often limits req/s, so the CPU ratio is
# the steadier measure of the server.
#
# usage: bench/serve-vs-nginx.sh [--no-build] [--reps N] [--duration SECONDS] [--conns N]
# needs: nginx, h2load, taskset, openssl, python3. Traffic stays on 127.0.0.1.
set -euo pipefail

REPS=3
DUR=5
CONNS=50
BUILD=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0 ;;
    --reps) REPS="$2"; shift ;;
    --duration) DUR="$2"; shift ;;
    --conns) CONNS="$2"; shift ;;
    *) echo "usage: $0 [--no-build] [--reps N] [--duration SECONDS] [--conns N]" >&2; exit 2 ;;
  esac
  shift
done

for tool in nginx h2load taskset openssl python3; do
  command -v "$tool" >/dev/null || { echo "missing tool: $tool" >&2; exit 1; }
done

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ "$BUILD" = 1 ]; then
  (cd "$ROOT" && cargo build --release -q -p hxlab)
fi
HXLAB="$ROOT/target/release/hxlab"
[ -x "$HXLAB" ] || { echo "no release binary at $HXLAB (run without --no-build)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/serve-vs-nginx.XXXXXX)"
# nginx workers run as an unprivileged user and must read the document root.
chmod 755 "$WORK"
NGINX_PID=""
HX_PID=""
cleanup() {
  [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null || true
  [ -n "$HX_PID" ] && kill "$HX_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# --- nginx: 1 worker, 100-byte static file, h1+h2 on TLS, h2c on its own port -------------
mkdir -p "$WORK/nginx/html/bytes" "$WORK/nginx/logs"
head -c 100 /dev/zero | tr '\0' 'x' > "$WORK/nginx/html/bytes/100"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=localhost -keyout "$WORK/nginx/key.pem" -out "$WORK/nginx/cert.pem" 2>/dev/null
NG_PLAIN=$(free_port); NG_TLS=$(free_port); NG_H2C=$(free_port)
cat > "$WORK/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 120s;
  http2_max_concurrent_streams 128;
  default_type application/octet-stream;
  open_file_cache max=100 inactive=60s;
  client_body_temp_path $WORK/nginx/tmp_body;
  proxy_temp_path $WORK/nginx/tmp_proxy;
  fastcgi_temp_path $WORK/nginx/tmp_fcgi;
  uwsgi_temp_path $WORK/nginx/tmp_uwsgi;
  scgi_temp_path $WORK/nginx/tmp_scgi;
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_certificate $WORK/nginx/cert.pem;
  ssl_certificate_key $WORK/nginx/key.pem;
  server { listen 127.0.0.1:$NG_PLAIN; root $WORK/nginx/html; }
  server { listen 127.0.0.1:$NG_TLS ssl http2; root $WORK/nginx/html; }
  server { listen 127.0.0.1:$NG_H2C http2; root $WORK/nginx/html; }
}
CONF
taskset -c 1 nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" 2>"$WORK/nginx/logs/stderr" &
NGINX_PID=$!

# --- hxlab serve: one thread on core 1 ------------------------------------------------------
taskset -c 1 "$HXLAB" serve --threads 1 --no-h3 --tls-port 0 --plain-port 0 \
  --ready-file "$WORK/hx-ready.json" >"$WORK/hx.out" 2>"$WORK/hx.err" &
HX_PID=$!

for _ in $(seq 1 100); do
  [ -s "$WORK/hx-ready.json" ] && [ -s "$WORK/nginx/nginx.pid" ] && break
  sleep 0.1
done
[ -s "$WORK/hx-ready.json" ] || { echo "hxlab serve did not start:" >&2; cat "$WORK/hx.err" >&2; exit 1; }
[ -s "$WORK/nginx/nginx.pid" ] || { echo "nginx did not start:" >&2; tail -5 "$WORK/nginx/logs/stderr" >&2; exit 1; }
sleep 0.3
NG_WORKER=$(pgrep -P "$(cat "$WORK/nginx/nginx.pid")" | head -1)
HX_TLS=$(python3 -c "import json;print(json.load(open('$WORK/hx-ready.json'))['tls'])")
HX_PLAIN=$(python3 -c "import json;print(json.load(open('$WORK/hx-ready.json'))['plain'])")

cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

# run ROW SERVER URL ARGS... -> "req/s cpu_us_per_req"
measure() {
  local pid="$1" url="$2"; shift 2
  local before after out rps done_n failed
  before=$(cpu_ticks "$pid")
  out=$(taskset -c 0 h2load -D "$DUR" --warm-up-time 1 -c "$CONNS" "$@" "$url" 2>&1) || true
  after=$(cpu_ticks "$pid")
  rps=$(echo "$out" | sed -n 's/^finished in [^,]*, \([0-9.]*\) req\/s.*/\1/p')
  done_n=$(echo "$out" | sed -n 's/^requests: .* \([0-9]*\) done.*/\1/p')
  failed=$(echo "$out" | sed -n 's/^requests: .* \([0-9]*\) failed.*/\1/p')
  if [ -z "$rps" ] || [ "${failed:-1}" != 0 ]; then
    echo "h2load failed against $url:" >&2; echo "$out" | tail -5 >&2
    echo "0 0"; return
  fi
  python3 -c "print('%s %.2f' % ($rps, ($after-$before)/$TICK*1e6/max(1,$done_n)))"
}

ROWS=("h1" "h1+TLS" "h2 TLS -m1" "h2 TLS -m10" "h2c -m10")
declare -A HX NG HXC NGC
for rep in $(seq 1 "$REPS"); do
  for i in "${!ROWS[@]}"; do
    case $i in
      0) hx_url="http://$HX_PLAIN/bytes/100"; ng_url="http://127.0.0.1:$NG_PLAIN/bytes/100"; args=(--h1) ;;
      1) hx_url="https://$HX_TLS/bytes/100"; ng_url="https://127.0.0.1:$NG_TLS/bytes/100"; args=(--h1) ;;
      2) hx_url="https://$HX_TLS/bytes/100"; ng_url="https://127.0.0.1:$NG_TLS/bytes/100"; args=(-m 1) ;;
      3) hx_url="https://$HX_TLS/bytes/100"; ng_url="https://127.0.0.1:$NG_TLS/bytes/100"; args=(-m 10) ;;
      4) hx_url="http://$HX_PLAIN/bytes/100"; ng_url="http://127.0.0.1:$NG_H2C/bytes/100"; args=(-m 10) ;;
    esac
    read -r r c < <(measure "$HX_PID" "$hx_url" "${args[@]}")
    HX[$i]="${HX[$i]:-} $r"; HXC[$i]="${HXC[$i]:-} $c"
    read -r r c < <(measure "$NG_WORKER" "$ng_url" "${args[@]}")
    NG[$i]="${NG[$i]:-} $r"; NGC[$i]="${NGC[$i]:-} $c"
  done
done

median() { python3 -c "import statistics,sys; print('%.0f' % statistics.median([float(x) for x in sys.argv[1:]]))" "$@"; }
median2() { python3 -c "import statistics,sys; print('%.2f' % statistics.median([float(x) for x in sys.argv[1:]]))" "$@"; }

echo
echo "100-byte object, server on core 1 (hxlab --threads 1, nginx 1 worker), h2load on core 0,"
echo "c=$CONNS, ${DUR}s per run, median of $REPS alternating runs; CPU = server user+sys µs per request;"
echo "cpu ratio = nginx CPU / hxlab CPU (above 1: hxlab needs less CPU per request)"
printf "%-13s %12s %12s %7s   %9s %9s %9s\n" "row" "hxlab req/s" "nginx req/s" "ratio" "hxlab CPU" "nginx CPU" "cpu ratio"
for i in "${!ROWS[@]}"; do
  # shellcheck disable=SC2086
  h=$(median ${HX[$i]}); n=$(median ${NG[$i]}); hc=$(median2 ${HXC[$i]}); nc=$(median2 ${NGC[$i]})
  ratio=$(python3 -c "print('%.2f' % ($h/$n if $n else 0))")
  cratio=$(python3 -c "print('%.2f' % ($nc/$hc if $hc else 0))")
  printf "%-13s %12s %12s %6sx   %9s %9s %8sx\n" "${ROWS[$i]}" "$h" "$n" "$ratio" "$hc" "$nc" "$cratio"
done
