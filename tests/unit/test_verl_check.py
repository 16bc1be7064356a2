"""verl 0.8.0's own start-up checks: run where verl imports, said plainly where it does not.

verl imports in the development environment (`make venv`: requirements/dev.lock carries what `import verl` needs),
in verl-recipe:sim and in the NPU image, and every case below runs there. Only an environment without verl's
dependencies (a bare `pip install -e .`) skips the refusal cases and checks the note instead; a venv built by
`make venv` that cannot import verl fails `test_make_venv_imports_verl` (the lock lost a package).
tests/image/test_image_verl_check.py checks the same inside verl-recipe:sim on every CI run.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from verl_recipe.verl_check import VERL_NEEDS, missing_modules

from .helpers import run

pytestmark = pytest.mark.verl_checks

S = "--skip-path-checks"
MISSING = missing_modules()
# mk/python.mk writes this stamp into every venv `make venv` builds (.venv, or VENV=... elsewhere).
MAKE_VENV = (Path(sys.prefix) / ".stamp").is_file()
needs_verl = pytest.mark.skipif(bool(MISSING), reason=f"verl does not import here (missing {', '.join(MISSING)})")
A = "actor_rollout_ref"


@pytest.mark.skipif(not MAKE_VENV, reason=f"{sys.prefix} is not a venv built by `make venv`")
def test_make_venv_imports_verl() -> None:
    assert MISSING == [], (
        f"the development venv {sys.prefix} lacks {', '.join(MISSING)} (of {', '.join(VERL_NEEDS)}): "
        "requirements/dev.lock must carry verl's import closure (make lock, then make venv)"
    )


def test_validate_says_whether_verl_checks_ran(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "validate", "qwen3.5-35b", S)
    assert res.rc == 0, res.err
    if MISSING:
        assert (
            "note: verl's own start-up checks were not run: verl 0.8.0 cannot be imported here "
            f"(missing {', '.join(MISSING)})" in res.err
        )
    else:
        assert "note: verl's own start-up checks ran in" in res.err


def test_no_verl_check_when_our_checks_already_refuse(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "validate", "qwen3.5-35b", S, "--set", "TP=3")
    assert res.rc == 2
    assert "verl's own start-up checks" not in res.err


# The overrides verl 0.8.0 refuses at start-up that our own rules do not know about (issue: "validate accepts").
VERL_REFUSES = [
    ("qwen3.5-397b", [f"{A}.actor.loss_agg_mode=token-sum"], "validate_config"),
    ("qwen3.5-397b", [f"{A}.actor.megatron.dtype=float32"], "validate_config"),
    ("qwen3.5-397b", [f"+{A}.actor.ppo_micro_batch_size=4"], "validate_config"),
    (
        "qwen3.5-397b",
        [f"{A}.rollout.temperature=0", f"{A}.rollout.val_kwargs.do_sample=true"],
        "validate_config",
    ),
    ("qwen3.5-397b", [f"{A}.actor.router_replay.mode=R1"], "validate_config"),
    ("qwen3.5-35b-fsdp", [f"{A}.actor.optim.lr_scheduler_type=linear"], "validate_config"),
    ("qwen3.5-397b", [f"{A}.actor.use_dynamic_bsz=true"], "dynamic batching"),
    ("qwen3.5-397b", [f"{A}.rollout.pipeline_model_parallel_size=2"], "RolloutConfig"),
    ("qwen3.5-397b", [f"{A}.rollout.mode=sync"], "RolloutConfig"),
]


@needs_verl
@pytest.mark.parametrize(("recipe", "extra", "step"), VERL_REFUSES)
def test_verl_refusals_are_problems(
    capsys: pytest.CaptureFixture[str], recipe: str, extra: list[str], step: str
) -> None:
    res = run(capsys, "validate", recipe, S, "--", *extra)
    assert res.rc == 2, res.err
    lines = [line for line in res.err.splitlines() if line.startswith(f"error: verl config: verl 0.8.0 {step}")]
    assert lines, res.err
    assert all("fix:" in line for line in lines)


@needs_verl
@pytest.mark.parametrize("recipe", ["qwen3.5-35b", "qwen3.5-35b-fsdp", "qwen3.5-122b", "qwen3.5-397b"])
def test_recipes_pass_verl_checks(capsys: pytest.CaptureFixture[str], recipe: str) -> None:
    res = run(capsys, "validate", recipe, S)
    assert res.rc == 0, res.err
    assert "note: verl's own start-up checks ran in" in res.err


def test_the_switch_turns_them_off_and_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_RECIPE_VERL_CHECKS", "0")
    res = run(capsys, "validate", "qwen3.5-397b", S, "--", f"{A}.rollout.mode=sync")
    assert res.rc == 0, "with the checks off, only our own rules judge"
    assert "note: verl's own start-up checks were not run: VERL_RECIPE_VERL_CHECKS=0 turns them off" in res.err
