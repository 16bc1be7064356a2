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
# shellcheck source-path=SCRIPTDIR/../..
. docker/tools/lockfns.sh
# uv runs in $tmp, which mirrors docker/sim-runtime/, so the locks name their inputs by their repository paths
lock_setup lock-sim "$platform" "$tmp" docker/sim-runtime
mkdir -p "$tmp/docker/sim-runtime"
"$py" docker/tools/imagetool.py lock-input sim -o "$tmp/docker/sim-runtime/requirements.in"
"$py" docker/tools/imagetool.py lock-input sim-verl -o "$tmp/docker/sim-runtime/verl.in"
for f in requirements.in verl.in; do
  lock_input_check "$tmp/docker/sim-runtime/$f" "docker/sim-runtime/$f"
done
mapfile -t links < <(find_links_args "$find_links")
if [ "${#links[@]}" -gt 0 ]; then
  lock_relock docker/sim-runtime/requirements.lock docker/sim-runtime/requirements.in "${links[@]}"
else
  echo "lock-sim-check: no find-links folder ($find_links): requirements.lock (CPU torch) not re-resolved here" >&2
fi
lock_relock docker/sim-runtime/requirements-pypi.lock docker/sim-runtime/requirements.in
lock_relock docker/sim-runtime/verl.lock docker/sim-runtime/verl.in --no-deps
[ "$lock_status" = 0 ] && echo "sim locks match the manifest and resolve to themselves"
exit "$lock_status"
