#!/usr/bin/env bash
# local-cluster.sh build|up|down|status — a single-node Kubernetes on this machine, from public
# packages only (docs/distributed.md, "Try it on one machine"):
#   control plane, kubelet and kubectl  Go module proxy: k8s.io/kubernetes $K8S_VERSION, built
#                                       by a wrapper module (build dir: $HXLAB_CLUSTER_CACHE)
#   etcd, containerd, runc, CNI plugins Debian packages etcd-server, containerd, runc,
#                                       containernetworking-plugins
#   pause image                         a static C program, packaged with podman (no registry)
#   hxlab image                         deploy/rootfs.sh + Containerfile --target runtime
#
# Environment:
#   HXLAB_CLUSTER_CACHE  build cache (binaries, images); kept by `down`   [/var/cache/hxlab-cluster]
#   HXLAB_CLUSTER_STATE  state dir: config, certs, logs, data, PIDs;      [/run/hxlab-cluster]
#                        `down` removes it
#   HXLAB_BIN            the hxlab binary the image is built from         [target/release/hxlab]
#   HXLAB_CLUSTER_NET    the CNI bridge's /24 (host is .1)                [10.203.46.0/24]
#   HXLAB_CLUSTER_SVC    the Service range                                [10.203.47.0/24]
# (not podman's 10.88.0.0/16 nor the usual Kubernetes ranges, which may be in use here)
# `up` ends by printing KUBECONFIG=PATH, KUBECTL=PATH and HOST_ADDR=IP (the bridge's host
# address, which pods reach).
set -euo pipefail

K8S_VERSION=1.34.4
STAGING_VERSION=0.34.4
CRICTL_VERSION=1.34.0
CACHE=${HXLAB_CLUSTER_CACHE:-/var/cache/hxlab-cluster}
STATE=${HXLAB_CLUSTER_STATE:-/run/hxlab-cluster}
NET=${HXLAB_CLUSTER_NET:-10.203.46.0/24}
SVC_NET=${HXLAB_CLUSTER_SVC:-10.203.47.0/24}
BRIDGE=hxlab-cni0
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)

die() { echo "local-cluster.sh: $*" >&2; exit 1; }
log() { echo "local-cluster.sh: $*" >&2; }

# ---------------------------------------------------------------------------------------------
# build: the Kubernetes binaries from the Go module proxy, cached in $CACHE/bin.

# The staging modules of k8s.io/kubernetes: the `=> ./staging/...` lines of its go.mod. Each is
# published as its own module at v0.MINOR.PATCH.
k8s_build() {
  local bin=$CACHE/bin stamp=$CACHE/bin/.k8s-$K8S_VERSION
  if [ -f "$stamp" ]; then return 0; fi
  command -v go >/dev/null || die "go not found (the control plane is built from the Go module proxy)"
  local src=$CACHE/src/k8s-$K8S_VERSION
  mkdir -p "$src" "$bin"
  local t0=$SECONDS
  (
    cd "$src"
    export GOFLAGS=${GOFLAGS:--p=2} CGO_ENABLED=0
    if [ ! -f go.mod ]; then
      go mod init hxlab.local/k8s >/dev/null 2>&1
      local kmod
      kmod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
      [ -f "$kmod" ] || die "could not download k8s.io/kubernetes v$K8S_VERSION's go.mod"
      {
        echo "require k8s.io/kubernetes v$K8S_VERSION"
        echo "replace ("
        sed -n 's/^[[:space:]]*\(k8s\.io\/[^ ]*\) => \.\/staging\/.*/\t\1 => \1 v'"$STAGING_VERSION"'/p' "$kmod"
        echo ")"
      } >> go.mod
      [ "$(grep -c " => k8s.io/" go.mod)" -ge 30 ] || die "found too few staging modules in $kmod"
    fi
    mkmain() { # dir imports body
      mkdir -p "cmd/$1"
      printf 'package main\n\nimport (\n%s\n)\n\nfunc main() {\n\t%s\n}\n' "$2" "$3" > "cmd/$1/main.go"
    }
    local cli='	"k8s.io/component-base/cli"' os='	"os"'
    mkmain kube-apiserver "$os
$cli
	\"k8s.io/kubernetes/cmd/kube-apiserver/app\"" 'os.Exit(cli.Run(app.NewAPIServerCommand()))'
    mkmain kube-controller-manager "$os
$cli
	\"k8s.io/kubernetes/cmd/kube-controller-manager/app\"" 'os.Exit(cli.Run(app.NewControllerManagerCommand()))'
    mkmain kube-scheduler "$os
$cli
	\"k8s.io/kubernetes/cmd/kube-scheduler/app\"" 'os.Exit(cli.Run(app.NewSchedulerCommand()))'
    mkmain kubelet "	\"context\"
$os
$cli
	\"k8s.io/kubernetes/cmd/kubelet/app\"" 'os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))'
    mkmain kubectl "$cli
	\"k8s.io/kubectl/pkg/cmd\"
	\"k8s.io/kubectl/pkg/cmd/util\"" 'util.CheckErr(cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()))'
    go mod tidy >/dev/null
    local v=k8s.io/component-base/version minor=${K8S_VERSION#*.}
    minor=${minor%%.*}
    nice -n 19 go build -trimpath -o "$bin/" -ldflags "-s -w -X $v.gitVersion=v$K8S_VERSION \
      -X $v.gitMajor=${K8S_VERSION%%.*} -X $v.gitMinor=$minor -X $v.gitTreeState=clean \
      -X $v.buildDate=1970-01-01T00:00:00Z" ./cmd/...
  ) || die "building Kubernetes v$K8S_VERSION failed"
  touch "$stamp"
  log "built Kubernetes v$K8S_VERSION in $((SECONDS - t0)) s"
}

crictl_build() {
  [ -x "$CACHE/bin/crictl" ] && return 0
  GOBIN=$CACHE/bin GOFLAGS=${GOFLAGS:--p=2} CGO_ENABLED=0 nice -n 19 \
    go install -trimpath -ldflags "-s -w" "sigs.k8s.io/cri-tools/cmd/crictl@v$CRICTL_VERSION"
}


# ---------------------------------------------------------------------------------------------
# images: pause (a static C program) and hxlab, as OCI archives in $CACHE/images.

pause_image=localhost/hxlab-pause:1
hxlab_image=${HXLAB_IMAGE:-localhost/hxlab:test}
hxlab_build_tag=localhost/hxlab-cluster-build:latest

pause_build() {
  local out=$CACHE/images/pause.tar
  [ -f "$out" ] && return 0
  command -v gcc >/dev/null || die "gcc not found (the pause image is a static C program)"
  local ctx
  ctx=$(mktemp -d /tmp/hxlab-pause.XXXXXX)
  cat > "$ctx/pause.c" <<'C'
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
/* A pod's sandbox: holds the namespaces, reaps orphans, exits on SIGINT/SIGTERM. */
static void quit(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, quit); signal(SIGTERM, quit); signal(SIGCHLD, reap);
  for (;;) pause();
}
C
  gcc -static -Os -s -o "$ctx/pause" "$ctx/pause.c"
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' > "$ctx/Containerfile"
  mkdir -p "$CACHE/images"
  podman build -q -t "$pause_image" "$ctx" >/dev/null \
    && podman save -q --format oci-archive -o "$out.tmp" "$pause_image" && mv "$out.tmp" "$out"
  local rc=$?
  podman rmi -f "$pause_image" >/dev/null 2>&1 || true
  rm -rf "$ctx"
  [ $rc = 0 ] || die "building the pause image failed"
}

# The hxlab image from a binary on the host (deploy/rootfs.sh + Containerfile --target runtime),
# cached by the binary's hash.
hxlab_build() {
  local bin=${HXLAB_BIN:-$repo/target/release/hxlab}
  [ -x "$bin" ] || die "no hxlab binary at $bin (cargo build --release -p hxlab, or set HXLAB_BIN)"
  local sum
  sum=$(sha256sum "$bin" | cut -c1-16)
  hxlab_tar=$CACHE/images/hxlab-$sum.tar
  [ -f "$hxlab_tar" ] && return 0
  local ctx rc=0
  ctx=$(mktemp -d /tmp/hxlab-image.XXXXXX)
  mkdir -p "$CACHE/images"
  # Built under a tag of its own (not to replace someone's localhost/hxlab:test in podman's
  # store); `up` tags it $hxlab_image in containerd.
  sh "$repo/deploy/rootfs.sh" "$bin" "$ctx/rootfs" \
    && podman build -q --build-context build="$ctx" --target runtime -t "$hxlab_build_tag" "$repo" >/dev/null \
    && podman save -q --format oci-archive -o "$hxlab_tar.tmp" "$hxlab_build_tag" \
    && mv "$hxlab_tar.tmp" "$hxlab_tar" || rc=$?
  podman rmi -f "$hxlab_build_tag" >/dev/null 2>&1 || true
  rm -rf "$ctx"
  [ $rc = 0 ] || die "building the hxlab image failed"
  # Older archives of other binaries: keep the newest few.
  ls -t "$CACHE"/images/hxlab-*.tar 2>/dev/null | tail -n +4 | xargs -r rm -f
}

# ---------------------------------------------------------------------------------------------
# up

net_addr() { local n=${1%/*}; echo "${n%.*}.$(( ${n##*.} + $2 ))"; } # NET/LEN K: the K-th address
host_addr() { net_addr "$NET" 1; }
svc_addr() { net_addr "$SVC_NET" 1; }
ETCD_PORT=32379 ETCD_PEER_PORT=32380 API_PORT=16443 KUBELET_PORT=20250 KUBELET_HEALTHZ=20248
NODE=hxlab-node
# Paths outside $STATE that containerd or the kubelet create whatever they are told; `down`
# removes those that did not exist before `up`.
SYSTEM_PATHS="/var/log/containers /var/log/pods /var/lib/kubelet /run/containerd /var/lib/cni /run/kubernetes /var/run/kubernetes"

pidfile() { echo "$STATE/pids/$1.pid"; }
alive() { local f; f=$(pidfile "$1"); [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }

# start NAME CMD...: in its own session, output to $STATE/logs/NAME.log, PID in $STATE/pids.
# (bash without job control does not make a background job a group leader, so setsid execs
# the command in place and $! is its PID.)
start() {
  local name=$1; shift
  setsid "$@" </dev/null >"$STATE/logs/$name.log" 2>&1 &
  echo $! > "$(pidfile "$name")"
}

# wait_for WHAT SECONDS CMD...
wait_for() {
  local what=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || die "$what not ready after ${secs}s (logs: $STATE/logs)"
    sleep 0.5
  done
}

port_free() { ! ss -Hltn "sport = :$1" | grep -q .; }

certs() {
  local d=$STATE/pki
  mkdir -p "$d"
  ( cd "$d"
    key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
    key ca
    openssl req -x509 -new -key ca.key -subj /CN=hxlab-cluster-ca -days 30 -out ca.crt 2>/dev/null
    # leaf NAME SUBJECT EXTENSIONS
    leaf() {
      key "$1"
      openssl req -new -key "$1.key" -subj "$2" 2>/dev/null \
        | openssl x509 -req -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -out "$1.crt" \
            -extfile <(printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n%s\n' "$3") 2>/dev/null
    }
    leaf apiserver /CN=kube-apiserver "extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$(host_addr),IP:$(svc_addr),DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    leaf apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" extendedKeyUsage=clientAuth
    leaf admin "/O=system:masters/CN=hxlab-admin" extendedKeyUsage=clientAuth
    leaf controller-manager /CN=system:kube-controller-manager extendedKeyUsage=clientAuth
    leaf scheduler /CN=system:kube-scheduler extendedKeyUsage=clientAuth
    leaf kubelet "/O=system:nodes/CN=system:node:$NODE" extendedKeyUsage=clientAuth
    key sa
    openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
  ) || die "making certificates failed"
  for who in admin controller-manager scheduler kubelet; do
    cat > "$STATE/$who.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: hxlab
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$d/ca.crt"}
users:
- name: $who
  user: {client-certificate: "$d/$who.crt", client-key: "$d/$who.key"}
contexts:
- name: hxlab
  context: {cluster: hxlab, user: $who}
current-context: hxlab
EOF
  done
}

configs() {
  local c=$STATE/config
  mkdir -p "$c" "$STATE/cni/conf" "$STATE/cni/ipam" "$STATE/pod-logs" "$STATE/kubelet"
  cat > "$c/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd/root"
state = "$STATE/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$STATE/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # The fix for "can't get final child's PID from pipe: EOF" (docs/distributed.md): the CRI
  # asks for oom_score_adj -998 (pause) / -997 (Guaranteed pods); without CAP_SYS_RESOURCE
  # runc cannot lower the score, so clamp it to containerd's own.
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/conf"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
      Root = "$STATE/runc"
EOF
  # A bridge with the host on .1; no gateway, masquerading or port mapping: pods reach the
  # host's address on the bridge and nothing beyond this machine (no iptables rules, no
  # ip_forward).
  cat > "$STATE/cni/conf/10-hxlab.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "hxlab", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": false, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$STATE/cni/ipam",
            "ranges": [[{"subnet": "$NET", "rangeStart": "$(net_addr "$NET" 10)"}]]}}
]}
EOF
  cat > "$c/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "$(host_addr)"
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: "$STATE/pki/ca.crt"}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: "unix://$STATE/containerd.sock"
podLogsDirectory: "$STATE/pod-logs"
failSwapOn: false
# The development machine's disk is >85 % used: the default thresholds would evict every pod
# and collect the imported (unpullable) images.
evictionHard: {memory.available: 50Mi, nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%", imagefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
EOF
}

# The kubelet sets vm.overcommit_memory, vm.panic_on_oom, kernel.panic, kernel.panic_on_oops
# and kernel.keys.root_max* machine-wide at start (or, with protectKernelDefaults, refuses to
# start) — kernel.panic_on_oops=1 on a shared machine is not ours to set. So it runs in a
# mount namespace of its own where those files read as the values it wants (bind mounts of
# plain files, private to that namespace), and with a PATH without iptables, so it adds no
# KUBE-FIREWALL rules either. Its pods need no volumes that containerd would have to see.
kubelet_wrapper() {
  local k=$STATE/kubelet/fake-sysctl w=$STATE/kubelet/run.sh
  mkdir -p "$k"
  echo 'set -e' > "$w"
  for kv in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1 \
            kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000; do
    local f=${kv%=*}
    echo "${kv#*=}" > "$k/${f//\//.}"
    echo "mount --bind '$k/${f//\//.}' /proc/sys/$f" >> "$w"
  done
  echo "exec env PATH=/usr/local/bin:/usr/bin:/bin '$CACHE/bin/kubelet' \"\$@\"" >> "$w"
}

up() {
  local t0=$SECONDS
  [ -d "$STATE" ] && [ -n "$(ls "$STATE/pids" 2>/dev/null)" ] && die "$STATE exists: already up? (local-cluster.sh down first)"
  for b in etcd containerd containerd-shim-runc-v2 runc ctr podman openssl ip ss unshare; do
    command -v $b >/dev/null || die "$b not found (apt-get install etcd-server containerd runc containernetworking-plugins podman openssl iproute2)"
  done
  [ -x /usr/lib/cni/bridge ] || die "/usr/lib/cni/bridge not found (apt-get install containernetworking-plugins)"
  for p in $ETCD_PORT $ETCD_PEER_PORT $API_PORT $KUBELET_PORT $KUBELET_HEALTHZ; do
    port_free "$p" || die "port $p is in use"
  done
  ip link show "$BRIDGE" >/dev/null 2>&1 && die "interface $BRIDGE exists (local-cluster.sh down?)"
  # Any route but the default one that covers the bridge's address: the range is in use.
  if ip -4 route show match "$(host_addr)" | grep -v '^default' | grep -q .; then
    die "$NET overlaps a network of this machine ($(ip -4 route show match "$(host_addr)" | grep -v '^default' | head -n 1)); set HXLAB_CLUSTER_NET"
  fi
  k8s_build
  crictl_build
  pause_build
  hxlab_build
  local tb=$SECONDS
  mkdir -p "$STATE"/{pids,logs,etcd}
  : > "$STATE/created-paths"
  for p in $SYSTEM_PATHS; do [ -e "$p" ] || echo "$p" >> "$STATE/created-paths"; done
  certs
  configs

  ip link add "$BRIDGE" type bridge
  ip addr add "$(host_addr)/${NET#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up

  start etcd etcd --name hxlab --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "hxlab=http://127.0.0.1:$ETCD_PEER_PORT"
  start containerd containerd --config "$STATE/config/containerd.toml"
  local p=$STATE/pki
  start kube-apiserver "$CACHE/bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --secure-port "$API_PORT" --advertise-address "$(host_addr)" \
    --cert-dir "$STATE/apiserver" --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
    --client-ca-file "$p/ca.crt" --authorization-mode Node,RBAC \
    --kubelet-client-certificate "$p/apiserver-kubelet-client.crt" --kubelet-client-key "$p/apiserver-kubelet-client.key" \
    --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range "$SVC_NET" \
    --kubelet-preferred-address-types InternalIP \
    --profiling=false
  # kubectl keeps a discovery cache in ~/.kube/cache unless told otherwise: KUBECTL is a
  # wrapper that keeps it in the state dir.
  mkdir -p "$STATE/bin"
  printf '#!/bin/sh\nexec %s --cache-dir %s "$@"\n' "$CACHE/bin/kubectl" "$STATE/kube-cache" > "$STATE/bin/kubectl"
  chmod +x "$STATE/bin/kubectl"
  local kc="$STATE/bin/kubectl --kubeconfig $STATE/admin.kubeconfig"
  wait_for "containerd" 30 ctr -a "$STATE/containerd.sock" version
  ctr -a "$STATE/containerd.sock" -n k8s.io images import "$CACHE/images/pause.tar" >/dev/null
  ctr -a "$STATE/containerd.sock" -n k8s.io images import "$hxlab_tar" >/dev/null
  ctr -a "$STATE/containerd.sock" -n k8s.io images tag --force "$hxlab_build_tag" "$hxlab_image" >/dev/null
  ctr -a "$STATE/containerd.sock" -n k8s.io images rm "$hxlab_build_tag" >/dev/null
  wait_for "kube-apiserver" 120 $kc get --raw /readyz
  start kube-controller-manager "$CACHE/bin/kube-controller-manager" \
    --kubeconfig "$STATE/controller-manager.kubeconfig" --secure-port 0 --leader-elect=false \
    --use-service-account-credentials --service-account-private-key-file "$p/sa.key" \
    --root-ca-file "$p/ca.crt" --cluster-signing-cert-file "$p/ca.crt" --cluster-signing-key-file "$p/ca.key" \
    --service-cluster-ip-range "$SVC_NET" --profiling=false
  start kube-scheduler "$CACHE/bin/kube-scheduler" \
    --kubeconfig "$STATE/scheduler.kubeconfig" --secure-port 0 --leader-elect=false --profiling=false
  kubelet_wrapper
  start kubelet unshare -m --propagation private sh "$STATE/kubelet/run.sh" --config "$STATE/config/kubelet.yaml" \
    --kubeconfig "$STATE/kubelet.kubeconfig" --root-dir "$STATE/kubelet" --cert-dir "$STATE/kubelet/pki" \
    --hostname-override "$NODE" --node-ip "$(host_addr)"
  wait_for "node $NODE" 120 $kc wait --for=condition=Ready "node/$NODE" --timeout=1s
  wait_for "the default service account" 60 $kc get serviceaccount default
  for n in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    alive $n || die "$n exited (log: $STATE/logs/$n.log)"
  done
  log "up: build/images $((tb - t0)) s, start $((SECONDS - tb)) s"
  echo "KUBECONFIG=$STATE/admin.kubeconfig"
  echo "KUBECTL=$STATE/bin/kubectl"
  echo "HOST_ADDR=$(host_addr)"
}

# ---------------------------------------------------------------------------------------------
# down: everything up made, by PID, mount point, interface name and path.

stop() { # NAME [SECONDS]
  local f pid
  f=$(pidfile "$1")
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  # Only the process up started: its command line names the state dir (a stale PID file,
  # after a reboot, may name another program's process).
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -qF "$STATE/"; then
    kill "$pid" 2>/dev/null || true
    local end=$((SECONDS + ${2:-10}))
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$f"
}

down() {
  [ -d "$STATE" ] || { log "nothing to do ($STATE does not exist)"; return 0; }
  stop kubelet
  stop kube-scheduler
  stop kube-controller-manager
  if alive containerd && [ -x "$CACHE/bin/crictl" ]; then
    local crictl="$CACHE/bin/crictl -r unix://$STATE/containerd.sock -i unix://$STATE/containerd.sock"
    $crictl stopp $($crictl pods -q 2>/dev/null) >/dev/null 2>&1 || true
    $crictl rmp -a -f >/dev/null 2>&1 || true
  fi
  stop containerd
  # Shims outlive containerd; ours are the ones serving this state's containerd socket.
  local pid
  for pid in $(pgrep -x containerd-shim 2>/dev/null; pgrep -f containerd-shim-runc-v2 2>/dev/null); do
    if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-address $STATE/containerd.sock"; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  stop kube-apiserver
  stop etcd
  # Mounts under the state dir (pod netns, shm, rootfs), deepest first.
  local m
  for m in $(awk -v s="$STATE/" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  # Veths still on the bridge, then the bridge.
  if ip link show "$BRIDGE" >/dev/null 2>&1; then
    for m in $(ip -o link show master "$BRIDGE" | awk -F': ' '{print $2}' | cut -d@ -f1); do
      ip link del "$m" 2>/dev/null || true
    done
    ip link del "$BRIDGE"
  fi
  # The kubelet's cgroups (cgroupfs driver): /kubepods in every v1 hierarchy, deepest first.
  local c
  for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  if [ -f "$STATE/created-paths" ]; then
    while read -r m; do [ -n "$m" ] && rm -rf "$m"; done < "$STATE/created-paths"
  fi
  rm -rf "$STATE"
  log "down"
}

status() {
  [ -d "$STATE" ] || { echo "down"; return 3; }
  local n rc=0
  for n in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    if alive $n; then echo "$n running (pid $(cat "$(pidfile $n)"))"; else echo "$n NOT running"; rc=1; fi
  done
  "$STATE/bin/kubectl" --kubeconfig "$STATE/admin.kubeconfig" get nodes -o wide 2>&1 || rc=1
  echo "KUBECONFIG=$STATE/admin.kubeconfig"
  echo "KUBECTL=$STATE/bin/kubectl"
  echo "HOST_ADDR=$(host_addr)"
  return $rc
}

case ${1:-} in
  build) k8s_build; crictl_build; pause_build ;;
  up) up ;;
  down) down ;;
  status) status ;;
  *) die "usage: local-cluster.sh build|up|down|status" ;;
esac
