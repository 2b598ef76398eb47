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
#   HXLAB_CLUSTER_NET    the CNI bridge's /24 (host is .1)                [10.88.46.0/24]
#   HXLAB_CLUSTER_SVC    the Service range                                [10.96.46.0/24]
# `up` ends by printing KUBECONFIG=PATH, KUBECTL=PATH and HOST_ADDR=IP (the bridge's host
# address, which pods reach).
set -euo pipefail

K8S_VERSION=1.34.4
STAGING_VERSION=0.34.4
CRICTL_VERSION=1.34.0
CACHE=${HXLAB_CLUSTER_CACHE:-/var/cache/hxlab-cluster}
STATE=${HXLAB_CLUSTER_STATE:-/run/hxlab-cluster}
NET=${HXLAB_CLUSTER_NET:-10.88.46.0/24}
SVC_NET=${HXLAB_CLUSTER_SVC:-10.96.46.0/24}
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
    mkmain() { # dir import body
      mkdir -p "cmd/$1"
      printf 'package main\n\nimport (\n\t"os"\n\n\t"k8s.io/component-base/cli"\n%s\n)\n\nfunc main() { %s }\n' "$2" "$3" > "cmd/$1/main.go"
    }
    mkmain kube-apiserver '	"k8s.io/kubernetes/cmd/kube-apiserver/app"' 'os.Exit(cli.Run(app.NewAPIServerCommand()))'
    mkmain kube-controller-manager '	"k8s.io/kubernetes/cmd/kube-controller-manager/app"' 'os.Exit(cli.Run(app.NewControllerManagerCommand()))'
    mkmain kube-scheduler '	"k8s.io/kubernetes/cmd/kube-scheduler/app"' 'os.Exit(cli.Run(app.NewSchedulerCommand()))'
    mkmain kubelet '	"context"

	"k8s.io/kubernetes/cmd/kubelet/app"' 'os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))'
    mkmain kubectl '	"k8s.io/kubectl/pkg/cmd"' 'os.Exit(cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()))'
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

case ${1:-} in
  build) k8s_build; crictl_build ;;
  *) die "usage: local-cluster.sh build|up|down|status" ;;
esac
