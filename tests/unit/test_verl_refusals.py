"""verl's own refusals name where verl refused and what made it refuse; checks that cannot run do not pass."""

from __future__ import annotations

import re

import pytest
from verl_recipe.verl_check import missing_modules, run_verl_checks

from .helpers import run

pytestmark = [
    pytest.mark.verl_checks,
    pytest.mark.skipif(bool(missing_modules()), reason="verl does not import here"),
]
LR_TYPE = "actor_rollout_ref.actor.optim.lr_scheduler_type"


def test_a_bare_assert_names_verl_file_line_condition_and_the_override(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "validate", "qwen3.5-35b-fsdp", "--skip-path-checks", "--", f"{LR_TYPE}=linear")
    assert res.rc == 2
    lines = [line for line in res.err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, res.err
    line = lines[0]
    # verl 0.8.0 FSDPOptimizerConfig.__post_init__: `assert self.lr_scheduler_type in ["constant", "cosine"]`
    where = r"AssertionError at verl/workers/config/optimizer\.py:\d+ asserts `self\.lr_scheduler_type in "
    assert re.search(f"refuses the configuration: {where}", line), line
    assert f"with {LR_TYPE}='linear' from extra override '{LR_TYPE}=linear'" in line
    assert f"fix: change or drop extra override '{LR_TYPE}=linear'" in line
    assert "AssertionError: AssertionError" not in line


def test_checks_that_stop_early_are_a_problem_not_a_pass() -> None:
    problems, _ = run_verl_checks("trainer: {}\n")
    assert problems, "a configuration verl's checks cannot go through is refused"
    assert all(fix for _, fix in problems)


def test_checks_that_cannot_start_are_a_problem_not_a_note() -> None:
    problems, note = run_verl_checks("a: [unclosed\n")
    assert len(problems) == 1
    what, fix = problems[0]
    assert "could not run" in what and "cannot pass" in what
    assert "VERL_RECIPE_VERL_CHECKS=0" in fix
