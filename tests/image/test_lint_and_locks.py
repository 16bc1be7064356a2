"""hadolint on every Dockerfile, and the lock files: hashes everywhere, exact pins, the manifest's versions, the
git-built packages left out, what could not be resolved here recorded; `make lock-*-check` against PyPI."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

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
@pytest.mark.parametrize("target", ["lock-npu-check", "lock-sim-check", "lock-check"])
def test_locks_still_resolve_against_pypi(target: str) -> None:
    out = subprocess.run(
        ["make", "--no-print-directory", target], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]


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
