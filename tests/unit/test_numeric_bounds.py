"""Every numeric setting of every recipe, at the edges of its domain and far beyond them: `validate` and `plan` answer
with exit 0, or exit 2 and one `error:` line that names the setting and a fix; never a traceback (an overflow in the
memory plan), never "no layout fits" for a value that is simply out of range.

The edges come from each setting's own domain (settings.py), so a bound changed there is tested where it now is: the
bound itself and the closest value inside it must be taken (or refused by another rule, in one line with a fix), one
step past it must be refused by name. inf, -inf, nan, 1e308, -1e308, -1, 0 and 10**30 go to every setting.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from verl_recipe import hydra_check
from verl_recipe import plan as plan_module
from verl_recipe.cli import main
from verl_recipe.exitcodes import EXIT_BAD_INPUT, EXIT_OK
from verl_recipe.recipes import load_recipe, recipe_names
from verl_recipe.settings import SETTINGS
from verl_recipe.settingtypes import HEALTH_ONLY, RESTART_ONLY, Domain, Setting

S = "--skip-path-checks"
NUMERIC = [s for s in SETTINGS if s.kind in ("int", "float")]
EXTREMES = ["inf", "-inf", "nan", "1e308", "-1e308", "-1", "0", str(10**30)]
# (recipe, its engine, the nodes plan searches: a quarter of the recipe's, where the search is shortest and still
# finds layouts; a plan that finds none is as good a test, only slower)
RECIPES = [
    (name, load_recipe(name).engine, max(1, int(load_recipe(name).settings["NNODES"]) // 4)) for name in recipe_names()
]


@pytest.fixture(autouse=True)
def no_compose(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hydra composition (half a second a call) checks no range; the domains and the memory plan are under test."""
    monkeypatch.setattr(hydra_check, "hydra_available", lambda: False)


def domain_of(spec: Setting) -> Domain:
    assert spec.domain is not None, f"{spec.name} is numeric but declares no domain"
    return spec.domain


def text_of(spec: Setting, x: float) -> str:
    return str(int(x)) if spec.kind == "int" else repr(float(x))


def edges(spec: Setting, engine: str) -> Iterator[tuple[str, bool]]:
    """(value, inside the domain): each bound on this engine, the closest value inside it and the closest outside
    (one for an int, one ulp for a float)."""
    domain = domain_of(spec)
    lo, lo_open = domain.bounds(engine)
    step = (lambda x, d: x + d) if spec.kind == "int" else (lambda x, d: math.nextafter(x, d * math.inf))
    if lo is not None:
        yield text_of(spec, lo), not lo_open
        if lo_open:
            yield text_of(spec, step(lo, 1)), True
        yield text_of(spec, step(lo, -1)), step(lo, -1) in domain.also
    if domain.hi is not None:
        yield text_of(spec, domain.hi), True
        yield text_of(spec, step(domain.hi, 1)), False


def must_refuse(spec: Setting, engine: str, text: str) -> bool | None:
    """True: the value must be refused by name; False: it is in the domain; None: the engine never reads it."""
    try:
        number: float = float(text)
    except ValueError:
        return True
    if not math.isfinite(number):
        return True
    if spec.kind == "int":
        if not re.fullmatch(r"-?[0-9]+", text):
            return True
        number = int(text)  # exact: 10**30 as a float would round
    domain = domain_of(spec)
    if engine not in domain.engines:
        return None
    return domain.violation(number, engine) is not None


def call(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        rc = exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    return rc, out, err


def check(rc: int, out: str, err: str, spec: Setting, text: str, refuse: bool | None) -> None:
    where = f"{spec.name}={text}: rc {rc}\n{err[-1500:]}"
    assert "Traceback" not in out + err, where
    assert rc in (EXIT_OK, EXIT_BAD_INPUT), where
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    for line in errors:
        assert "fix:" in line, line
    if refuse:
        # one line, naming the setting: an absurd number is not also blamed on the layout or the memory plan
        assert rc == EXIT_BAD_INPUT, where
        if len(errors) != 1:
            print("MULTI", where)
        assert spec.name in errors[0], where
        assert not out.startswith("ok:") and "layouts fit" not in out, where
    elif rc == EXIT_BAD_INPUT and not errors:
        assert "no layout fits" in out, where  # plan: a valid value that no layout fits, said on stdout


def values_for(spec: Setting, engine: str) -> list[str]:
    return list(dict.fromkeys([*EXTREMES, *(text for text, _ in edges(spec, engine))]))


CASES = [
    pytest.param(recipe, engine, nodes, spec, id=f"{recipe}-{spec.name}")
    for recipe, engine, nodes in RECIPES
    for spec in NUMERIC
]


def test_every_numeric_setting_has_finite_bounds() -> None:
    """A numeric setting without both bounds would take 1e308 (or 10**17) into the memory plan's arithmetic."""
    assert len(NUMERIC) > 20
    for spec in NUMERIC:
        domain = domain_of(spec)
        for engine in domain.engines:
            lo, _ = domain.bounds(engine)
            assert lo is not None and math.isfinite(lo), spec.name
            assert domain.hi is not None and math.isfinite(domain.hi) and domain.hi >= lo, spec.name


def test_the_edges_straddle_each_bound() -> None:
    """The cases below are only as good as their edges: each side of every bound is met, and the domain (what the
    CLI enforces) agrees with the side each edge is on."""
    for spec in NUMERIC:
        for engine in domain_of(spec).engines:
            found = list(edges(spec, engine))
            assert len(found) >= 4, spec.name
            assert {inside for _, inside in found[-2:]} == {True, False}, spec.name
            for text, inside in found:
                assert must_refuse(spec, engine, text) is not inside, (spec.name, engine, text)


def test_the_reported_overflow_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """The report: DEVICE_MEM_GIB=1e308 overflowed the memory plan (cannot convert float infinity to integer)."""
    rc, out, err = call(capsys, ["validate", "qwen3.5-397b", S, "--set", "DEVICE_MEM_GIB=1e308"])
    assert rc == EXIT_BAD_INPUT and "Traceback" not in err
    assert err.startswith("error: DEVICE_MEM_GIB=1e308: must be in (0, 1024] on megatron"), err
    assert "fix: set DEVICE_MEM_GIB in (0, 1024]" in err


@pytest.mark.parametrize(("recipe", "engine", "nodes", "spec"), CASES)
def test_validate_at_the_edges(
    capsys: pytest.CaptureFixture[str], recipe: str, engine: str, nodes: int, spec: Setting
) -> None:
    for text in values_for(spec, engine):
        rc, out, err = call(capsys, ["validate", recipe, S, "--set", f"{spec.name}={text}"])
        check(rc, out, err, spec, text, must_refuse(spec, engine, text))


@pytest.mark.parametrize(("recipe", "engine", "nodes", "spec"), CASES)
def test_plan_at_the_edges(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    recipe: str,
    engine: str,
    nodes: int,
    spec: Setting,
) -> None:
    # Where nothing fits, plan looks for the smallest cluster that does, up to 64 nodes (seconds): the arithmetic
    # under test is the same at every size, so it is not searched here (test_plan.py tests the search).
    monkeypatch.setattr(plan_module, "SEARCH_NODES_UP_TO", nodes)
    # Every value refused (said before any search), and the values inside that take the memory plan's arithmetic
    # to its extremes: the upper bound, and for a float the smallest value above the lower one (a near-zero divisor).
    inside = [text for text, ok in edges(spec, engine) if ok]
    extremes = {inside[-1], inside[0]} if spec.kind == "float" else {inside[-1]}
    if spec.not_rendered in (HEALTH_ONLY, RESTART_ONLY):
        extremes = set()  # read during a run only: inside its domain it never reaches the plan (validate tests it)
    for text in values_for(spec, engine):
        refuse = must_refuse(spec, engine, text)
        if not refuse and text not in extremes:
            continue
        if spec.name == "NNODES" and refuse is not None:
            refuse = refuse and text in EXTREMES[:4]  # --nodes replaces any NNODES that parses as a whole number
            refuse = refuse or None
        rc, out, err = call(capsys, ["plan", recipe, "--nodes", str(nodes), "--set", f"{spec.name}={text}"])
        check(rc, out, err, spec, text, refuse)


@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,  # the same examples every run: the unit tier cannot flake
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    recipe=st.sampled_from(RECIPES),
    spec=st.sampled_from(NUMERIC),
    number=st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(10**20), max_value=10**20),
        st.floats(min_value=-2.0, max_value=2.0),
    ),
)
def test_validate_any_number(
    capsys: pytest.CaptureFixture[str], recipe: tuple[str, str, int], spec: Setting, number: float
) -> None:
    text = str(int(number)) if spec.kind == "int" and isinstance(number, int) else repr(number)
    rc, out, err = call(capsys, ["validate", recipe[0], S, "--set", f"{spec.name}={text}"])
    check(rc, out, err, spec, text, must_refuse(spec, recipe[1], text))
