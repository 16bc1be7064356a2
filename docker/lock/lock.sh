#!/usr/bin/env bash
# The NPU pip lock: linux/aarch64, CPython 3.11, exact versions with sha256 hashes.
#   lock.sh write   render docker/lock/npu.in from the manifest, resolve it into npu-aarch64.lock; resolve the
#                   Ascend-index packages into npu-ascend-aarch64.lock when ASCEND_INDEX_URL is set (or PyPI has
#                   them), else record them in unresolved.txt
#   lock.sh check   fail when npu.in no longer matches the manifest, or when re-resolving with the committed lock
#                   as preference changes it (a pin moved, a package vanished, the input changed); needs PyPI
# Packages built from the git sources are resolved where others depend on them but never emitted.
set -euo pipefail
mode="${1:-}"
case "$mode" in write|check) ;; *) echo "usage: lock.sh write|check" >&2; exit 2 ;; esac
cd "$(dirname "$0")/../.."
py="${PY:-.venv/bin/python}"
platform="${NPU_PLATFORM:-aarch64-manylinux_2_28}"
ascend_index="${ASCEND_INDEX_URL:-}"
no_emit=(--no-emit-package verl --no-emit-package vllm --no-emit-package vllm-ascend --no-emit-package megatron-core
         --no-emit-package mindspeed --no-emit-package megatron-bridge --no-emit-package transformers)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docker/lock"
"$py" docker/tools/imagetool.py lock-input npu -o "$tmp/docker/lock/npu.in"
"$py" docker/tools/imagetool.py lock-input npu-ascend -o "$tmp/docker/lock/npu-ascend.in"

compile() {  # compile INPUT OUTPUT [extra uv args...], run in $tmp so the lock names the input by its repo path
  local input="$1" output="$2"; shift 2
  (cd "$tmp" && uv pip compile --quiet --generate-hashes --python-version 3.11 --python-platform "$platform" \
     --custom-compile-command "make lock-npu" "$@" "$input" -o "$output")
}

if [ "$mode" = check ]; then
  for f in npu.in npu-ascend.in; do
    cmp -s "$tmp/docker/lock/$f" "docker/lock/$f" \
      || { echo "docker/lock/$f does not match docker/versions.yaml: run 'make lock-npu' and commit it" >&2; exit 1; }
  done
  cp docker/lock/npu-aarch64.lock "$tmp/docker/lock/npu-aarch64.lock"
  compile docker/lock/npu.in docker/lock/npu-aarch64.lock "${no_emit[@]}"
  if ! diff -u <(grep -v '^#' docker/lock/npu-aarch64.lock) <(grep -v '^#' "$tmp/docker/lock/npu-aarch64.lock") >"$tmp/diff"; then
    head -40 "$tmp/diff" >&2
    echo "docker/lock/npu-aarch64.lock no longer resolves to itself: run 'make lock-npu' and commit it" >&2
    exit 1
  fi
  missing="$(awk '/^[A-Za-z0-9]/{name=$1} /--hash=sha256:/{h[name]=1} END{for (n in h) c++; print c}' docker/lock/npu-aarch64.lock)"
  total="$(grep -cE '^[A-Za-z0-9][^ ]*==' docker/lock/npu-aarch64.lock)"
  [ "$missing" = "$total" ] || { echo "docker/lock/npu-aarch64.lock: $((total - missing)) package(s) without hashes" >&2; exit 1; }
  if [ -f docker/lock/npu-ascend-aarch64.lock ]; then
    grep -q -- '--hash=sha256:' docker/lock/npu-ascend-aarch64.lock \
      || { echo "docker/lock/npu-ascend-aarch64.lock has no hashes" >&2; exit 1; }
  else
    grep -q '^triton-ascend==' docker/lock/unresolved.txt \
      || { echo "triton-ascend is neither locked nor recorded in docker/lock/unresolved.txt: run 'make lock-npu'" >&2; exit 1; }
  fi
  echo "NPU lock: $total packages with hashes, resolves to itself, input matches the manifest"
  exit 0
fi

compile docker/lock/npu.in docker/lock/npu-aarch64.lock "${no_emit[@]}"
cp "$tmp/docker/lock/npu.in" "$tmp/docker/lock/npu-ascend.in" "$tmp/docker/lock/npu-aarch64.lock" docker/lock/
# The Ascend-index packages: from ASCEND_INDEX_URL when given, else try PyPI and record what is not there.
ascend_args=(--no-deps)
[ -n "$ascend_index" ] && ascend_args+=(--index-url "$ascend_index")
if compile docker/lock/npu-ascend.in docker/lock/npu-ascend-aarch64.lock "${ascend_args[@]}" 2>"$tmp/ascend.err"; then
  cp "$tmp/docker/lock/npu-ascend-aarch64.lock" docker/lock/
  rm -f docker/lock/unresolved.txt
  echo "lock-npu: Ascend packages locked with hashes"
else
  rm -f docker/lock/npu-ascend-aarch64.lock
  {
    echo "# Written by \`make lock-npu\`: packages of docker/lock/npu-ascend.in that could not be resolved with hashes"
    echo "# on the host that ran it (index: ${ascend_index:+an Ascend mirror}${ascend_index:-PyPI only})."
    echo "# Resolve them on a host that reaches Ascend's index or a mirror of it:"
    echo "#   make lock-npu ASCEND_INDEX_URL=https://<ascend index or mirror>/simple"
    echo "# Until then \`make image-npu\` stops with this list; it never installs them without hashes."
    grep -vE '^#|^$' docker/lock/npu-ascend.in | while read -r req; do
      echo "$req"
    done
    echo "# resolver said:"
    grep -E 'version|found|unsatisfiable' "$tmp/ascend.err" | sed 's/^/#   /' | head -5
  } > docker/lock/unresolved.txt
  echo "lock-npu: Ascend packages unresolved here, recorded in docker/lock/unresolved.txt" >&2
fi
echo "lock-npu: $(grep -cE '^[A-Za-z0-9][^ ]*==' docker/lock/npu-aarch64.lock) packages in docker/lock/npu-aarch64.lock"
