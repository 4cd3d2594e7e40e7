#!/usr/bin/env bash
# Build helm for the chart tests (tests/integration/test_chart.py), once, into a cache folder.
#
#   build.sh            build when missing; print the path of the helm binary (last line of stdout)
#   build.sh --where    print that path and exit 0 when it is built; exit 1 otherwise (no build)
#
# go.mod pins the release with Go's `tool` directive. Helm v4.3 uses the same k8s.io modules
# (v0.37.2) as tools/kube-apiserver, so after that build most of helm's packages are already in
# Go's build cache. A `helm` already on PATH is not used: the tests want the pinned version.
#
# Environment (optional): KAIPOLICY_HELM_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/kaipolicy/helm),
# and Go's own GOMODCACHE, GOCACHE, GOPROXY.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
log() { echo "[helm build] $*" >&2; }

version="$(awk '$1 == "helm.sh/helm/v4" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")"
digest="$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)"
cache="${KAIPOLICY_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kaipolicy/helm}"
bin="$cache/$version-$digest"

if [ "${1:-}" = "--where" ]; then
  [ -x "$bin/helm" ] && { echo "$bin/helm"; exit 0; }
  exit 1
fi

mkdir -p "$bin"
exec 9>"$bin/.lock"
flock 9  # parallel callers wait for the one build
if [ -x "$bin/helm" ]; then echo "$bin/helm"; exit 0; fi

command -v go >/dev/null || { log "go not found: install Go >= 1.26"; exit 1; }
log "building helm $version into $bin"
t0=$SECONDS
cd "$here"
CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version -X helm.sh/helm/v4/internal/version.metadata=" \
  -o "$bin/.helm.tmp" helm.sh/helm/v4/cmd/helm
mv "$bin/.helm.tmp" "$bin/helm"
log "built in $((SECONDS - t0))s: $("$bin/helm" version --short)"
echo "$bin/helm"
