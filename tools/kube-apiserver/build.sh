#!/usr/bin/env bash
# Build kube-apiserver and etcd for the integration tests, once, into a cache folder.
#
#   build.sh            build when missing; print the folder holding both binaries (last line of stdout)
#   build.sh --where    print that folder and exit 0 when both binaries are there; exit 1 otherwise (no build)
#
# The folder has the envtest (KUBEBUILDER_ASSETS) layout: `kube-apiserver` and `etcd` side by side.
# When KUBEBUILDER_ASSETS names a folder that already holds both, it is used as is and nothing is built.
#
# Environment (optional): KAIPOLICY_KAPI_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/kaipolicy/kube-apiserver),
# KUBEBUILDER_ASSETS, and Go's own GOMODCACHE, GOCACHE, GOPROXY.
# A cold build takes 10-15 minutes on 2 cores and about 2.3 GiB of memory (the link); with a warm
# Go build cache it takes well under a minute.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
log() { echo "[kube-apiserver build] $*" >&2; }
complete() { [ -x "$1/kube-apiserver" ] && [ -x "$1/etcd" ]; }

if [ -n "${KUBEBUILDER_ASSETS:-}" ] && complete "$KUBEBUILDER_ASSETS"; then
  echo "$KUBEBUILDER_ASSETS"; exit 0
fi

# The release pinned in go.mod names the folder; a hash of the module files keeps a changed pin or
# main.go from reusing old binaries.
version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")"
digest="$(cat "$here/go.mod" "$here/go.sum" "$here"/cmd/*/main.go | sha256sum | cut -c1-12)"
cache="${KAIPOLICY_KAPI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kaipolicy/kube-apiserver}"
bin="$cache/$version-$digest"

if [ "${1:-}" = "--where" ]; then
  complete "$bin" && { echo "$bin"; exit 0; }
  exit 1
fi

mkdir -p "$bin"
exec 9>"$bin/.lock"
flock 9  # parallel callers wait for the one build
if complete "$bin"; then echo "$bin"; exit 0; fi

command -v go >/dev/null || { log "go not found: install Go >= 1.26, or set KUBEBUILDER_ASSETS to a folder with kube-apiserver and etcd"; exit 1; }
log "building kube-apiserver $version and etcd into $bin"
t0=$SECONDS
minor="$(echo "$version" | cut -d. -f2)"
# Without these the apiserver reports v0.0.0 on /version, and clients that check it complain.
ver="-X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1"
ver="$ver -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
cd "$here"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ver" -o "$bin/.kube-apiserver.tmp" ./cmd/kube-apiserver
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/.etcd.tmp" ./cmd/etcd
mv "$bin/.kube-apiserver.tmp" "$bin/kube-apiserver"
mv "$bin/.etcd.tmp" "$bin/etcd"
log "built in $((SECONDS - t0))s: $("$bin/kube-apiserver" --version), $("$bin/etcd" --version | head -1)"
echo "$bin"
