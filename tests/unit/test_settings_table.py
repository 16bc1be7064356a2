"""The settings table (settings.py) is the one source: rendering, the domain checks and docs/settings.md's table are
all derived from it, and every problem the layout rules find carries a rule id that docs/rules.md lists."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from verl_recipe import checks
from verl_recipe.checks import domains
from verl_recipe.checks.context import Context
from verl_recipe.hydra_syntax import bare_key
from verl_recipe.recipes import recipe_names
from verl_recipe.render import FORMS, render, rendered_settings, settings_overrides
from verl_recipe.resolve import Request, resolve
from verl_recipe.settings import SETTINGS
from verl_recipe.settingtypes import ENGINES, WHILE_WORKAROUND

ROOT = Path(__file__).resolve().parents[2]


def test_every_setting_drives_hydra_keys_or_says_who_reads_it() -> None:
    wrong = [s.name for s in SETTINGS if bool(s.hydra) == bool(s.not_rendered)]
    assert not wrong, f"give these hydra keys or a not_rendered reason (one of the two): {wrong}"


def test_every_numeric_setting_has_a_domain_and_every_form_a_formatter() -> None:
    assert not [s.name for s in SETTINGS if s.kind in ("int", "float") and s.domain is None]
    assert not [s.name for s in SETTINGS if s.hydra and s.form not in FORMS and s.form != WHILE_WORKAROUND]
    assert not [s.name for s in SETTINGS if s.optional and s.kind not in ("int", "float")]


def test_a_launch_lists_the_settings_in_the_tables_order() -> None:
    """The table's row order is the order of a launch's overrides (no second list to keep equal): every setting
    with Hydra keys and a formatter is rendered, in the table's order, on each engine it applies to."""
    for engine in ENGINES:
        want = [s.name for s in SETTINGS if s.hydra and s.form in FORMS and engine in s.engines]
        assert [s.name for s in rendered_settings(engine)] == want


@pytest.mark.parametrize("engine", ENGINES)
def test_no_hydra_key_is_driven_by_two_settings(engine: str) -> None:
    owners: dict[str, list[str]] = {}
    for spec in SETTINGS:
        if engine in spec.engines:
            for key in spec.hydra_keys():
                owners.setdefault(bare_key(key), []).append(spec.name)
    assert not {k: v for k, v in owners.items() if len(v) > 1}


@pytest.mark.parametrize("name", recipe_names())
def test_render_writes_exactly_the_tables_keys(name: str) -> None:
    recipe, resolved = resolve(Request(name))
    values = resolved.values
    part = settings_overrides(recipe, values)
    expected: dict[str, Any] = {}
    for spec in SETTINGS:
        if recipe.engine in spec.engines and spec.form in FORMS:
            for key in spec.hydra_keys():
                expected[key] = FORMS[spec.form](values[spec.name], values)
    assert part == expected
    launch = render(recipe, resolved, [])
    for key, value in part.items():
        assert launch.overrides[key] == value, key


@pytest.mark.parametrize("name", recipe_names())
def test_the_domain_checks_come_from_the_table(name: str) -> None:
    recipe, resolved = resolve(Request(name))
    for spec in SETTINGS:
        domain = spec.domain
        if domain is None or recipe.engine not in domain.engines:
            continue
        low, _ = domain.bounds(recipe.engine)
        if low is None:
            continue
        bad: Any = int(low) - 1 if spec.kind == "int" else str(low - 1)
        if bad in domain.also:
            bad -= 1
        ctx = Context(recipe, {**resolved.values, spec.name: bad}, recipe.model)
        domains.check(ctx)
        subjects = [p.subject for p in ctx.problems]
        assert subjects == [f"{spec.name}={bad}"], (spec.name, subjects)
        assert domain.range_text(recipe.engine) in ctx.problems[0].fix


def test_docs_settings_table_is_generated_from_the_table() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_docs
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    table = gen_docs.settings_table()
    assert table in (ROOT / "docs" / "settings.md").read_text()
    rows = [line.split("|")[1].strip().strip("`") for line in table.splitlines()[2:]]
    assert rows == [s.name for s in SETTINGS]


BROKEN_LAYOUTS = [
    ("qwen3.5-397b", {"TP": 3, "PP": 7, "EP": 3, "ETP": 3, "CP": 2}),
    ("qwen3.5-35b", {"PP": 1, "VPP": 2, "GEN_TP": 5}),
    ("qwen3.5-35b", {"VPP": 2, "PPO_MINI_BATCH_SIZE": 1}),
    ("qwen3.5-397b", {"TRAIN_BATCH_SIZE": 4, "PPO_MINI_BATCH_SIZE": 8, "ROLLOUT_N": 3}),
    ("qwen3.5-397b", {"PPO_MICRO_BATCH_SIZE_PER_GPU": 3}),
    ("qwen3.5-397b", {"GEN_EP": 3, "GEN_DP": 3, "GEN_TP": 4}),
    ("qwen3.5-35b", {"GEN_TP": 2, "GEN_DP": 3, "GEN_EP": 1}),
    ("qwen3.5-397b", {"GEN_DP": 2, "GEN_TP": 32, "GEN_EP": 1}),
    ("qwen3.5-35b-fsdp", {"SP_SIZE": 3}),
    ("qwen3.5-35b-fsdp", {"FSDP_SIZE": 3}),
]


@pytest.mark.parametrize(("name", "changes"), BROKEN_LAYOUTS)
def test_each_layout_problem_carries_a_rule_id_that_docs_rules_lists(name: str, changes: dict[str, int]) -> None:
    recipe, resolved = resolve(Request(name))
    ctx = Context(recipe, {**resolved.values, **changes}, recipe.model)
    checks.layout(ctx)
    assert ctx.problems
    rules_doc = (ROOT / "docs" / "rules.md").read_text()
    for problem in ctx.problems:
        assert problem.rule, problem
        assert str(problem).endswith(f"({problem.rule}); fix: {problem.fix}")
        first_id = problem.rule.removeprefix("megatron-core ").split("-")[0]
        assert f"| {first_id} |" in rules_doc or f"| ({problem.rule}) |" in rules_doc, problem.rule
