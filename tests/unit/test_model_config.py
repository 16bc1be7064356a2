"""A checkpoint's config.json with out-of-range numbers (negative, zero, huge, fractional, NaN, text, true) is
refused in one line naming the file, the key and the value, in bounded time: never a traceback, a hang or a memory
plan that loops over a billion layers. In range, however extreme, the rules and the plan finish."""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verl_recipe.models import _LIMITS, MODELS, ModelConfigError, read_config_json

from .fixtures import make_shared, set_args
from .helpers import run

SECONDS = 20.0  # a hang or an unbounded loop takes minutes; a loaded 2-core machine takes a second or two
FEW = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
KEYS = sorted(_LIMITS)
BAD = [-1, 0, 10**9, 10**40, 1.5, 40.0, math.nan, math.inf, "40", True, None, [40], {"n": 40}]


def write_config(model_dir: Path, key: str, value: Any, nested: bool) -> Path:
    path = model_dir / "config.json"
    cfg = json.loads(path.read_text())
    (cfg["text_config"] if nested else cfg)[key] = value
    if not nested:
        cfg["text_config"].pop(key, None)  # the text tower's value would win over the top level's
    path.write_text(json.dumps(cfg))  # NaN and Infinity as Python's json writes them (and reads them back)
    return path


def out_of_range(key: str, value: Any) -> bool:
    lo, hi = _LIMITS[key]
    if value is None:
        return False  # null: the recipe's own value stands
    return not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", BAD, ids=repr)
def test_read_config_json_names_file_key_and_value(tmp_path: Path, key: str, value: Any) -> None:
    paths = make_shared(tmp_path)
    path = write_config(Path(paths["MODEL_PATH"]), key, value, nested=True)
    if not out_of_range(key, value):
        read_config_json(path)
        return
    with pytest.raises(ModelConfigError) as info:
        read_config_json(path)
    line = str(info.value)
    assert "\n" not in line and str(path) in line and f"text_config.{key}=" in line
    assert f"[{_LIMITS[key][0]}, {_LIMITS[key][1]}]" in line
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**30:
        assert f"={value} " in line


def test_an_integer_too_long_to_convert_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"num_hidden_layers": ' + "9" * 5000 + "}")
    with pytest.raises(ModelConfigError, match="cannot read config.json"):
        read_config_json(path)


VALUES = st.one_of(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.sampled_from([0, -1, 1, 1024, 1025, 1 << 16, 1 << 24, (1 << 24) + 1, 1 << 30, 10**18]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


@FEW
@given(key=st.sampled_from(KEYS), value=VALUES, nested=st.booleans(), recipe=st.sampled_from(["397b", "35b-fsdp"]))
def test_validate_refuses_in_one_line_and_in_bounded_time(
    capsys: pytest.CaptureFixture[str], key: str, value: Any, nested: bool, recipe: str
) -> None:
    model = "qwen3.5-397b-a17b" if recipe == "397b" else "qwen3.5-35b-a3b"
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_shared(Path(tmp), model)
        write_config(Path(paths["MODEL_PATH"]), key, value, nested)
        start = time.monotonic()
        res = run(capsys, "validate", f"qwen3.5-{recipe}", *set_args(paths))
        took = time.monotonic() - start
    assert took < SECONDS, f"took {took:.1f} s"
    assert "Traceback" not in res.err and res.rc in (0, 2), res.err
    errors = [line for line in res.err.splitlines() if line.startswith("error: ")]
    assert all("fix:" in line for line in errors), errors
    where = f"text_config.{key}=" if nested else f"{key}="
    if out_of_range(key, value):
        assert res.rc == 2
        named = [line for line in errors if "config.json" in line and where in line]
        assert len(named) == 1, errors
        assert "re-copy config.json" in named[0]


def test_the_extremes_in_range_finish(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Every field at its upper bound at once: the layout rules and the memory plan run to an answer, quickly."""
    paths = make_shared(tmp_path)
    path = Path(paths["MODEL_PATH"]) / "config.json"
    cfg = json.loads(path.read_text())
    cfg["text_config"].update({key: hi for key, (_, hi) in _LIMITS.items()})
    path.write_text(json.dumps(cfg))
    start = time.monotonic()
    res = run(capsys, "validate", "qwen3.5-397b", *set_args(paths))
    assert time.monotonic() - start < SECONDS
    assert res.rc == 2 and "Traceback" not in res.err
    assert "config.json does not describe qwen3.5-397b-a17b" in res.err
    assert "memory" in res.err, "the layout rules pass, so the memory plan ran over 1024 layers and said no"


def test_the_published_models_are_within_the_limits() -> None:
    fields = {"num_hidden_layers": "num_layers", "vocab_size": "vocab_size", "num_experts": "num_experts"}
    for model in MODELS.values():
        for key, field in fields.items():
            lo, hi = _LIMITS[key]
            assert lo <= getattr(model, field) <= hi
