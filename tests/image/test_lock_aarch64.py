"""The locks on linux/aarch64, every A3 build host's machine (issue 43). Unit tier: `requirements/lock.sh install`
picks requirements/dev-aarch64.lock by `uname -m` (a fake `uname` and `uv` on PATH: nothing is installed) and the
x86_64 locks otherwise, as before. Network tier: every lock meant for aarch64 still resolves there from PyPI, wheels
only (the sdist-only packages aside), to the very pins it holds, with the aarch64 files' hashes among its own."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.markers import Marker

ROOT = Path(__file__).resolve().parents[2]
REQ = ROOT / "requirements"
NPU = ROOT / "docker" / "lock"
PLATFORM = "aarch64-manylinux_2_28"
# The install line lock.sh prints (its find-links flags and locks follow)
INSTALL = "uv pip install --require-hashes --no-deps --compile-bytecode"
# What a marker sees on an A3 build host or in the NPU image: CPython 3.11 on linux/aarch64.
AARCH64_ENV = {
    "platform_machine": "aarch64",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "python_version": "3.11",
    "python_full_version": "3.11.2",
}
# Installed on aarch64 and checked there (network tier).
AARCH64_LOCKS = {"requirements/dev-aarch64.lock", "requirements/verl.lock", "docker/lock/npu.lock"}
# x86_64 only, on purpose: the local CPU torch wheel (dev.lock, the simulated runtime's requirements.lock) is an
# x86_64 wheel; dev-pypi.lock is the x86_64 PyPI fallback whose aarch64 counterpart is dev-aarch64.lock; the
# simulated runtime image (docker/sim-runtime) is built for x86_64 hosts only.
X86_64_ONLY = {
    "requirements/dev.lock",
    "requirements/dev-pypi.lock",
    "docker/sim-runtime/requirements.lock",
    "docker/sim-runtime/requirements-pypi.lock",
    "docker/sim-runtime/verl.lock",
}


@dataclass
class Pin:
    name: str
    version: str
    marker: str
    hashes: set[str] = field(default_factory=set)


def pins(lock: Path) -> list[Pin]:
    """Every entry of a uv hashed lock; a universal lock may pin one name twice under different markers."""
    out: list[Pin] = []
    for line in lock.read_text().splitlines():
        m = re.match(r"([A-Za-z0-9._-]+)(?:\[[^]]*\])?==([^ ;\\]+)(?: ; ([^\\]+))?", line)
        if m:
            out.append(Pin(m.group(1).lower(), m.group(2), (m.group(3) or "").strip()))
        elif "--hash=sha256:" in line:
            out[-1].hashes.add(line.strip().rstrip(" \\").removeprefix("--hash=sha256:"))
    return out


def on_aarch64(lock: Path) -> dict[str, Pin]:
    """The entries an aarch64 install of the lock takes (markers evaluated for CPython 3.11 on linux/aarch64)."""
    taken = [p for p in pins(lock) if not p.marker or Marker(p.marker).evaluate(AARCH64_ENV)]
    names = [p.name for p in taken]
    assert len(names) == len(set(names)), f"{lock}: one name pinned twice on aarch64"
    return {p.name: p for p in taken}


def test_every_lock_is_checked_on_aarch64_or_x86_64_only_on_purpose() -> None:
    found = {str(p.relative_to(ROOT)) for p in [*REQ.glob("*.lock"), *(ROOT / "docker").glob("**/*.lock")]}
    assert found == AARCH64_LOCKS | X86_64_ONLY, (
        "classify each lock here: AARCH64_LOCKS (checked on aarch64) or X86_64_ONLY (and why)"
    )
    assert not AARCH64_LOCKS & X86_64_ONLY


def test_aarch64_dev_lock_is_exact_hashed_and_takes_pypi_torch_at_the_cpu_locks_version() -> None:
    lock = on_aarch64(REQ / "dev-aarch64.lock")
    assert len(lock) > 100
    for p in lock.values():
        assert not p.marker and re.fullmatch(r"[^=\s]+", p.version), p
        assert p.hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in p.hashes), p.name
    cpu_torch = on_aarch64(REQ / "dev.lock")["torch"].version
    # Same torch on both machines: the CPU wheel's version without its +cpu local tag (PyPI has no CPU-only
    # aarch64 build of it: its aarch64 wheel is the CUDA one, hence the nvidia-* wheels).
    assert cpu_torch.endswith("+cpu") and lock["torch"].version == cpu_torch.removesuffix("+cpu")
    assert any(name.startswith("nvidia-") for name in lock)
    # The same toolchain as x86_64: every package of the x86_64 PyPI lock, at the same version.
    pypi = {p.name: p.version for p in on_aarch64(REQ / "dev-pypi.lock").values()}
    assert {name: p.version for name, p in lock.items()} == pypi


def test_the_venv_is_rebuilt_when_the_aarch64_lock_changes() -> None:
    line = next(x for x in (ROOT / "mk" / "python.mk").read_text().splitlines() if x.startswith("DEV_LOCKS"))
    assert "requirements/dev-aarch64.lock" in line.split(":=", 1)[1].split()


def fake_tools(tmp_path: Path, machine: str) -> tuple[dict[str, str], Path, Path]:
    """PATH with a `uname -m` that says MACHINE and a `uv` that records its arguments (and freezes nothing), the
    record's path, and a stand-in interpreter for lock.sh to pass around."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "uv.args"
    real_uname = shutil.which("uname")
    assert real_uname
    scripts = {
        "uname": f'#!/bin/sh\nif [ "$1" = -m ]; then echo {machine}; else exec {real_uname} "$@"; fi\n',
        "uv": f'#!/bin/sh\necho "$*" >> {record}\n',
        "python": "#!/bin/sh\nexit 0\n",
    }
    for name, text in scripts.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return env, record, bin_dir / "python"


def install(tmp_path: Path, machine: str, find_links: Path) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    env, record, py = fake_tools(tmp_path, machine)
    env["DEV_FIND_LINKS"] = str(find_links)
    out = subprocess.run(
        ["bash", str(REQ / "lock.sh"), "install", str(py)], env=env, capture_output=True, text=True, check=False
    )
    return out, record.read_text().splitlines() if record.exists() else []


@functools.cache
def locked_cpu_wheel() -> Path | None:
    """The CPU torch wheel dev.lock pins, where this machine has it (CI's /opt/wheels)."""
    text = (REQ / "dev.lock").read_text()
    for w in sorted(Path("/opt/wheels").glob("torch-*.whl")):
        if f"sha256:{hashlib.sha256(w.read_bytes()).hexdigest()}" in text:
            return w
    return None


@pytest.mark.parametrize("machine", ["aarch64", "arm64"])
def test_install_takes_the_aarch64_lock_on_aarch64_and_never_the_cpu_wheel_folder(tmp_path: Path, machine: str) -> None:
    # A folder that holds the very CPU wheel dev.lock pins (a link to it, or a file of the same name) must not
    # matter on aarch64: that wheel is x86_64 only.
    links = tmp_path / "wheels"
    links.mkdir()
    wheel = locked_cpu_wheel()
    if wheel:
        (links / wheel.name).symlink_to(wheel)
    else:
        (links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    out, calls = install(tmp_path, machine, links)
    assert out.returncode == 0, out.stderr
    assert calls[0].startswith("pip install ") and "--find-links" not in calls[0]
    assert "-r requirements/dev-aarch64.lock -r requirements/verl.lock" in calls[0]
    # No --find-links between the flags and the lock (two spaces), as on x86_64 without the wheel.
    assert f"{INSTALL}  -r requirements/dev-aarch64.lock -r requirements/verl.lock" in out.stdout
    assert f"venv: {machine}: installing requirements/dev-aarch64.lock" in out.stderr
    assert "WARNING" not in out.stderr


def test_install_on_x86_64_without_the_cpu_wheel_takes_the_pypi_lock_as_before(tmp_path: Path) -> None:
    out, calls = install(tmp_path, "x86_64", tmp_path / "no-such-folder")
    assert out.returncode == 0, out.stderr
    # The line x86_64 printed before aarch64 had a lock, byte for byte.
    assert out.stdout.splitlines()[0] == f"{INSTALL}  -r requirements/dev-pypi.lock -r requirements/verl.lock"
    assert "-r requirements/dev-pypi.lock -r requirements/verl.lock" in calls[0] and "--find-links" not in calls[0]
    assert "venv: WARNING: no torch wheel with the hash requirements/dev.lock pins" in out.stderr
    assert "dev-aarch64" not in out.stdout + out.stderr


def test_install_on_x86_64_with_the_cpu_wheel_takes_dev_lock(tmp_path: Path) -> None:
    wheel = locked_cpu_wheel()
    if wheel is None:
        pytest.skip("no CPU torch wheel with the hash requirements/dev.lock pins in /opt/wheels (CI has it)")
    out, calls = install(tmp_path, "x86_64", wheel.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == (
        f"{INSTALL} --find-links {wheel.parent} -r requirements/dev.lock -r requirements/verl.lock"
    )
    assert f"--find-links {wheel.parent}" in calls[0] and "-r requirements/dev.lock " in calls[0]
    assert out.stderr == ""


def test_install_refuses_a_machine_no_lock_is_made_for_before_installing_anything(tmp_path: Path) -> None:
    out, calls = install(tmp_path, "riscv64", tmp_path)
    assert out.returncode == 1
    assert calls == []
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "'riscv64'" in lines[0] and "x86_64 and aarch64" in lines[0]


def npu_lock_args() -> list[str]:
    """docker/lock/lock.sh's own resolution flags for the main NPU lock (--universal aside)."""
    text = (NPU / "lock.sh").read_text()
    m = re.search(r"for p in ([a-z -]+); do main_args\+=\(--no-emit-package", text)
    assert m and "--override docker/lock/overrides.txt" in text, "docker/lock/lock.sh changed: update this test"
    no_emit = [a for p in m.group(1).split() for a in ("--no-emit-package", p)]
    return ["--override", "docker/lock/overrides.txt", *no_emit]


@pytest.mark.network
@pytest.mark.parametrize(
    ("lock", "source", "args"),
    [
        ("requirements/dev-aarch64.lock", "requirements/dev.in", []),
        ("requirements/verl.lock", "requirements/verl.in", ["--no-deps"]),
        ("docker/lock/npu.lock", "docker/lock/npu.in", None),
    ],
)
def test_lock_resolves_on_aarch64_to_its_own_pins_and_hashes(
    tmp_path: Path, lock: str, source: str, args: list[str] | None
) -> None:
    committed = ROOT / lock
    want = on_aarch64(committed)
    sdist_only = {n.lower() for n in (NPU / "sdist-only.txt").read_text().split() if not n.startswith("#")}
    # Wheels only, for every package PyPI serves wheels of: an aarch64 host installs them without building.
    binary = [a for name in sorted(set(want) - sdist_only) for a in ("--only-binary", name)]
    out_lock = tmp_path / committed.name
    shutil.copy(committed, out_lock)  # the committed pins as preference
    out = subprocess.run(
        ["uv", "pip", "compile", "--quiet", "--generate-hashes", "--python-version", "3.11", "--python-platform",
         PLATFORM, *(npu_lock_args() if args is None else args), *binary, source, "-o", str(out_lock)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    got = on_aarch64(out_lock)
    assert {n: p.version for n, p in got.items()} == {n: p.version for n, p in want.items()}, lock
    for name, p in got.items():
        assert p.hashes and p.hashes <= want[name].hashes, f"{lock}: {name}: an aarch64 file's hash is not locked"
