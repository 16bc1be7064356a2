#!/usr/bin/env bash
# The simulated runtime's locks (x86_64 only: the simulated cluster runs on this machine's architecture).
#   lock.sh write   render the inputs from docker/versions.yaml + sim-pins.yaml and re-resolve the locks (the
#                   committed ones as preference); requirements.lock (the CPU torch wheel of a SIM_FIND_LINKS folder)
#                   only where such a folder exists, else it is left as it is, with a warning: a build host has none
#   lock.sh check   fail when an input no longer matches the manifest, or re-resolving a lock changes it
# Needs PyPI; the CPU lock also needs the find-links folder, and is reported, not skipped, without it.
set -euo pipefail
mode="${1:-}"
case "$mode" in write|check) ;; *) echo "usage: docker/sim-runtime/lock.sh write|check" >&2; exit 2 ;; esac
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
mapfile -t links < <(find_links_args "$find_links")
if [ "$mode" = write ]; then
  cp "$tmp/docker/sim-runtime/requirements.in" "$tmp/docker/sim-runtime/verl.in" docker/sim-runtime/
  lock_setup lock-sim "$platform" . ""
  if [ "${#links[@]}" -gt 0 ]; then
    lock_compile docker/sim-runtime/requirements.in docker/sim-runtime/requirements.lock "${links[@]}"
  else
    echo "lock-sim: WARNING: no find-links folder ($find_links): docker/sim-runtime/requirements.lock (CPU torch)" \
      "left as it is" >&2
  fi
  lock_compile docker/sim-runtime/requirements.in docker/sim-runtime/requirements-pypi.lock
  lock_compile docker/sim-runtime/verl.in docker/sim-runtime/verl.lock --no-deps
  echo "lock-sim: docker/sim-runtime/*.lock resolved from the manifest"
  exit 0
fi
for f in requirements.in verl.in; do
  lock_input_check "$tmp/docker/sim-runtime/$f" "docker/sim-runtime/$f"
done
if [ "${#links[@]}" -gt 0 ]; then
  lock_relock docker/sim-runtime/requirements.lock docker/sim-runtime/requirements.in "${links[@]}"
else
  echo "lock-sim-check: no find-links folder ($find_links): requirements.lock (CPU torch) not re-resolved here" >&2
fi
lock_relock docker/sim-runtime/requirements-pypi.lock docker/sim-runtime/requirements.in
lock_relock docker/sim-runtime/verl.lock docker/sim-runtime/verl.in --no-deps
[ "$lock_status" = 0 ] && echo "sim locks match the manifest and resolve to themselves"
exit "$lock_status"
