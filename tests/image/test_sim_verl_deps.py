"""The simulated runtime carries what verl 0.8.0's config path imports (docker/sim-runtime/sim-pins.yaml), with
verl's own version specifiers, resolved exactly and hashed in both sim locks, the CPU torch unchanged."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from .test_lint_and_locks import entries

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "docker" / "sim-runtime"
PINS = yaml.safe_load((SIM / "sim-pins.yaml").read_text())
LOCKS = ("requirements.lock", "requirements-pypi.lock")


def imagetool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("imagetool_under_test", ROOT / "docker" / "tools" / "imagetool.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
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


@pytest.mark.parametrize("lock", LOCKS)
def test_both_sim_locks_hold_the_verl_closure_exactly(lock: str) -> None:
    found = entries(SIM / lock)
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


def test_a_name_verl_does_not_declare_is_refused() -> None:
    tool = imagetool()
    sim: dict[str, Any] = {"verl_import_requires": ["pillow"], "transformers": "5.3.0"}
    with pytest.raises(tool.UsageError, match="verl_import_undeclared"):
        tool.verl_import_requirements(sim)
    sim["verl_import_requires"] = ["numpy", "transformers"]
    assert tool.verl_import_requirements(sim) == ["numpy<2.0.0", "transformers==5.3.0"]
