#!/usr/bin/env bash
# Checks a release made by hack/release.sh with krew itself:
#   1. krew's validate-krew-manifest on DIR/failover.yaml (structure, platform
#      selectors, no overlaps);
#   2. for every platform of the manifest whose archive is in DIR, a real
#      `krew install --manifest --archive` (offline) into a fresh KREW_ROOT
#      for that OS/arch: krew checks the archive's sha256 against the
#      manifest and installs the files; then the plugin, the completion
#      helper and LICENSE must be where the manifest puts them.
#
#   hack/verify-krew.sh DIR [KEEP_ROOT]
#
# KEEP_ROOT, when given, is used as the KREW_ROOT of the first platform and
# left in place (tests use the installed plugin). KREW and
# VALIDATE_KREW_MANIFEST name the binaries (default: bin/).
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${1:?usage: $0 DIR [KEEP_ROOT]}
keep=${2:-}
krew=${KREW:-bin/krew}
validate=${VALIDATE_KREW_MANIFEST:-bin/validate-krew-manifest}
manifest=$dir/failover.yaml

"$validate" -manifest "$manifest" -skip-install

version=$(awk '$1 == "version:" {print $2; exit}' "$manifest")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
installed=0
while read -r os arch uri; do
  archive=$dir/$(basename "$uri")
  [ -f "$archive" ] || { echo "verify-krew: $archive not built, skipped" >&2; continue; }
  root=$work/$os-$arch
  if [ -n "$keep" ] && [ "$installed" = 0 ]; then
    root=$keep
  fi
  mkdir -p "$root"
  KREW_ROOT=$root KREW_OS=$os KREW_ARCH=$arch KREW_NO_UPGRADE_CHECK=1 \
    "$krew" install --manifest="$manifest" --archive="$archive" </dev/null >&2
  store=$root/store/failover/$version
  for f in kubectl-failover kubectl_complete-failover LICENSE; do
    [ -f "$store/$f" ] || { echo "verify-krew: $os/$arch: $f not installed in $store" >&2; exit 1; }
  done
  [ -x "$store/kubectl_complete-failover" ] || { echo "verify-krew: $os/$arch: kubectl_complete-failover not executable" >&2; exit 1; }
  [ -L "$root/bin/kubectl-failover" ] || { echo "verify-krew: $os/$arch: krew did not link kubectl-failover into $root/bin" >&2; exit 1; }
  installed=$((installed + 1))
  echo "verify-krew: $os/$arch installed fine" >&2
done < <(awk '
  $1 == "os:"   { os = $2 }
  $1 == "arch:" { arch = $2 }
  $1 == "uri:"  { print os, arch, $2 }' "$manifest")
[ "$installed" -gt 0 ] || { echo "verify-krew: no archive of $manifest found in $dir" >&2; exit 1; }
echo "verify-krew: manifest valid, $installed platform(s) installed" >&2
