"""Property-based tests of the launch side: whatever a user types or a site file holds, the CLI answers in bounded
time with exit 0, or exit 2 and one `error:` line per problem naming what is wrong and a fix; never a traceback.

Inputs: --set KEY=VALUE over every setting (numbers in other scripts, control characters, huge and odd values),
site files (random bytes, random YAML of the right and wrong shapes, deep nesting, tags), extra Hydra overrides
(each key a setting drives, deletions, the workers' environment, a secret hidden in a mapping or list value at any
depth), MODEL_PATH config.json contents (out-of-range numbers: test_model_config.py), report files,
`plan --nodes` and whole argument lists. Derandomized (the same examples every run, so the unit tier cannot flake);
each test caps its examples so the file runs in well under a minute on two busy cores.
"""

from __future__ import annotations

import json
import os
import string
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from verl_recipe import hydra_check, verl_check
from verl_recipe.cli import main
from verl_recipe.layers import ENV_SECTION, RECIPES_SECTION, SECRET_FILES_SECTION
from verl_recipe.pages import readiness as readiness_page
from verl_recipe.recipes import recipe_names
from verl_recipe.settings import ALIASES, BY_NAME

from .fixtures import make_shared, set_args

# "Never more than a few seconds" for one command, with room for a loaded 2-core CI machine: the bound catches a
# hang or an unbounded search (minutes), not a slow second; speed itself is measured in `make bench`.
SECONDS = 20.0
# CI and `make test` see the same examples every run; a hunt for new faults is FUZZ_RANDOM=1 FUZZ_EXAMPLES=2000.
HUNT = os.environ.get("FUZZ_RANDOM") == "1"
FAST = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")),
    deadline=None,  # the contract's own clock below; hypothesis's deadline flakes on a loaded machine
    derandomize=not HUNT,
    database=None,
    # No shrinking: a failure is reported as found; shrinking slow commands can take minutes of the unit tier.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
FEW = settings(FAST, max_examples=max(12, FAST.max_examples // 5))
S = "--skip-path-checks"
RECIPES = recipe_names()
NAMES = sorted(BY_NAME) + sorted(ALIASES)
COMPOSES = hydra_check.hydra_available()


@pytest.fixture(autouse=True)
def no_compose(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hydra composition costs half a second a call; the tests that need it turn it back on."""
    monkeypatch.setattr(hydra_check, "hydra_available", lambda: False)


@contextmanager
def clock() -> Iterator[None]:
    start = time.monotonic()
    yield
    took = time.monotonic() - start
    assert took < SECONDS, f"took {took:.1f} s"


def call(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    """main(argv) in-process; argparse's own refusals (SystemExit 2 with usage) count as exit 2."""
    capsys.readouterr()
    with clock():
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return rc, out, err


def assert_contract(rc: int, out: str, err: str, *names: str) -> None:
    """Exit 0, or exit 2 with error lines that each give a fix (argparse: its usage line) and name the subject."""
    assert "Traceback" not in err + out, err
    assert rc in (0, 2), (rc, err[-2000:])
    if rc == 0:
        return
    errors = [line for line in err.splitlines() if line.startswith("error: ") or ": error: " in line]
    if not errors:
        assert "no layout fits" in out, (out, err)  # plan: exit 2 when no layout fits, said on stdout
        return
    if err.startswith("usage: "):
        return  # argparse: its usage line is the fix
    for line in errors:
        assert "fix:" in line or "did you mean" in line, line
    if names:
        assert any(n in line for n in names for line in errors), (names, errors)


# ------------------------------------------------------------------------------------------------ values

ODD_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["٤", "４", "1e999", "nan", "-0", "1_000", "0x10", "", " ", "\x00", "a\nb", "null", "~", "[1]"]),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet="0123456789", min_size=15, max_size=5000),
)


@FAST
@given(name=st.sampled_from(NAMES), value=ODD_TEXT, recipe=st.sampled_from(RECIPES))
def test_set_any_value(capsys: pytest.CaptureFixture[str], name: str, value: str, recipe: str) -> None:
    rc, out, err = call(capsys, ["validate", recipe, S, "--set", f"{name}={value}"])
    canon = ALIASES.get(name, name)
    assert_contract(rc, out, err, canon, name, "PROJECT_NAME", "EXPERIMENT_NAME", "LOGGER", "memory", "CKPT_DIR")


@FAST
@given(key=st.text(max_size=30), value=st.text(max_size=30))
def test_set_any_key(capsys: pytest.CaptureFixture[str], key: str, value: str) -> None:
    rc, out, err = call(capsys, ["render", "qwen3.5-35b", S, "--set", f"{key}={value}"])
    assert_contract(rc, out, err)


@FAST
@given(name=st.text(max_size=40), value=ODD_TEXT)
def test_set_any_env_entry(capsys: pytest.CaptureFixture[str], name: str, value: str) -> None:
    rc, out, err = call(capsys, ["render", "qwen3.5-35b", S, "--json", "--set", f"env.{name}={value}"])
    assert_contract(rc, out, err)
    if rc == 0:
        assert value.strip() == "" or json.loads(out)["env"].get(name) == value


# ------------------------------------------------------------------------------------------------ site files

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), st.sampled_from(["٣", "1e-6", "-1"])
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
SITE = st.dictionaries(
    st.one_of(st.sampled_from([*NAMES, ENV_SECTION, SECRET_FILES_SECTION, RECIPES_SECTION]), st.text(max_size=10)),
    st.one_of(
        VALUES,
        st.dictionaries(st.text(max_size=12), SCALARS, max_size=3),
        st.dictionaries(st.sampled_from(RECIPES), st.dictionaries(st.sampled_from(NAMES), SCALARS, max_size=3)),
    ),
    max_size=5,
)


def site_file(content: bytes) -> Path:
    handle = tempfile.NamedTemporaryFile("wb", suffix=".yaml", delete=False)  # noqa: SIM115 - read by the CLI
    with handle:
        handle.write(content)
    return Path(handle.name)


@FAST
@given(data=SITE)
def test_site_file_of_any_shape(capsys: pytest.CaptureFixture[str], data: dict[str, Any]) -> None:
    path = site_file(yaml.safe_dump(data, allow_unicode=True).encode())
    try:
        rc, out, err = call(capsys, ["validate", "qwen3.5-35b", S, "--site", str(path)])
    finally:
        path.unlink()
    assert_contract(rc, out, err)


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_a_site_file_line_left_empty(capsys: pytest.CaptureFixture[str], name: str) -> None:
    """`NAME:` (YAML null) is the setting emptied, as `--set NAME=` is: named in one line, or accepted."""
    path = site_file(f"{name}:\n".encode())
    try:
        rc, out, err = call(capsys, ["validate", "qwen3.5-35b", S, "--site", str(path)])
    finally:
        path.unlink()
    assert_contract(rc, out, err, name)
    _, out_set, err_set = call(capsys, ["validate", "qwen3.5-35b", S, "--set", f"{name}="])
    assert err.replace(str(path), "").count("error:") == err_set.count("error:"), (err, err_set)


DEEP = [b"[" * 5000 + b"]" * 5000, b"a:\n" + b"".join(b" " * i + b"b:\n" for i in range(1, 3000)), b"{" * 100]
ODD_SITES = st.one_of(
    st.binary(max_size=200),
    st.sampled_from(
        [
            *DEEP,
            b"\xff\xfe: 1\n",
            b"x: !!python/object/apply:os.system [echo]\n",
            b"a: &x [1]\nb: *x\n",
            b"- 1\n- 2\n",
            b"TP: [1, [2]]\n",
            b"env: [1]\n",
            b"secret_files: {A: rel}\n",
        ]
    ),
    st.text(alphabet=string.printable + "٤é", max_size=200).map(str.encode),
)


@FAST
@given(content=ODD_SITES, through_env=st.booleans())
def test_site_file_of_any_bytes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, content: bytes, through_env: bool
) -> None:
    path = site_file(content)
    try:
        if through_env:
            monkeypatch.setenv("VERL_RECIPE_SITE", str(path))
            argv = ["render", "qwen3.5-35b", S]
        else:
            monkeypatch.delenv("VERL_RECIPE_SITE", raising=False)
            argv = ["render", "qwen3.5-35b", S, "--site", str(path)]
        rc, out, err = call(capsys, argv)
    finally:
        path.unlink()
    assert_contract(rc, out, err, "site file")


# ------------------------------------------------------------------------------------------------ extra overrides

DRIVEN = [
    "trainer.default_local_dir",
    "trainer.device",
    "trainer.nnodes",
    "trainer.n_gpus_per_node",
    "trainer.project_name",
    "actor_rollout_ref.actor.megatron.tensor_model_parallel_size",
    "actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size",
    "actor_rollout_ref.rollout.engine_kwargs.vllm.mm_processor_cache_gb",
    "actor_rollout_ref.actor.optim.lr",
    "data.train_files",
    "trainer.logger",
    "ray_kwargs.ray_init.runtime_env.env_vars.WANDB_API_KEY",
    "ray_kwargs.ray_init.runtime_env.env_vars.HCCL_BUFFSIZE",
]
OVERRIDE = st.builds(
    lambda prefix, key, value: f"{prefix}{key}={value}" if prefix != "~" or value else f"~{key}",
    st.sampled_from(["", "+", "++", "~"]),
    st.one_of(st.sampled_from(DRIVEN), st.text(alphabet=string.ascii_lowercase + "._", max_size=20)),
    st.one_of(st.sampled_from(["", "null", "rel/dir", "tpu", "cuda", "[a,b]", "'x'", "٤", "-1", "1e9"]), ODD_TEXT),
)


@FAST
@given(extra=st.lists(OVERRIDE, min_size=1, max_size=3))
def test_extra_overrides_without_composition(capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    rc, out, err = call(capsys, ["validate", "qwen3.5-397b", S, "--", *extra])
    assert_contract(rc, out, err)


@FEW
@given(extra=st.lists(OVERRIDE, min_size=1, max_size=2))
def test_extra_overrides_composed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, extra: list[str]
) -> None:
    if not COMPOSES:
        pytest.skip("verl's Hydra config is not installed here")
    monkeypatch.setattr(hydra_check, "hydra_available", lambda: True)
    # Composition only: verl's own checks (a subprocess of several seconds) have their own tests (test_verl_refusals).
    monkeypatch.setenv(verl_check.SWITCH, "0")
    rc, out, err = call(capsys, ["validate", "qwen3.5-35b", S, "--", *extra])
    assert_contract(rc, out, err)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ("trainer.default_local_dir=relative/ckpt", "CKPT_DIR=relative/ckpt"),
        ("trainer.device=tpu", "trainer.device=tpu"),
        ("~trainer.nnodes", "~trainer.nnodes"),
        ("actor_rollout_ref.rollout.engine_kwargs.vllm.mm_processor_cache_gb=8", "MM_PROCESSOR_CACHE_GB=8"),
    ],
)
def test_extra_overrides_cannot_undo_a_rule(capsys: pytest.CaptureFixture[str], extra: str, named: str) -> None:
    rc, out, err = call(capsys, ["validate", "qwen3.5-397b", S, "--", extra])
    assert rc == 2, err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and named in errors[0] and "fix:" in errors[0], err


# A secret given through any override form (issue 36): a variable named by the key, or a mapping or list value at
# env_vars or any key above it, nested, keys quoted either way or not, spaced or not, among plain entries.
ENV_CHAIN = ("ray_kwargs", "ray_init", "runtime_env", "env_vars")
PLANTED = "s3cr3t-fuzz-4b1d"
SECRET_VARS = st.sampled_from(
    ["WANDB_API_KEY", "HF_TOKEN", "X_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "OPENAI_APIKEY",
     "GOOGLE_APPLICATION_CREDENTIALS", "swanlab_api_key", "MYTOKEN"]
)  # fmt: skip
PLAIN_VARS = st.sampled_from(["HCCL_BUFFSIZE", "WANDB_MODE", "TOKENIZERS_PARALLELISM", "RAY_AUTH_TOKEN_PATH", "A"])
QUOTES = st.sampled_from(["", "'", '"'])
GAPS = st.sampled_from(["", " ", "  "])


@st.composite
def env_override(draw: st.DrawFn, secret: bool) -> tuple[str, str]:
    """(the override, the secret variable it hides, or "") with PLANTED as that variable's value."""
    names = draw(st.lists(PLAIN_VARS, max_size=3, unique=True))
    hidden = draw(SECRET_VARS) if secret else ""
    if hidden:
        names.insert(draw(st.integers(0, len(names))), hidden)
    level = draw(st.integers(1, len(ENV_CHAIN) + 1))  # how much of the path the key names (5: the variable too)
    if level == len(ENV_CHAIN) + 1:
        name = hidden or (names[0] if names else "A")
        return f"{draw(st.sampled_from(['', '+', '++']))}{'.'.join(ENV_CHAIN)}.{name}={PLANTED}", hidden

    def entry(name: str) -> str:
        value = PLANTED if name == hidden else draw(st.sampled_from(["'1'", "x", "[1, {a: 2}]", "{b: c}"]))
        quote, gap = draw(QUOTES), draw(GAPS)
        return f"{quote}{name}{quote}{gap}:{draw(GAPS)}{value}"

    if draw(st.booleans()) or not names:
        value = "{" + f",{draw(GAPS)}".join(entry(n) for n in names) + "}"
    else:  # a list of NAME=VALUE items (not what Ray takes, but it would reach argv and the record all the same)
        value = "[" + ",".join(f"{n}={PLANTED if n == hidden else 'v'}" for n in names) + "]"
    for part in reversed(ENV_CHAIN[level:]):
        value = f"{{{part}:{draw(GAPS)}{value}}}"
    return f"{draw(st.sampled_from(['+', '++']))}{'.'.join(ENV_CHAIN[:level])}={value}", hidden


@FAST
@given(case=env_override(secret=True))
def test_a_secret_in_any_env_override_is_refused(capsys: pytest.CaptureFixture[str], case: tuple[str, str]) -> None:
    arg, hidden = case
    rc, out, err = call(capsys, ["validate", "qwen3.5-35b", S, "--", arg])
    assert_contract(rc, out, err, hidden)
    assert rc == 2 and any(hidden in line and "a secret by its name" in line for line in err.splitlines()), err
    assert PLANTED not in out + err


@FAST
@given(case=env_override(secret=False))
def test_plain_env_overrides_are_not_called_secrets(capsys: pytest.CaptureFixture[str], case: tuple[str, str]) -> None:
    rc, out, err = call(capsys, ["validate", "qwen3.5-35b", S, "--", case[0]])
    assert_contract(rc, out, err)
    assert "a secret by its name" not in err, err


# ------------------------------------------------------------------------------------------------ names and paths

NAME_VALUES = st.one_of(
    st.text(min_size=200, max_size=400),
    st.sampled_from([".", "..", "a\tb", "a\x1bb", "x" * 256, "é" * 128, "ok-name"]),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
)


@FAST
@given(which=st.sampled_from(["PROJECT_NAME", "EXPERIMENT_NAME"]), value=NAME_VALUES)
def test_names_that_cannot_be_folders_are_refused_by_validate(
    capsys: pytest.CaptureFixture[str], which: str, value: str
) -> None:
    rc, out, err = call(capsys, ["validate", "qwen3.5-35b", S, "--set", f"{which}={value}"])
    assert_contract(rc, out, err, which)
    clean = value.strip()
    if rc == 0:  # what validate passes is a folder name the run record can be written under
        assert clean not in ("", ".", "..") and "/" not in clean and len(clean.encode()) <= 255
        assert clean.isprintable()


@FAST
@given(name=st.text(max_size=300))
def test_any_recipe_name(capsys: pytest.CaptureFixture[str], name: str) -> None:
    rc, out, err = call(capsys, ["validate", name, S])
    assert_contract(rc, out, err)
    assert rc == 0 or "unknown recipe" in err or name.startswith("-")


CONFIGS = st.one_of(
    st.binary(max_size=100),
    st.sampled_from([b"\xff\xfe{}", b"[" * 100000 + b"]" * 100000, b'{"a":' * 3000 + b"1" + b"}" * 3000, b"[]"]),
    st.dictionaries(st.sampled_from(["num_hidden_layers", "hidden_size", "text_config", "x"]), VALUES).map(
        lambda d: json.dumps(d).encode()
    ),
)


@FEW
@given(content=CONFIGS)
def test_any_model_config_json(capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_shared(Path(tmp))
        (Path(paths["MODEL_PATH"]) / "config.json").write_bytes(content)
        rc, out, err = call(capsys, ["validate", "qwen3.5-397b", *set_args(paths)])
    assert_contract(rc, out, err, "MODEL_PATH")


# ------------------------------------------------------------------------------------------------ plan, report, argv


@FEW
@given(
    nodes=st.one_of(st.integers(min_value=-5, max_value=70), st.sampled_from([1023, 1024, 1025, 10**12])),
    host=st.sampled_from(["", "0", "1", "100", "1e-9", "4096"]),
)
def test_plan_is_bounded(capsys: pytest.CaptureFixture[str], nodes: int, host: str) -> None:
    sets = ["--set", f"HOST_MEM_GIB={host}"] if host else []
    rc, out, err = call(capsys, ["plan", "qwen3.5-397b", "--nodes", str(nodes), *sets])
    assert_contract(rc, out, err, "--nodes", "HOST_MEM_GIB")


REPORTS = st.one_of(
    st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
        max_leaves=20,
    ),
    st.fixed_dictionaries(
        {
            "rows": st.lists(
                st.dictionaries(
                    st.sampled_from(["host", "check", "ok", "found", "die", "dies", "status"]),
                    SCALARS | st.text(max_size=20),
                ),
                max_size=8,
            )
        }
    ),
    st.fixed_dictionaries(
        {
            # the fields the page draws (rehearse.py's summary and NodeReport), each of any type
            "summary": st.dictionaries(
                st.sampled_from(["nnodes", "dies_per_node", "backend", "tensor_mb", "world", "error", "placement"])
                | st.text(max_size=5),
                SCALARS | st.lists(SCALARS | st.dictionaries(st.sampled_from(["node", "group", "bundles"]), SCALARS)),
            ),
            "nodes": st.lists(
                st.dictionaries(
                    st.sampled_from(["node", "problems", "ip", "bundles", "allreduce_ms", "algbw_gbps", "busbw_gbps"]),
                    SCALARS | st.lists(SCALARS | st.text(max_size=5)),
                ),
                max_size=4,
            ),
        }
    ),
)


@FAST
@given(doc=REPORTS, nested=st.sampled_from([0, 0, 900, 5000]))
def test_report_of_any_json(capsys: pytest.CaptureFixture[str], doc: Any, nested: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
        text = json.dumps(doc)
        if nested:
            text = "[" * nested + text + "]" * nested
        report.write_text(text)
        rc, out, err = call(capsys, ["report", str(report), "-o", str(Path(tmp) / "r.html")])
    assert_contract(rc, out, err, "r.json")


ODD_FIELDS = [("summary", k) for k in readiness_page.REHEARSAL_SUMMARY_FIELDS] + [
    ("node", k) for k in readiness_page.REHEARSAL_NODE_FIELDS
]


@pytest.mark.parametrize(("part", "key"), ODD_FIELDS)
@pytest.mark.parametrize("value", [4, "x", [1, {}], {"a": 1}, True])
def test_rehearsal_report_field_of_another_type(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, part: str, key: str, value: Any
) -> None:
    node: dict[str, Any] = {"node": "a3-01", "ip": "10.0.0.1", "bundles": 16, "problems": [], "allreduce_ms": 1.0}
    doc: dict[str, Any] = {"summary": {"nnodes": 1, "dies_per_node": 16}, "nodes": [node]}
    (doc["summary"] if part == "summary" else node)[key] = value
    report = tmp_path / "r.json"
    report.write_text(json.dumps(doc))
    rc, out, err = call(capsys, ["report", str(report), "-o", str(tmp_path / "r.html")])
    assert_contract(rc, out, err, key)


WORDS = st.sampled_from(
    ["render", "validate", "plan", "list", "launch", "report", "doctor", "--json", "--set", "--site", "--nodes",
     "--top", "--skip-path-checks", "--", "qwen3.5-35b", "qwen3.5-397b", "TP=4", "NNODES=2", "-1", "0", "x", ""]
)  # fmt: skip


@FAST
@given(argv=st.lists(st.one_of(WORDS, st.text(max_size=12)), max_size=6))
def test_any_argument_list(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    if argv[:1] in (["launch"], ["doctor"]):
        argv = ["validate", *argv[1:]]  # launch would start a run; doctor inspects this host
    rc, out, err = call(capsys, argv)
    assert_contract(rc, out, err)


def test_report_with_too_many_rows_is_refused_quickly(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    rows = [{"host": f"h{i % 900}", "check": "c", "ok": True} for i in range(readiness_page.MAX_REPORT_ROWS + 1)]
    report = tmp_path / "big.json"
    report.write_text(json.dumps({"rows": rows}))
    rc, out, err = call(capsys, ["report", str(report)])
    assert rc == 2 and "rows, more than the page draws" in err
