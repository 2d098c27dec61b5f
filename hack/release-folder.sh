#!/usr/bin/env bash
# The release folder's own steps, around what hack/release.sh (plugin),
# hack/tools/image (image), helm (chart) and hack/tools/sbom (SBOMs) put
# into it. `make release` runs them in this order:
#
#   hack/release-folder.sh clean DIR    empty DIR (refuses a folder that is
#                                       not a release folder)
#   hack/release-folder.sh notes DIR    DIR/CHANGELOG-<VERSION>.md: the
#                                       "## [VERSION]" section of CHANGELOG.md,
#                                       else its "## Unreleased" section
#   hack/release-folder.sh index DIR    DIR/MANIFEST (what each file is) and
#                                       DIR/SHA256SUMS (every other file)
#   hack/release-folder.sh verify DIR   fail unless DIR holds exactly the
#                                       expected files, each checked
#
# VERSION          release version (default: v + the chart's appVersion)
# REVISION         source revision (MANIFEST)
# PLATFORMS        the plugin's GOOS/GOARCH list (default: hack/release.sh's)
# IMAGE_DIR        the image's OCI layout (default: _output/image), for
#                  MANIFEST
# IMAGE_PLATFORMS  the image's platforms (MANIFEST)
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 clean|notes|index|verify DIR" >&2
  exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
dir=$2

version=${VERSION:-v$(awk -F'"' '/^appVersion:/ {print $2}' charts/fedfailover/Chart.yaml)}
chart_version=${version#v}
platforms=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
image_tar=fedfailover-image_${version}.oci.tar
chart_tgz=fedfailover-${chart_version}.tgz
notes_md=CHANGELOG-${version}.md

die() {
  echo "release-folder: $*" >&2
  exit 1
}

# expected lists every file a release folder holds, one per line.
expected() {
  local p
  for p in $platforms; do
    echo "kubectl-failover_${version}_${p%/*}_${p#*/}.tar.gz"
    echo "kubectl-failover_${version}_${p%/*}_${p#*/}.tar.gz.spdx.json"
  done
  printf '%s\n' failover.yaml "$image_tar" "$image_tar.spdx.json" "$chart_tgz" "$notes_md" MANIFEST SHA256SUMS
}

# files lists the regular files of DIR, sorted (the folder has no subfolders).
files() {
  find "$dir/" -mindepth 1 -maxdepth 1 -printf '%f\n' | LC_ALL=C sort
}

clean() {
  if [ -d "$dir" ] && [ -n "$(ls -A "$dir")" ] && [ ! -e "$dir/SHA256SUMS" ] && [ ! -e "$dir/failover.yaml" ]; then
    die "$dir is not empty and holds no earlier release (SHA256SUMS, failover.yaml): not emptying it"
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
}

# section prints the "## " section of CHANGELOG.md whose title (brackets
# and anything after the first space dropped) is one of the arguments.
section() {
  awk -v titles="$*" '
    BEGIN { n = split(titles, want, " ") }
    /^## / {
      if (found) exit
      t = $0; sub(/^## +/, "", t); sub(/ .*/, "", t); gsub(/[][]/, "", t)
      for (i = 1; i <= n; i++) if (tolower(t) == tolower(want[i])) found = 1
    }
    found { print }' CHANGELOG.md
}

notes() {
  local body
  body=$(section "$version" "$chart_version")
  [ -n "$body" ] || body=$(section Unreleased)
  if [ -z "$(sed 1d <<<"$body" | tr -d '[:space:]')" ]; then
    die "CHANGELOG.md has neither a \"## [$version]\" nor a non-empty \"## Unreleased\" section"
  fi
  printf '# fedfailover %s\n\n%s\n' "$version" "$body" >"$dir/$notes_md"
  echo "release-folder: $notes_md from \"$(head -1 <<<"$body")\" of CHANGELOG.md" >&2
}

# json_string prints the first string value of KEY in a JSON file (or
# stream), whatever its spacing; nothing when there is none.
json_string() {
  { grep -o "\"$1\": *\"[^\"]*\"" || true; } | head -1 | sed 's/.*: *"\(.*\)"$/\1/'
}

# describe says what a file of the release is.
describe() {
  case $1 in
    kubectl-failover_*.tar.gz.spdx.json | "$image_tar.spdx.json") echo "SBOM (SPDX 2.3 JSON) of ${1%.spdx.json}: its Go binaries' modules" ;;
    kubectl-failover_*.tar.gz)
      local p=${1#kubectl-failover_"${version}"_}
      p=${p%.tar.gz}
      echo "kubectl plugin for ${p/_//}: kubectl-failover, kubectl_complete-failover, LICENSE"
      ;;
    failover.yaml) echo "krew plugin manifest (kubectl krew install --manifest=failover.yaml)" ;;
    "$image_tar") echo "manager image: OCI image layout as a tar (oci-archive), ${IMAGE_PLATFORMS:-linux/amd64,linux/arm64}" ;;
    "$chart_tgz") echo "Helm chart, version $chart_version, appVersion $chart_version (CRDs in crds/)" ;;
    "$notes_md") echo "release notes (CHANGELOG.md)" ;;
    MANIFEST) echo "this list" ;;
    SHA256SUMS) echo "sha256 of every other file (sha256sum -c SHA256SUMS)" ;;
    *) echo "?" ;;
  esac
}

index() {
  local digest="" f
  local layout=${IMAGE_DIR:-_output/image}
  if [ -f "$layout/index.json" ]; then
    digest=$(json_string digest <"$layout/index.json")
  fi
  rm -f "$dir/MANIFEST" "$dir/SHA256SUMS"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  {
    echo "fedfailover $version"
    echo "revision: ${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
    echo "image index: ${digest:-unknown} (ref name $version in $image_tar)"
    echo
    for f in $( (files; echo MANIFEST; echo SHA256SUMS) | LC_ALL=C sort); do
      local size=-
      [ -f "$dir/$f" ] && size=$(stat -c %s "$dir/$f")
      printf '%-58s %10s  %s\n' "$f" "$size" "$(describe "$f")"
    done
  } >"$tmp/MANIFEST"
  mv "$tmp/MANIFEST" "$dir/MANIFEST"
  local names
  names=$(files)
  # shellcheck disable=SC2086 # file names without spaces, one per line
  (cd "$dir" && sha256sum $names) >"$tmp/SHA256SUMS"
  mv "$tmp/SHA256SUMS" "$dir/SHA256SUMS"
}

verify() {
  local fail=0 f have want
  have=$(files)
  want=$(expected | LC_ALL=C sort)
  while read -r f; do
    echo "release-folder: MISSING $dir/$f" >&2
    fail=1
  done < <(comm -13 <(echo "$have") <(echo "$want"))
  while read -r f; do
    echo "release-folder: unexpected $dir/$f (a stale file? run make release again)" >&2
    fail=1
  done < <(comm -23 <(echo "$have") <(echo "$want"))
  while read -r f; do
    [ -s "$dir/$f" ] || { echo "release-folder: $dir/$f is empty" >&2; fail=1; }
  done <<<"$have"
  [ "$fail" = 0 ] || die "$dir is incomplete"

  # Every file but SHA256SUMS has its sum there, and the sums hold.
  [ "$(awk '{print $2}' "$dir/SHA256SUMS" | LC_ALL=C sort)" = "$(grep -vx SHA256SUMS <<<"$have")" ] ||
    die "SHA256SUMS does not list exactly the other files"
  (cd "$dir" && sha256sum --quiet --strict -c SHA256SUMS) || die "SHA256SUMS does not match"

  # Each SBOM is SPDX 2.3 of its artifact (by sha256) and lists client-go.
  local art sum
  while read -r f; do
    art=${f%.spdx.json}
    sum=$(sha256sum "$dir/$art" | cut -d' ' -f1)
    if ! grep -q '"spdxVersion": "SPDX-2.3"' "$dir/$f" || ! grep -q "\"checksumValue\": \"$sum\"" "$dir/$f" ||
      ! grep -q '"name": "k8s.io/client-go"' "$dir/$f"; then
      die "$f is not the SPDX 2.3 SBOM of $art (sha256 $sum) listing k8s.io/client-go"
    fi
  done < <(grep '\.spdx\.json$' <<<"$have")
  # The krew manifest is of this version and names every archive's sha256.
  grep -qx "  version: $version" "$dir/failover.yaml" || die "failover.yaml is not of $version"
  while read -r f; do
    grep -q "sha256: $(sha256sum "$dir/$f" | cut -d' ' -f1)" "$dir/failover.yaml" || die "failover.yaml lacks the sha256 of $f"
  done < <(grep '\.tar\.gz$' <<<"$have")
  # The chart carries the release's version and its CRDs.
  local chart
  chart=$(tar -xzOf "$dir/$chart_tgz" fedfailover/Chart.yaml)
  if ! grep -qx "version: $chart_version" <<<"$chart" || ! grep -Eqx "appVersion: \"?$chart_version\"?" <<<"$chart"; then
    die "$chart_tgz is not version/appVersion $chart_version"
  fi
  local crds
  crds=$(find charts/fedfailover/crds -name '*.yaml' | wc -l)
  [ "$(tar -tzf "$dir/$chart_tgz" | grep -c '^fedfailover/crds/.*\.yaml$')" -eq "$crds" ] || die "$chart_tgz lacks some of its $crds CRDs"
  # The image tar is an OCI layout naming the release's version.
  tar -xOf "$dir/$image_tar" oci-layout >/dev/null || die "$image_tar is not an OCI image layout"
  [ "$(tar -xOf "$dir/$image_tar" index.json | json_string org.opencontainers.image.ref.name)" = "$version" ] ||
    die "$image_tar does not name its image $version (org.opencontainers.image.ref.name)"
  [ "$(head -1 "$dir/$notes_md")" = "# fedfailover $version" ] || die "$notes_md is not of $version"
  echo "release-folder: $dir holds the $(wc -l <<<"$have") expected files of $version, checked" >&2
}

case $cmd in
  clean) clean ;;
  notes) notes ;;
  index) index ;;
  verify) verify ;;
  *) usage ;;
esac
