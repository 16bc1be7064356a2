"""hadolint on every Dockerfile, and the lock files: hashes everywhere, exact pins, the manifest's versions, the
git-built packages left out, what could not be resolved here recorded; README's `make locks` against PyPI."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests import runbook

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
LOCK = ROOT / "docker" / "lock"
SIM = ROOT / "docker" / "sim-runtime"
REQ = ROOT / "requirements"
# manifest key -> distribution name in the NPU lock
NPU_PINNED = {
    "torch": "torch",
    "torchvision": "torchvision",
    "torch_npu": "torch-npu",
    "ray": "ray",
    "hydra_core": "hydra-core",
    "omegaconf": "omegaconf",
    "pyyaml": "pyyaml",
    "transfer_queue": "transferqueue",
    "flash_linear_attention": "flash-linear-attention",
}
GIT_BUILT = {"verl", "vllm", "vllm-ascend", "megatron-core", "mindspeed", "megatron-bridge", "transformers"}


def entries(lock: Path) -> dict[str, tuple[str, list[str]]]:
    """name -> (requirement line, hashes) of a uv/pip hashed lock."""
    out: dict[str, tuple[str, list[str]]] = {}
    name = ""
    for line in lock.read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            req = line.rstrip(" \\")
            name = re.split(r"[=<>!~\[ ;@]", req, maxsplit=1)[0].lower()
            out[name] = (req, [])
        elif "--hash=sha256:" in line:
            out[name][1].append(line.strip().rstrip(" \\"))
    return out


def manifest() -> dict:
    return yaml.safe_load((ROOT / "docker" / "versions.yaml").read_text())


def test_hadolint_is_clean_on_every_dockerfile() -> None:
    files = sorted(str(p) for p in ROOT.glob("docker/*/Dockerfile"))
    assert len(files) >= 3
    out = subprocess.run(
        [str(VENV_BIN / "hadolint"), "--config", str(ROOT / ".hadolint.yaml"), *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_hadolint_config_fails_on_warnings() -> None:
    cfg = yaml.safe_load((ROOT / ".hadolint.yaml").read_text())
    assert cfg["failure-threshold"] == "warning"
    assert {"DL3006", "DL3007", "DL4006"} <= set(cfg["override"]["error"])
    assert cfg.get("ignored") == []


@pytest.mark.parametrize(
    "lock",
    [
        LOCK / "npu.lock",
        SIM / "requirements.lock",
        SIM / "requirements-pypi.lock",
        SIM / "verl.lock",
        REQ / "dev.lock",
        REQ / "dev-pypi.lock",
        REQ / "dev-aarch64.lock",
        REQ / "verl.lock",
    ],
)
def test_every_locked_package_is_exact_and_hashed(lock: Path) -> None:
    found = entries(lock)
    assert found, lock
    for name, (req, hashes) in found.items():
        assert re.fullmatch(r"[A-Za-z0-9._-]+(\[[a-z0-9,_-]+\])?==[^=\s]+( ;.*)?", req), f"{lock.name}: {req}"
        assert hashes and all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes), f"{lock.name}: {name}"


def test_npu_lock_holds_the_manifest_pins_and_no_git_built_package() -> None:
    pk = manifest()["python_packages"]
    found = entries(LOCK / "npu.lock")
    for key, dist in NPU_PINNED.items():
        assert found[dist][0].split("==")[1] == str(pk[key]), dist
    assert not GIT_BUILT & set(found)
    # Every package the upstream image installed unpinned is now exact.
    for unpinned in ("mbridge", "wandb", "datasets", "peft", "nvidia-modelopt", "qwen-vl-utils", "viztracer"):
        assert unpinned in found, unpinned
    header = (LOCK / "npu.lock").read_text().splitlines()[:2]
    assert header[1].strip() == "#    make lock-npu"


def test_ascend_index_packages_are_locked_or_recorded_as_unresolved() -> None:
    triton = f"triton-ascend=={manifest()['python_packages']['triton_ascend']}"
    ascend_lock = LOCK / "npu-ascend.lock"
    if ascend_lock.exists():
        assert entries(ascend_lock)["triton-ascend"][1]
    else:
        text = (LOCK / "unresolved.txt").read_text()
        assert triton in text.splitlines() and "ASCEND_INDEX_URL" in text
        # The NPU build refuses to go on without the hashed Ascend lock.
        assert "npu-ascend.lock is missing" in (ROOT / "docker" / "npu" / "Dockerfile").read_text()


def test_sim_lock_holds_the_manifest_pins() -> None:
    pk = manifest()["python_packages"]
    pins = yaml.safe_load((SIM / "sim-pins.yaml").read_text())
    found = entries(SIM / "requirements.lock")
    assert found["ray"][0] == f"ray=={pk['ray']}"
    assert found["hydra-core"][0] == f"hydra-core=={pk['hydra_core']}"
    assert found["torch"][0] == f"torch=={pins['torch_cpu']}+cpu"
    assert "torch-npu" not in found
    assert entries(SIM / "verl.lock")["verl"][0] == f"verl=={manifest()['git_sources']['verl']['version']}"


@pytest.mark.network
def test_the_build_hosts_lock_step_as_readme_types_it(tmp_path: Path) -> None:
    """README step 2's `make locks`, typed as README has it, in a copy of the repository on a machine without the
    CPU torch wheel folder (a build host has none): every lock the manifest feeds re-resolves to itself and is
    checked; the two CPU-torch locks are left as they are, and said so."""
    (line,) = [c.line for c in runbook.commands() if runbook.rule_for(c.line).how == runbook.IN_A_COPY]
    copy = tmp_path / "repo"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name)
    # The copy's venv is this one's interpreter behind a stamp newer than every copied file, so `make venv` there
    # finds it current and never reinstalls (an editable install from the copy would outlive the test).
    for p in copy.rglob("*"):
        os.utime(p, (0, 0), follow_symlinks=False)
    (copy / ".venv").mkdir()
    (copy / ".venv" / "bin").symlink_to(ROOT / ".venv" / "bin")
    (copy / ".venv" / ".stamp").touch()
    # and a guard: uv may resolve and compile here, never install into or remove from an environment
    guard = tmp_path / "guard"
    guard.mkdir()
    real_uv = shutil.which("uv")
    assert real_uv, "uv is on PATH (make venv installs it)"
    (guard / "uv").write_text(
        '#!/bin/sh\ncase "$1 $2" in "pip install"|"pip uninstall"|"pip sync"|venv*) '
        f'echo "guard: uv $1 $2 refused in the lock test" >&2; exit 97;; esac\nexec {real_uv} "$@"\n'
    )
    (guard / "uv").chmod(0o755)
    before = {p: p.read_bytes() for p in copy.rglob("*.lock")}
    env = {**os.environ, "PATH": f"{guard}:{os.environ['PATH']}", "SIM_FIND_LINKS": str(tmp_path / "none"),
           "DEV_FIND_LINKS": str(tmp_path / "none")}  # fmt: skip
    out = subprocess.run(["bash", "-c", line], cwd=copy, capture_output=True, text=True, check=False, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    changed = [str(p.relative_to(copy)) for p, data in before.items() if p.read_bytes() != data]
    assert not changed, f"the committed locks no longer resolve to themselves: {changed}"
    assert "requirements.lock (CPU torch) left as it is" in out.stderr
    assert "requirements/dev.lock (CPU torch) left as it is" in out.stderr
    assert "lock files match their inputs and resolve to themselves" in out.stdout
    assert "uv pip install" not in out.stdout, "make venv ran in the copy"


def test_npu_image_target_stops_without_fetched_sources(tmp_path: Path) -> None:
    out = subprocess.run(
        ["make", "--no-print-directory", "image-runtime-npu", f"SOURCES_DIR={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode != 0
    assert "make sources" in out.stderr
    assert "docker build" not in out.stdout  # nothing half-started


def test_bad_soc_stops_the_npu_build_before_anything_starts(tmp_path: Path) -> None:
    out = subprocess.run(
        ["make", "--no-print-directory", "image-npu", "SOC=a9", f"IMAGE_BUILD_DIR={tmp_path}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode != 0
    assert "SOC='a9'" in out.stderr and "a2" in out.stderr
    assert "docker build" not in out.stdout and "sources" not in out.stdout
