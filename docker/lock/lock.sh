#!/usr/bin/env bash
# The NPU pip locks: one resolution for CPython 3.11 on linux/aarch64 (the A3 image) and linux/x86_64 (the rehearsal
# on a stand-in base), exact versions with sha256 hashes.
#   lock.sh write    render docker/lock/npu.in (manifest + docker/lock/upstream/*.txt) and resolve it, with
#                    docker/lock/overrides.txt, into docker/lock/npu.lock. Never touches the Ascend lock.
#   lock.sh ascend   resolve docker/lock/npu-ascend.in (triton-ascend) from ASCEND_INDEX_URL into
#                    docker/lock/npu-ascend.lock. Never touches docker/lock/npu.lock (the main lock stays as it is).
#   lock.sh check    fail when an input no longer matches the manifest, or when re-resolving with the committed lock
#                    as preference changes it (a pin moved, a package vanished, an input changed); needs PyPI
# Packages built from the git sources are left out of the input (see docker/tools/imagetool.py) and never emitted.
# LOCK_DIR (default docker/lock) is where the lock files are read and written (the tests use a copy).
set -euo pipefail
mode="${1:-}"
case "$mode" in write|ascend|check) ;; *) echo "usage: lock.sh write|ascend|check" >&2; exit 2 ;; esac
cd "$(dirname "$0")/../.."
py="${PY:-.venv/bin/python}"
lock_dir="${LOCK_DIR:-docker/lock}"
ascend_index="${ASCEND_INDEX_URL:-}"
# The main lock: universal (markers select the aarch64 or x86_64 wheels), overrides applied
main_args=(--universal --override docker/lock/overrides.txt)
for p in verl vllm vllm-ascend megatron-core mindspeed megatron-bridge transformers; do main_args+=(--no-emit-package "$p"); done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# shellcheck source-path=SCRIPTDIR/../..
. docker/tools/lockfns.sh
# uv runs in $tmp, which mirrors docker/lock/, so the lock names its inputs by their repository paths
lock_setup lock-npu "" "$tmp" docker/lock 40
mkdir -p "$tmp/docker/lock"
"$py" docker/tools/imagetool.py lock-input npu -o "$tmp/docker/lock/npu.in"
"$py" docker/tools/imagetool.py lock-input npu-ascend -o "$tmp/docker/lock/npu-ascend.in"
cp docker/lock/overrides.txt "$tmp/docker/lock/overrides.txt"

count() { grep -cE '^[A-Za-z0-9][^ ]*==' "$1"; }

if [ "$mode" = check ]; then
  for f in npu.in npu-ascend.in; do
    lock_input_check "$tmp/docker/lock/$f" "$lock_dir/$f" "docker/versions.yaml or docker/lock/upstream/"
  done
  lock_relock "$lock_dir/npu.lock" docker/lock/npu.in "${main_args[@]}"
  [ "$lock_status" = 0 ] || exit 1
  hashed="$(awk '/^[A-Za-z0-9]/{name=$0} /--hash=sha256:/{h[name]=1} END{for (n in h) c++; print c}' "$lock_dir/npu.lock")"
  total="$(count "$lock_dir/npu.lock")"
  [ "$hashed" = "$total" ] || { echo "$lock_dir/npu.lock: $((total - hashed)) package(s) without hashes" >&2; exit 1; }
  if [ -f "$lock_dir/npu-ascend.lock" ]; then
    grep -q -- '--hash=sha256:' "$lock_dir/npu-ascend.lock" \
      || { echo "$lock_dir/npu-ascend.lock has no hashes: run 'make lock-npu-ascend ASCEND_INDEX_URL=...'" >&2; exit 1; }
  else
    grep -q '^triton-ascend==' "$lock_dir/unresolved.txt" \
      || { echo "triton-ascend is neither locked nor recorded in $lock_dir/unresolved.txt: run 'make lock-npu-ascend'" >&2; exit 1; }
  fi
  echo "NPU lock: $total packages with hashes, resolves to itself, inputs match the manifest and docker/lock/upstream/"
  exit 0
fi

if [ "$mode" = write ]; then
  [ -f "$lock_dir/npu.lock" ] && cp "$lock_dir/npu.lock" "$tmp/docker/lock/npu.lock"  # prefer what is locked
  lock_compile docker/lock/npu.in docker/lock/npu.lock "${main_args[@]}"
  cp "$tmp/docker/lock/npu.in" "$tmp/docker/lock/npu-ascend.in" "$tmp/docker/lock/npu.lock" "$lock_dir/"
  echo "lock-npu: $(count "$lock_dir/npu.lock") packages in $lock_dir/npu.lock"
  [ -f "$lock_dir/npu-ascend.lock" ] || echo "lock-npu: the Ascend-index packages are not locked yet: run 'make lock-npu-ascend ASCEND_INDEX_URL=<Ascend index or mirror>'" >&2
  exit 0
fi

# ascend: only triton-ascend, only from the Ascend index; the main lock is neither re-resolved nor rewritten.
if [ -z "$ascend_index" ]; then
  echo "lock-npu-ascend: set ASCEND_INDEX_URL=<Ascend's pip index or a mirror>/simple (docs/image.md names it)" >&2
  exit 2
fi
cmp -s "$tmp/docker/lock/npu-ascend.in" "$lock_dir/npu-ascend.in" \
  || { echo "$lock_dir/npu-ascend.in does not match docker/versions.yaml: run 'make lock-npu' first and commit it" >&2; exit 1; }
before="$(sha256sum "$lock_dir/npu.lock")"
# --no-deps: triton-ascend declares no requirements (its wheel METADATA has no Requires-Dist); should a release add
# some, the image's `pip check` reports them. --index-url: the Ascend index only, so PyPI cannot answer for it.
if lock_compile docker/lock/npu-ascend.in docker/lock/npu-ascend.lock --no-deps --index-url "$ascend_index" 2>"$tmp/ascend.err"; then
  cp "$tmp/docker/lock/npu-ascend.lock" "$lock_dir/npu-ascend.lock"
  rm -f "$lock_dir/unresolved.txt"
  [ "$before" = "$(sha256sum "$lock_dir/npu.lock")" ] || { echo "lock-npu-ascend: $lock_dir/npu.lock changed (it must not)" >&2; exit 1; }
  echo "lock-npu-ascend: $(count "$lock_dir/npu-ascend.lock") package(s) locked with hashes in $lock_dir/npu-ascend.lock; $lock_dir/npu.lock unchanged"
else
  # The URL may carry a token: never echo it.
  sed "s|${ascend_index}|\$ASCEND_INDEX_URL|g; s/^/lock-npu-ascend: /" "$tmp/ascend.err" | head -8 >&2
  echo "lock-npu-ascend: ASCEND_INDEX_URL did not serve $(grep -vE '^#|^$' "$tmp/docker/lock/npu-ascend.in" | tr '\n' ' ')with hashes: check the URL (it ends in /simple) and that it mirrors Ascend's index" >&2
  exit 1
fi
