#!/usr/bin/env bash
# `make rehearse-arm64`: the aarch64 half of an A3 build host, rehearsed where no aarch64 host is at hand (issue 43).
# In an arm64 Debian (docker/versions.yaml's base.debian_suite, debootstrapped once and cached), run by qemu
# user-mode emulation on x86_64 (natively on an aarch64 host), from a fresh `git clone` of HEAD:
#   1. `make venv`: requirements/lock.sh picks requirements/dev-aarch64.lock by `uname -m`;
#   2. `verl-recipe validate qwen3.5-35b-fsdp --skip-path-checks` (verl's own start-up checks included) and
#      `verl-recipe plan qwen3.5-397b --nodes 16`;
#   3. docker/lock/npu.lock's wheels installed for aarch64 with their hashes (--require-hashes --no-deps
#      --only-binary :all:) into a scratch --target folder, then every pure-Python module in it imported (a few of
#      them must import; the rest are reported). The lock's sdists (docker/lock/sdist-only.txt) and the Ascend
#      index's packages (docker/lock/npu-ascend.in) are left out: the image build owns the former, and the latter's
#      index is not reachable from here.
# Not in CI: tens of minutes under emulation and about 4 GB from PyPI. The host's prerequisites (qemu-user-static,
# binfmt_misc and qemu's aarch64 handler) are set up here on the first run, as root, never by scripts/host-deps.sh.
# Environment:
#   ARM64_CACHE    cache folder (.cache/arm64): the rootfs tarball, uv's download cache, logs/ (kept), run-*/
#   ARM64_OVERLAY  working-tree files copied over the clone (to rehearse uncommitted changes); empty: HEAD as is
#   ARM64_MIRROR   Debian mirror for debootstrap (http://deb.debian.org/debian)
#   ARM64_TIMEOUT  minutes the in-container part may take (150)
#   ARM64_KEEP=1   keep the run folder (the clone and its aarch64 .venv) after the run
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
cache="${ARM64_CACHE:-.cache/arm64}"
overlay="${ARM64_OVERLAY:-}"
mirror="${ARM64_MIRROR:-http://deb.debian.org/debian}"
limit_min="${ARM64_TIMEOUT:-150}"
ca_bundle=/etc/ssl/certs/ca-certificates.crt
say() { echo "rehearse-arm64: $*"; }
die() { echo "rehearse-arm64: $*" >&2; exit 1; }

# --- preflight: every input checked before anything starts -------------------------------------------------------
[[ "$limit_min" =~ ^[1-9][0-9]*$ ]] || die "ARM64_TIMEOUT='$limit_min' is not a whole number of minutes: fix: e.g. ARM64_TIMEOUT=150"
head="$(git rev-parse --verify -q HEAD)" || die "$repo has no HEAD commit to clone: fix: run it in the repository's checkout"
for f in $overlay; do
  [ -f "$f" ] || die "ARM64_OVERLAY names '$f', which is no file of this working tree: fix: list files relative to $repo"
done
[ -x .venv/bin/python ] || die ".venv is missing (the suite is read from docker/versions.yaml with it): fix: make venv"
suite="$(.venv/bin/python docker/tools/imagetool.py get base.debian_suite)"
docker info >/dev/null 2>&1 || die "no Docker engine answers 'docker info': fix: make host-deps"
command -v debootstrap >/dev/null || die "debootstrap is missing: fix: make host-deps"
host_machine="$(uname -m)"
case "$host_machine" in
  x86_64|aarch64) ;;
  *) die "host machine '$host_machine' (uname -m) can be neither the build host nor emulate it: fix: run on x86_64 or aarch64" ;;
esac

# --- host prerequisites (x86_64 only): qemu-user-static and its aarch64 binfmt_misc handler ----------------------
binfmt=/proc/sys/fs/binfmt_misc
if [ "$host_machine" = x86_64 ]; then
  if ! command -v qemu-aarch64-static >/dev/null; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null \
      || die "qemu-aarch64-static is missing: fix: install Debian's qemu-user-static as root (apt-get install qemu-user-static)"
    say "installing qemu-user-static (once, for this rehearsal only)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static >/dev/null
  fi
  if [ ! -e "$binfmt/register" ]; then
    mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null \
      || die "binfmt_misc not mounted at $binfmt and mounting it failed: fix: as root on the host (or a --privileged container): mount -t binfmt_misc binfmt_misc $binfmt"
  fi
  if [ ! -e "$binfmt/qemu-aarch64" ]; then
    conf=/usr/lib/binfmt.d/qemu-aarch64.conf
    [ -f "$conf" ] || die "qemu-aarch64 is not registered in $binfmt and $conf is missing: fix: reinstall qemu-user-static"
    # Debian's entry carries the F flag: the kernel opens qemu once, here, so containers and chroots need no copy.
    grep -v '^#' "$conf" >"$binfmt/register" 2>/dev/null \
      || die "registering $conf in $binfmt/register was refused: fix: run as root on a host that may register binfmt handlers"
  fi
  grep -qx enabled "$binfmt/qemu-aarch64" \
    || die "the qemu-aarch64 binfmt handler is disabled: fix: echo 1 > $binfmt/qemu-aarch64"
  grep -q '^flags:.*F' "$binfmt/qemu-aarch64" \
    || die "the qemu-aarch64 binfmt handler lacks the F flag, so containers cannot find qemu: fix: echo -1 > $binfmt/qemu-aarch64 and run this again (it registers Debian's entry)"
fi

mkdir -p "$cache/logs" "$cache/uv"
cache="$(cd "$cache" && pwd)"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
log="$cache/logs/rehearse-$stamp.log"
exec > >(tee -a "$log") 2>&1
say "log: $log"
say "host $host_machine, HEAD $head, suite $suite"
started=$SECONDS
work="" rootfs="" ctx="" container=""
cleanup() {
  [ -z "$container" ] || docker rm -f "$container" >/dev/null 2>&1 || true  # already gone after --rm: not an error
  [ -z "$rootfs" ] || rm -rf "$rootfs"
  [ -z "$ctx" ] || rm -rf "$ctx"
  if [ -n "$work" ] && [ "${ARM64_KEEP:-0}" != 1 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT

# --- the arm64 Debian: a cached rootfs tarball, made a linux/arm64 image ----------------------------------------
image="arm64rh-debian:$suite"
tarball="$cache/rootfs-$suite-arm64.tar"
if [ "$(docker image inspect -f '{{.Architecture}}' "$image" 2>/dev/null)" != arm64 ]; then
  if [ ! -s "$tarball" ]; then
    rootfs="$(mktemp -d "$cache/rootfs.XXXXXX")"
    t=$SECONDS
    say "debootstrap --arch=arm64 $suite: first stage (host tools)"
    # python3 is Debian's 3.11 in bookworm, the project's Python; pip only to bootstrap uv as mk/python.mk does.
    debootstrap --arch=arm64 --foreign --variant=minbase --include=python3,python3-pip,make,ca-certificates \
      "$suite" "$rootfs" "$mirror" >/dev/null
    say "debootstrap: second stage inside the rootfs (arm64 binaries under qemu)"
    chroot "$rootfs" /debootstrap/debootstrap --second-stage >/dev/null
    [ "$(chroot "$rootfs" uname -m)" = aarch64 ] \
      || die "the rootfs's uname -m is not aarch64: fix: check the qemu-aarch64 binfmt handler ($binfmt)"
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
    tar --numeric-owner -C "$rootfs" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
    rootfs=""
    say "rootfs built in $((SECONDS - t)) s: $tarball"
  fi
  # A classic build FROM scratch, not `docker import`: an engine without experimental features ignores import's
  # --platform and records amd64, which `docker run --platform linux/arm64` then refuses.
  ctx="$(mktemp -d "$cache/image.XXXXXX")"
  ln "$tarball" "$ctx/rootfs.tar"
  printf 'FROM scratch\nADD rootfs.tar /\nCMD ["/bin/bash"]\n' >"$ctx/Dockerfile"
  DOCKER_BUILDKIT=0 docker build --quiet --platform linux/arm64 -t "$image" "$ctx" >/dev/null
  rm -rf "$ctx"
  ctx=""
  say "built $image (linux/arm64) from $tarball"
else
  say "reusing $image"
fi
arch="$(docker run --rm --platform linux/arm64 --network none "$image" uname -m)" \
  || die "$image does not start as linux/arm64 (see docker's line above): fix: docker rmi $image and run this again"
[ "$arch" = aarch64 ] || die "$image runs as '$arch', not aarch64: fix: check the qemu-aarch64 binfmt handler ($binfmt)"
say "$image runs arm64 binaries: uname -m = $arch"

# --- a fresh clone of HEAD (plus ARM64_OVERLAY), then the steps inside the arm64 container ------------------------
work="$(mktemp -d "$cache/run-$stamp.XXXX")"
git clone --quiet --no-local "$repo" "$work/src"
git -C "$work/src" checkout --quiet --detach "$head"
for f in $overlay; do
  mkdir -p "$work/src/$(dirname "$f")"
  cp -p "$f" "$work/src/$f"
done
say "clone of $head in $work/src; working-tree files over it: ${overlay:-none}"
git -C "$work/src" status --short
cat >"$work/inner.sh" <<'INNER'
set -euo pipefail
step() { echo "== $(date -u +%H:%M:%S) $*"; t=$SECONDS; }
took() { echo "== took $((SECONDS - t)) s"; }
[ "$(uname -m)" = aarch64 ] || { echo "inner: uname -m says $(uname -m), not aarch64" >&2; exit 1; }
echo "inner: $(uname -m), $(python3 --version), $(. /etc/os-release && echo "$PRETTY_NAME")"
cd /cache/"$RUN"/src
step "make venv"
make --no-print-directory venv
took
# the uv that make venv bootstrapped into the project folder (mk/python.mk UV_BOOT), as later make targets find it
for d in "$PWD"/.cache/uv-*/bin; do [ -x "$d/uv" ] && PATH="$d:$PATH"; done
command -v uv >/dev/null || { echo "inner: no uv after make venv (mk/python.mk UV_BOOT)" >&2; exit 1; }
.venv/bin/python -c 'import platform, torch; print("venv:", platform.machine(), "torch", torch.__version__, "cuda build", torch.version.cuda)'
step "verl-recipe validate qwen3.5-35b-fsdp --skip-path-checks"
.venv/bin/verl-recipe validate qwen3.5-35b-fsdp --skip-path-checks
took
step "verl-recipe plan qwen3.5-397b --nodes 16"
.venv/bin/verl-recipe plan qwen3.5-397b --nodes 16 | head -n 5
took
step "docker/lock/npu.lock (wheels) into a --target folder"
npu=/cache/"$RUN"/npu-target
awk -v want=0 -f docker/npu/lock-select.awk docker/lock/sdist-only.txt docker/lock/npu.lock >/cache/"$RUN"/npu-wheels.txt
uv pip install --quiet --python .venv/bin/python --target "$npu" --require-hashes --no-deps --only-binary :all: \
  -r /cache/"$RUN"/npu-wheels.txt
# Of the lock's sdists, antlr4-python3-runtime (pure Python; hydra and omegaconf import it) builds anywhere;
# arctic-inference compiles against torch, which the image build does (docker/npu/Dockerfile).
awk -v want=1 -f docker/npu/lock-select.awk <(echo antlr4-python3-runtime) docker/lock/npu.lock \
  >/cache/"$RUN"/npu-sdists.txt
uv pip install --quiet --python .venv/bin/python --target "$npu" --require-hashes --no-deps \
  -r /cache/"$RUN"/npu-sdists.txt
echo "installed $(ls -d "$npu"/*.dist-info | wc -l) distributions; left out: arctic-inference (an sdist with" \
  "a compiled extension) and the Ascend index's docker/lock/npu-ascend.in (triton-ascend: not reachable here)"
took
step "imports of the NPU lock's pure-Python modules"
# -S, then the target folder as the one site dir: nothing of Debian's dist-packages or the venv is seen. torch
# would load torch_npu (installed here) as its device backend, which needs CANN: off, as where no CANN is.
TORCH_DEVICE_BACKEND_AUTOLOAD=0 python3 -S - "$npu" <<'PY'
import importlib, os, pathlib, platform, signal, site, sys
target = pathlib.Path(sys.argv[1])
site.addsitedir(str(target))
import torch  # first: most of the rest import it, and a half-failed import of torch poisons every later one
mods = set()
for info in sorted(target.glob("*.dist-info")):
    wheel = (info / "WHEEL").read_text()
    tags = [l.split(":", 1)[1].strip() for l in wheel.splitlines() if l.startswith("Tag:")]
    if "Root-Is-Purelib: true" not in wheel or not all(t.endswith("-none-any") for t in tags):
        continue
    top = info / "top_level.txt"
    names = top.read_text().split() if top.exists() else []
    if not names:
        for line in (info / "RECORD").read_text().splitlines():
            first = line.split(",", 1)[0].split("/", 1)
            if len(first) == 2 and not first[0].endswith((".dist-info", ".data")):
                names.append(first[0])
            elif len(first) == 1 and first[0].endswith(".py"):
                names.append(first[0][:-3])
    # what is really there (bin/ is --target's scripts folder)
    there = [n for n in names if n != "bin" and ((target / n).is_dir() or (target / f"{n}.py").exists())]
    mods.update(n for n in there if n.isidentifier() and not n.startswith("_"))
def timed_out(*_):
    raise TimeoutError("no import in 300 s")
signal.signal(signal.SIGALRM, timed_out)
ok, failed = [], {}
for m in sorted(mods):
    signal.alarm(300)  # one hung import must not hold the rehearsal until its overall limit
    try:
        importlib.import_module(m)
        ok.append(m)
    except BaseException as e:  # every failure is reported; the required ones fail the step
        first = str(e).splitlines()[0] if str(e) else ""
        failed[m] = f"{type(e).__name__}: {first}"[:160]
        print(f"not imported: {m}: {failed[m]}", flush=True)
    finally:
        signal.alarm(0)
print(f"pure-Python modules imported: {len(ok)} of {len(mods)}")
print("imported:", " ".join(ok))
# Pure-Python parts verl's recipe needs at start-up, and (binary, aarch64) torch, which most of the rest import.
required = ["hydra", "omegaconf", "codetiming", "datasets", "torch"]
for m in required:
    if m not in ok and m not in failed:
        try:
            importlib.import_module(m)
            ok.append(m)
        except BaseException as e:
            failed[m] = f"{type(e).__name__}: {e}"[:160]
missing = [m for m in required if m not in ok]
if missing:
    print("required imports failed: " + "; ".join(f"{m}: {failed.get(m, '?')}" for m in missing), flush=True)
else:
    print("required imports ok:", " ".join(required), f"(torch {torch.__version__} on {platform.machine()})")
sys.stdout.flush()
# os._exit: the interpreter's teardown with torch loaded under qemu-user has crashed (SIGSEGV) after the results
os._exit(1 if missing else 0)
PY
took
INNER
container="arm64rh-rehearse-$stamp"
tls=() cpu=()
if [ "$host_machine" = x86_64 ]; then
  # Under qemu-user the kernel, and so sysfs, is the x86_64 host's: it has no cpuN/regs/identification/midr_el1,
  # which oneDNN's xbyak_aarch64 in torch's aarch64 wheel reads at `import torch` (and segfaults without). An aarch64
  # kernel has it; here a copy of the CPU folder gets a Kunpeng 920's MIDR_EL1 (HiSilicon 0x48, part 0xd01).
  fake="$work/sys-cpu"
  mkdir -p "$fake"
  for f in online possible present kernel_max; do cat "/sys/devices/system/cpu/$f" >"$fake/$f"; done
  for i in $(seq 0 $(($(nproc --all) - 1))); do
    mkdir -p "$fake/cpu$i/regs/identification"
    echo 0x00000000481fd010 >"$fake/cpu$i/regs/identification/midr_el1"
    echo 0x0000000000000000 >"$fake/cpu$i/regs/identification/revidr_el1"
  done
  cpu=(-v "$fake:/sys/devices/system/cpu:ro")
fi
# The host's CA bundle, so PyPI is trusted wherever the host's network inspects TLS
if [ -f "$ca_bundle" ]; then tls=(-v "$ca_bundle:$ca_bundle:ro" -e "SSL_CERT_FILE=$ca_bundle" -e "PIP_CERT=$ca_bundle"); fi
say "container $container: make venv, validate, plan, NPU lock (limit ${limit_min} min)"
t=$SECONDS
# Debian's python3 is externally managed (PEP 668): the rehearsal leaves it so, as a build host has it, and
# mk/python.mk's uv bootstrap must cope. UV_CACHE_DIR on the same mount as the clone: uv hardlinks.
timeout --foreground "$((limit_min * 60))" docker run --rm --name "$container" --platform linux/arm64 \
  -v "$cache:/cache" -e RUN="${work##*/}" -e UV_CACHE_DIR=/cache/uv \
  -e PIP_DISABLE_PIP_VERSION_CHECK=1 "${tls[@]}" "${cpu[@]}" "$image" bash /cache/"${work##*/}"/inner.sh \
  || die "the arm64 steps failed (exit $?) after $((SECONDS - t)) s: see the lines above and $log"
container=""
say "arm64 steps passed in $((SECONDS - t)) s; whole rehearsal $((SECONDS - started)) s; log: $log"
