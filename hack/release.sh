#!/usr/bin/env bash
# Builds the kubectl plugin release: for each platform an archive holding
# kubectl-failover, kubectl_complete-failover (shell completion) and
# LICENSE, then the krew manifest failover.yaml with each archive's URL and
# sha256. `make release` runs it; the CLI's tests run it for one platform
# and validate the result with krew.
#
#   hack/release.sh [OUTPUT_DIR]          (default: _output/release)
#
# VERSION      plugin version (default: v + the chart's appVersion), also
#              stamped into the binary (`kubectl failover version`)
# REVISION     source revision stamped into the binary (default: git HEAD)
# PLATFORMS    GOOS/GOARCH list (default: linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
# RELEASE_URL  where the archives will be downloaded from
#              (default: the GitHub release of VERSION)
# QUICK=1      build with go's defaults instead of static, -trimpath
#              binaries: the tests use it to reuse `go test`'s build cache
#              (the archives and the manifest are made the same way)
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-_output/release}
version=${VERSION:-v$(awk -F'"' '/^appVersion:/ {print $2}' charts/fedfailover/Chart.yaml)}
platforms=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
revision=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
# internal/version: what `kubectl failover version` prints.
stamp="-X github.com/fedfailover/fedfailover/internal/version.version=$version -X github.com/fedfailover/fedfailover/internal/version.revision=$revision"
url=${RELEASE_URL:-https://github.com/fedfailover/fedfailover/releases/download/$version}
files=(kubectl-failover kubectl_complete-failover LICENSE)

mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

platform_entries=""
for p in $platforms; do
  os=${p%/*}
  arch=${p#*/}
  name=kubectl-failover_${version}_${os}_${arch}
  dir=$work/$name
  mkdir -p "$dir"
  echo "building $name" >&2
  if [ "${QUICK:-}" = 1 ]; then
    GOOS=$os GOARCH=$arch go build -ldflags "$stamp" -o "$dir/kubectl-failover" ./cmd/kubectl-failover
  else
    CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "-s -w $stamp" -o "$dir/kubectl-failover" ./cmd/kubectl-failover
  fi
  cp cmd/kubectl-failover/kubectl_complete-failover LICENSE "$dir/"
  chmod 755 "$dir/kubectl-failover" "$dir/kubectl_complete-failover"
  chmod 644 "$dir/LICENSE"
  # Same inputs, same archive: fixed order, owner and times, no gzip name.
  tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - "${files[@]}" | gzip -n -9 >"$out/$name.tar.gz"
  sha=$(sha256sum "$out/$name.tar.gz" | cut -d' ' -f1)
  platform_entries+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $url/$name.tar.gz
    sha256: $sha
    bin: kubectl-failover
    files:
"
  for f in "${files[@]}"; do
    platform_entries+="      - from: $f
        to: .
"
  done
done

cat >"$out/failover.yaml" <<MANIFEST
# krew plugin manifest, written by hack/release.sh.
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: failover
spec:
  version: $version
  homepage: https://github.com/fedfailover/fedfailover
  shortDescription: Inspect fedfailover in a kubefed federation
  description: |
    kubectl failover shows what the fedfailover operator sees and decides in
    a kubefed federation: member connections, FailoverPolicy status, node
    recoveries and why a node was or was not recovered (explain), and what
    fedfailover would do to ReplicaSchedulingPreferences if a member failed
    or filled up (plan). It reads only the host cluster and writes nothing.
  caveats: |
    The plugin only reads the kubefed host cluster. It needs get, list and
    watch there on failoverpolicies.failover.fedfailover.io,
    noderecoveries.failover.fedfailover.io,
    recoveryguards.failover.fedfailover.io,
    rebalancerecords.failover.fedfailover.io,
    membermaintenances.failover.fedfailover.io,
    kubefedclusters.core.kubefed.io,
    replicaschedulingpreferences.scheduling.kubefed.io,
    clusters.cluster.x-k8s.io, machines.cluster.x-k8s.io and namespaces:
    exactly what fedfailover's ClusterRole fedfailover-viewer grants
    (installed with fedfailover and aggregated into the view ClusterRole).

    Shell completion (kubectl 1.26 or newer): krew links only
    kubectl-failover into its bin directory. Link the completion helper
    next to it:

      ln -sf "\${KREW_ROOT:-\$HOME/.krew}/store/failover/$version/kubectl_complete-failover" "\${KREW_ROOT:-\$HOME/.krew}/bin/"
  platforms:
$platform_entries
MANIFEST
echo "wrote $out/failover.yaml and $(wc -w <<<"$platforms") archives" >&2
