#!/usr/bin/env bash
# Fail when the simulated runtime's lock inputs no longer match docker/versions.yaml + sim-pins.yaml, or when
# re-resolving them (the committed locks as preference) changes a lock. Needs PyPI; the CPU lock also needs the
# find-links folder that holds the CPU torch wheel (SIM_FIND_LINKS), and is reported, not skipped, without it.
set -euo pipefail
cd "$(dirname "$0")/../.."
py="${PY:-.venv/bin/python}"
platform="${SIM_PLATFORM:-x86_64-manylinux_2_28}"
find_links="${SIM_FIND_LINKS:-/opt/wheels}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docker/sim-runtime"
"$py" docker/tools/imagetool.py lock-input sim -o "$tmp/docker/sim-runtime/requirements.in"
"$py" docker/tools/imagetool.py lock-input sim-verl -o "$tmp/docker/sim-runtime/verl.in"
for f in requirements.in verl.in; do
  cmp -s "$tmp/docker/sim-runtime/$f" "docker/sim-runtime/$f" \
    || { echo "docker/sim-runtime/$f does not match the manifest: run 'make lock-sim' and commit it" >&2; exit 1; }
done
status=0
relock() {  # relock LOCK INPUT [uv args...]
  local lock="$1" input="$2"; shift 2
  cp "docker/sim-runtime/$lock" "$tmp/docker/sim-runtime/$lock"
  (cd "$tmp" && uv pip compile --quiet --generate-hashes --python-version 3.11 --python-platform "$platform" \
     --custom-compile-command "make lock-sim" "$@" "docker/sim-runtime/$input" -o "docker/sim-runtime/$lock")
  if ! diff -u <(grep -v '^#' "docker/sim-runtime/$lock") <(grep -v '^#' "$tmp/docker/sim-runtime/$lock") >&2; then
    echo "docker/sim-runtime/$lock no longer resolves to itself: run 'make lock-sim' and commit it" >&2
    status=1
  fi
}
links=()
for d in $find_links; do [ -d "$d" ] && links+=(--find-links "$d"); done
if [ "${#links[@]}" -gt 0 ]; then
  relock requirements.lock requirements.in "${links[@]}"
else
  echo "lock-sim-check: no find-links folder ($find_links): requirements.lock (CPU torch) not re-resolved here" >&2
fi
relock requirements-pypi.lock requirements.in
relock verl.lock verl.in --no-deps
[ "$status" = 0 ] && echo "sim locks match the manifest and resolve to themselves"
exit "$status"
