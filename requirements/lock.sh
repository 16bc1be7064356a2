#!/usr/bin/env bash
# The development environment's locks (.venv, `make venv`): exact versions with sha256 hashes, CPython 3.11 on
# linux/x86_64, and on linux/aarch64 (every A3 build host):
#   dev.lock       dev.in (the toolchain) and verl-import.in (what `import verl` and its config checks need)
#                  resolved together, with the local CPU torch wheel of a DEV_FIND_LINKS folder pinned by hash;
#   dev-pypi.lock  the same input with PyPI's torch instead: the CUDA build, about 15 nvidia-* wheels and several GB
#                  more to download; the fallback where no folder holds the locked CPU wheel;
#   dev-aarch64.lock  the same input resolved for linux/aarch64 (DEV_ARM_PLATFORM): PyPI's aarch64 torch, which is
#                  its CUDA build too (nvidia-* wheels for aarch64); no CPU wheel folder is looked for there;
#   verl.lock      verl itself, installed with --no-deps (pure Python: one lock for both machines).
# verl-import.in is rendered by `docker/tools/imagetool.py lock-input dev-verl` (docker/versions.yaml and
# docker/sim-runtime/sim-pins.yaml, the facts the simulated runtime's lock input comes from).
#   lock.sh write   render verl-import.in, re-resolve the four locks (the committed ones as preference)
#   lock.sh check   fail when verl-import.in no longer matches the manifest, or when re-resolving a lock with the
#                   committed one as preference changes it; needs PyPI (dev.lock also a DEV_FIND_LINKS folder, and
#                   is reported, not skipped, without one)
#   lock.sh install PY   make the venv of interpreter PY exactly this machine's lock: on aarch64 (`uname -m`)
#                   dev-aarch64.lock; on x86_64 dev.lock with its find-links folder where one holds a torch wheel
#                   whose sha256 dev.lock pins, else dev-pypi.lock (with a warning); plus verl.lock, all --no-deps
#                   (the locks are the whole closure). Any other machine is refused. An existing venv is
#                   upgraded in place without a gap: new pins go in over the old ones, the project stays installed,
#                   then whatever no lock names is removed.
set -euo pipefail
mode="${1:-}"
case "$mode" in write|check|install) ;; *) echo "usage: requirements/lock.sh write|check|install PY" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
py="${PY:-.venv/bin/python}"
platform="${DEV_PLATFORM:-x86_64-manylinux_2_28}"
arm_platform="${DEV_ARM_PLATFORM:-aarch64-manylinux_2_28}"
find_links="${DEV_FIND_LINKS:-/opt/wheels}"

if [ "$mode" = install ]; then
  venv_py="${2:?usage: requirements/lock.sh install PY}"
  machine="$(uname -m)"
  case "$machine" in
    x86_64|aarch64|arm64) ;;
    *) echo "venv: no development lock for machine '$machine' (uname -m): requirements/ locks x86_64 and aarch64" \
         "only" >&2
       exit 1 ;;
  esac
  lock=requirements/dev-pypi.lock links=()
  if [ "$machine" != x86_64 ]; then
    # The CPU wheel folders hold x86_64 wheels only: an aarch64 host takes its own lock without looking there.
    lock=requirements/dev-aarch64.lock
    echo "venv: $machine: installing $lock, PyPI's aarch64 torch (its CUDA build: about 3 GB of nvidia-* and other" \
      "wheels)" >&2
  else
    for d in $find_links; do
      for w in "$d"/torch-*.whl; do
        if [ -f "$w" ] && grep -q "sha256:$(sha256sum "$w" | cut -d' ' -f1)" requirements/dev.lock; then
          lock=requirements/dev.lock links=(--find-links "$d")
          break 2
        fi
      done
    done
    [ "$lock" = requirements/dev.lock ] || echo "venv: WARNING: no torch wheel with the hash requirements/dev.lock" \
      "pins in '$find_links': installing requirements/dev-pypi.lock, PyPI's torch (the CUDA build: several GB of" \
      "nvidia-* wheels, minutes more)" >&2
  fi
  # Bytecode is compiled once here: verl's imports (torch, transformers, datasets) otherwise compile on every
  # `validate` wherever PYTHONDONTWRITEBYTECODE is set or the venv is read-only (about 11 s of CPU each time).
  echo "uv pip install --require-hashes --no-deps --compile-bytecode ${links[*]} -r $lock -r requirements/verl.lock"
  uv pip install --quiet --python "$venv_py" --require-hashes --no-deps --compile-bytecode "${links[@]}" -r "$lock" \
    -r requirements/verl.lock
  uv pip install --quiet --python "$venv_py" --no-deps -e .
  # The simulated cluster's CPU stand-ins (verl_sim_standin) are installed in the dev venv as in verl-recipe:sim,
  # editable from the repository (so their `verl_recipe.devices` entry point is registered); they never enter a lock
  # or the NPU image. A path file of older venvs goes.
  "$venv_py" -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "verl_sim_standin.pth").unlink(missing_ok=True)'
  uv pip install --quiet --python "$venv_py" --no-deps -e docker/sim-runtime/standin
  norm() { sed -nE 's/^([A-Za-z0-9._-]+)(\[[^]]*\])? ?==.*/\1/p' | tr 'A-Z_.' 'a-z--' | sort -u; }
  stray="$(comm -23 <(uv pip freeze --quiet --python "$venv_py" --exclude-editable | norm) \
    <(cat "$lock" requirements/verl.lock | norm))"
  if [ -n "$stray" ]; then
    # shellcheck disable=SC2086 # one name per word
    echo "uv pip uninstall" $stray
    # shellcheck disable=SC2086 # one name per word
    uv pip uninstall --quiet --python "$venv_py" $stray
  fi
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source-path=SCRIPTDIR/..
. docker/tools/lockfns.sh
lock_setup lock "$platform" . "$tmp"
"$py" docker/tools/imagetool.py lock-input dev-verl -o "$tmp/verl-import.in"
mapfile -t links < <(find_links_args "$find_links")
# lockfns.sh resolves for one platform (lock_setup's); the aarch64 lock is the one resolution for another.
on_arm() {
  local saved="$lock_platform"
  lock_platform="$arm_platform"
  "$@"
  lock_platform="$saved"
}
cpu_torch() {  # the CPU lock must pin the local +cpu wheel, never PyPI's CUDA torch
  grep -qE '^torch==[^ ]+\+cpu' "$1" \
    || { echo "$1 pins no +cpu torch: put the CPU torch wheel in a DEV_FIND_LINKS folder ($find_links)" >&2; exit 1; }
}

if [ "$mode" = write ]; then
  cp "$tmp/verl-import.in" requirements/verl-import.in
  if [ "${#links[@]}" -gt 0 ]; then
    lock_compile requirements/dev.in requirements/dev.lock "${links[@]}"
    cpu_torch requirements/dev.lock
  else
    echo "lock: WARNING: no find-links folder ($find_links): requirements/dev.lock (CPU torch) left as it is" >&2
  fi
  lock_compile requirements/dev.in requirements/dev-pypi.lock
  # uv writes where it reads its preferences: the aarch64 lock starts from the x86_64 PyPI one when it is new, so
  # both machines get the same versions wherever PyPI allows.
  [ -f requirements/dev-aarch64.lock ] || cp requirements/dev-pypi.lock requirements/dev-aarch64.lock
  on_arm lock_compile requirements/dev.in requirements/dev-aarch64.lock
  lock_compile requirements/verl.in requirements/verl.lock --no-deps
  exit 0
fi

lock_input_check "$tmp/verl-import.in" requirements/verl-import.in
if [ "${#links[@]}" -gt 0 ]; then
  lock_relock requirements/dev.lock requirements/dev.in "${links[@]}"
else
  echo "lock-check: no find-links folder ($find_links): requirements/dev.lock (CPU torch) not re-resolved here" >&2
fi
lock_relock requirements/dev-pypi.lock requirements/dev.in
on_arm lock_relock requirements/dev-aarch64.lock requirements/dev.in
lock_relock requirements/verl.lock requirements/verl.in --no-deps
[ "$lock_status" = 0 ] && echo "lock files match their inputs and resolve to themselves"
exit "$lock_status"
