"""The simulated runtime and the development venv carry what verl 0.8.0's config path imports
(docker/sim-runtime/sim-pins.yaml), with verl's own version specifiers, resolved exactly and hashed in both sim locks
and both dev locks (requirements/), the CPU torch unchanged."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from simkit.paths import load_by_path

from .test_lint_and_locks import entries

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "docker" / "sim-runtime"
REQ = ROOT / "requirements"
PINS = yaml.safe_load((SIM / "sim-pins.yaml").read_text())
LOCKS = ("requirements.lock", "requirements-pypi.lock")
# The development venv's locks: the toolchain and the verl import closure resolved together.
DEV_LOCKS = ("dev.lock", "dev-pypi.lock")


def imagetool() -> ModuleType:
    mod = load_by_path("imagetool_under_test", ROOT / "docker" / "tools" / "imagetool.py")
    return mod


def version(line: str) -> tuple[int, ...]:
    return tuple(int(p) for p in line.split("==", 1)[1].split("+")[0].split(".")[:3])


def test_lock_input_carries_verls_own_specifiers() -> None:
    lines = (SIM / "requirements.in").read_text().splitlines()
    for want in ("numpy<2.0.0", "tensordict>=0.8.0,<=0.10.0,!=0.9.0", "pyarrow>=15.0.0,<=24.0.0", "torchdata", "peft"):
        assert want in lines, want
    assert f"transformers=={PINS['transformers']}" in lines
    for name in PINS["verl_import_undeclared"]:
        assert name in lines, name


@pytest.mark.parametrize("lock", [SIM / f for f in LOCKS] + [REQ / f for f in DEV_LOCKS])
def test_sim_and_dev_locks_hold_the_verl_closure_exactly(lock: Path) -> None:
    found = entries(lock)
    names = [*PINS["verl_import_requires"], *PINS["verl_import_undeclared"]]
    for name in names:
        line, hashes = found[name]
        assert "==" in line and hashes, name
    assert version(found["numpy"][0]) < (2,)
    assert (0, 8, 0) <= version(found["tensordict"][0]) <= (0, 10, 0) and version(found["tensordict"][0])[:2] != (0, 9)
    assert version(found["pyarrow"][0]) <= (24, 0, 0)
    assert found["transformers"][0] == f"transformers=={PINS['transformers']}"
    # verl's own dependencies the simulation never runs stay out (verl is installed --no-deps).
    for absent in ("wandb", "tensorboard", "vllm", "megatron-core", "torch-npu"):
        assert absent not in found, absent
    for _, hashes in found.values():
        assert hashes


def test_cpu_torch_unchanged_in_the_local_lock() -> None:
    assert entries(SIM / "requirements.lock")["torch"][0] == f"torch=={PINS['torch_cpu']}+cpu"
    assert entries(REQ / "dev.lock")["torch"][0] == f"torch=={PINS['torch_cpu']}+cpu"
    assert entries(REQ / "dev.lock")["torch"][1] == entries(SIM / "requirements.lock")["torch"][1]


def test_dev_input_is_the_sim_input_less_the_image_build_tools() -> None:
    """One home for what verl's import needs: the dev venv's input and the sim runtime's come from the same facts."""
    body = [line for line in (REQ / "verl-import.in").read_text().splitlines() if not line.startswith("#")]
    sim = [line for line in (SIM / "requirements.in").read_text().splitlines() if not line.startswith("#")]
    assert body == [line for line in sim if not line.startswith("setuptools==")]
    assert (REQ / "verl-import.in").read_text() == imagetool().lock_input("dev-verl")
    assert "-r verl-import.in" in (REQ / "dev.in").read_text().splitlines()


def test_a_name_verl_does_not_declare_is_refused() -> None:
    tool = imagetool()
    sim: dict[str, Any] = {"verl_import_requires": ["pillow"], "transformers": "5.3.0"}
    with pytest.raises(tool.UsageError, match="verl_import_undeclared"):
        tool.verl_import_requirements(sim)
    sim["verl_import_requires"] = ["numpy", "transformers"]
    assert tool.verl_import_requirements(sim) == ["numpy<2.0.0", "transformers==5.3.0"]
