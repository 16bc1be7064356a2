"""HCCL's timeouts: every recipe's defaults obey CANN's order (link set-up below a collective's wait), and any
override that breaks it or leaves CANN's range is refused in one line naming both values and the fix.

The rule's sources: CANN 9.0.0 HCCL user guide (HCCL_CONNECT_TIMEOUT below HCCL_EXEC_TIMEOUT), CANN 8.5.0's
environment variable reference envref_07_0149 (HCCL_CONNECT_TIMEOUT in [120, 7200], waited 20 s longer) and HCCL
user guide hcclug_000074 (HCCL_EXEC_TIMEOUT on A3 in [0, 2147483647], 0 = never, 1091 at most with AIV).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from verl_recipe.checks import hccl
from verl_recipe.checks.context import Context
from verl_recipe.memory import Knobs
from verl_recipe.recipes import load_recipe, recipe_names

from .helpers import run

S = "--skip-path-checks"
ENV_KEY = "++ray_kwargs.ray_init.runtime_env.env_vars."  # ++: the rendered launch already has it


def errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error: ")]


@pytest.mark.parametrize("recipe", recipe_names())
def test_defaults_obey_the_order(capsys: pytest.CaptureFixture[str], recipe: str) -> None:
    env = run(capsys, "render", recipe, S, "--json").doc["env"]
    connect, exec_s = int(env[hccl.CONNECT]), int(env[hccl.EXEC])
    assert hccl.CONNECT_RANGE[0] <= connect <= hccl.CONNECT_RANGE[1]
    assert connect + hccl.CONNECT_GRACE_S < exec_s
    assert run(capsys, "validate", recipe, S).rc == 0


def test_both_live_in_the_recipes_launch_environment() -> None:
    """One home for each: the launch environment of _base.yaml (an engine file may lower the connect timeout)."""
    base = load_recipe("qwen3.5-397b")
    assert base.npu_env[hccl.EXEC] == "5400" and base.npu_env[hccl.CONNECT] == "3600"
    assert load_recipe("qwen3.5-35b-fsdp").npu_env[hccl.EXEC] == "5400"


@pytest.mark.parametrize(
    ("args", "named", "fix"),
    [
        (
            ["--set", "env.HCCL_CONNECT_TIMEOUT=5400"],
            "env.HCCL_CONNECT_TIMEOUT=5400 env.HCCL_EXEC_TIMEOUT=5400",
            "fix: set env.HCCL_CONNECT_TIMEOUT to at most 5379, or env.HCCL_EXEC_TIMEOUT to at least 5421",
        ),
        (  # upstream's own pair (verl #7178): equal is not below
            ["--set", "env.HCCL_EXEC_TIMEOUT=3600"],
            "env.HCCL_CONNECT_TIMEOUT=3600 env.HCCL_EXEC_TIMEOUT=3600",
            "at least 3621",
        ),
        (  # the extra override of the runtime_env variable is what the workers get
            ["--", f"{ENV_KEY}HCCL_EXEC_TIMEOUT='3000'"],
            "env.HCCL_EXEC_TIMEOUT=3000",
            "at most 2979",
        ),
        (  # AIV expansion caps a collective's wait at 1091 s
            ["--set", "env.HCCL_OP_EXPANSION_MODE=AIV"],
            "(with HCCL_OP_EXPANSION_MODE=AIV: 1091)",
            "at most 1070",
        ),
        (
            ["--set", "env.HCCL_CONNECT_TIMEOUT=60"],
            "env.HCCL_CONNECT_TIMEOUT=60",
            "fix: set env.HCCL_CONNECT_TIMEOUT to seconds in [120, 7200]",
        ),
        (["--set", "env.HCCL_EXEC_TIMEOUT=1e4"], "env.HCCL_EXEC_TIMEOUT=1e4", "seconds in [0, 2147483647]"),
        (["--set", "env.HCCL_EXEC_TIMEOUT=-5"], "env.HCCL_EXEC_TIMEOUT=-5", "seconds in [0, 2147483647]"),
    ],
)
def test_an_override_that_breaks_it_is_refused(
    capsys: pytest.CaptureFixture[str], args: list[str], named: str, fix: str
) -> None:
    res = run(capsys, "validate", "qwen3.5-397b", S, *args)
    assert res.rc == 2
    found = errors(res.err)
    assert len(found) == 1, res.err
    assert named in found[0] and fix in found[0]


def test_exec_zero_never_times_out(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "validate", "qwen3.5-397b", S, "--set", "env.HCCL_EXEC_TIMEOUT=0").rc == 0


def test_a_small_exec_names_only_the_fix_that_exists(capsys: pytest.CaptureFixture[str]) -> None:
    """Below 141 s no connect timeout in CANN's range fits under it: the fix raises the exec timeout."""
    res = run(capsys, "validate", "qwen3.5-35b-fsdp", S, "--set", "env.HCCL_EXEC_TIMEOUT=130")
    line = errors(res.err)[0]
    assert "fix: set env.HCCL_EXEC_TIMEOUT to at least 1521" in line and "at most" not in line


def test_not_checked_off_the_npu(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "validate", "qwen3.5-35b", S, "--set", "DEVICE=gpu", "--set", "env.HCCL_CONNECT_TIMEOUT=9999")
    assert "HCCL_CONNECT_TIMEOUT" not in res.err


# ------------------------------------------------------------------------------------------------ property

RECIPE = load_recipe("qwen3.5-397b")
TEXTS = st.one_of(
    st.integers(min_value=-10, max_value=10**11).map(str),
    st.sampled_from(["", " ", "1e3", "3600.0", "٣٦٠٠", "0x10", "+300", "3600 ", "nan"]),
    st.text(max_size=12),
)


def judged(connect: str, exec_text: str | None, aiv: bool = False) -> list[str]:
    env = {hccl.CONNECT: connect}
    if exec_text is not None:
        env[hccl.EXEC] = exec_text
    if aiv:
        env[hccl.EXPANSION] = "aiv"
    ctx = Context(RECIPE, {"DEVICE": "npu"}, RECIPE.model, Knobs({}, env))
    hccl.check(ctx)
    return [p.message for p in ctx.problems]


def seconds(text: str, lo: int, hi: int) -> int | None:
    clean = text.strip()
    return int(clean) if clean.isascii() and clean.isdigit() and lo <= int(clean) <= hi else None


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(connect=TEXTS, exec_text=st.one_of(st.none(), TEXTS), aiv=st.booleans())
def test_the_rule_is_the_documented_one(connect: str, exec_text: str | None, aiv: bool) -> None:
    found = judged(connect, exec_text, aiv)
    assert len(found) <= 2 and all("fix: " in line for line in found)
    c = seconds(connect, *hccl.CONNECT_RANGE)
    e = hccl.EXEC_DEFAULT_A3 if exec_text is None else seconds(exec_text, *hccl.EXEC_RANGE)
    if c is None or e is None:
        assert found and any("is not a whole number of seconds" in line for line in found)
        return
    if aiv and not 0 < e <= hccl.EXEC_AIV_MAX:
        e = hccl.EXEC_AIV_MAX
    assert bool(found) is (e != 0 and c + hccl.CONNECT_GRACE_S >= e), (connect, exec_text, aiv, found)
