"""Property-based tests of the commands that read a run folder after the fact: `report RUN_DIR` (the run page),
`compare RUN --baseline B` and `--save-baseline FILE`, `diagnose RUN_DIR`, and the launcher's live metric tail
(metricstream.complete_records, MetricTail, the progress line and the health rules fed from it).

Each test builds a whole run folder as a launch writes it, then damages one of its files: cut mid-line, bytes that
are not UTF-8, lines nested thousands deep, JSON of another shape (a list for an object, "step": "1", "data": 4,
NaN, Infinity, numbers of thousands of digits, lone surrogates), hundreds of thousands of lines, empty, missing, or a
folder where the file should be. The contract: in bounded time, exit 0, or exit 2 and one `error:` line naming the
file or value and a fix; never a traceback. The live tail never raises and keeps handing on the steps after.

Derandomized like test_fuzz_launch.py (FUZZ_RANDOM=1 FUZZ_EXAMPLES=300 to hunt); each test caps its examples so the
file runs in well under a minute on one busy core.
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from verl_recipe.cli import main
from verl_recipe.watch.health import Health, Thresholds
from verl_recipe.watch.metricstream import MetricTail, Progress, complete_records, parse_record

SECONDS = 20.0  # catches a hang or an unbounded loop, not a slow second on a loaded machine
HUNT = os.environ.get("FUZZ_RANDOM") == "1"
FAST = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "40")),
    deadline=None,
    derandomize=not HUNT,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: a failure is reported as found
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
# The examples of 300,000 lines are shown whole when one fails; no need to say so on every run.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
FEW = settings(FAST, max_examples=max(10, FAST.max_examples // 3))


class Hung(BaseException):
    """Raised by the alarm: no OSError (TimeoutError is one, which the commands' own handlers would take)."""


def _hung(_signum: int, _frame: object) -> None:
    raise Hung(f"still running after {2 * SECONDS:.0f} s (a read that waits for ever?)")


@contextmanager
def clock() -> Iterator[None]:
    """The time bound; a command that blocks (a fifo opened for reading) is interrupted at twice the bound."""
    start = time.monotonic()
    before = signal.signal(signal.SIGALRM, _hung)
    signal.setitimer(signal.ITIMER_REAL, 2 * SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    took = time.monotonic() - start
    assert took < SECONDS, f"took {took:.1f} s"


def call(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    with clock():
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return rc, out, err


def assert_contract(rc: int, out: str, err: str, *names: str, codes: tuple[int, ...] = (0,)) -> None:
    """Exit 0 (or one of `codes`), or exit 2 with exactly one error line that gives a fix and names the subject."""
    assert "Traceback" not in err, err  # stdout may quote one: diagnose prints a log's last traceback
    assert rc in (*codes, 2), (rc, err[-2000:])
    if rc != 2:
        return
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "fix:" in lines[0], err[-2000:]
    if names:
        assert any(n in lines[0] for n in names), (names, lines[0])


# ------------------------------------------------------------------------------------------------ a whole run

STEPS = 16


def step_line(k: int) -> dict[str, Any]:
    return {
        "step": k,
        "data": {
            "timing_s/step": 2.0 + k % 3 * 0.01,
            "perf/throughput": 60.0,
            "critic/rewards/mean": 0.07,
            "response_length/mean": 12.0,
            "actor/perf/max_memory_allocated_gb": 0.59,
            "actor/perf/cpu_memory_used_gb": 4.2,
            "actor/pg_loss": 0.01,
            "training/global_step": k,
        },
    }


DOCS: dict[str, Any] = {
    "settings.json": {
        "recipe": "train-2b-fsdp",
        "host": "head",
        "started_utc": "2026-12-02T10:00:00Z",
        "cluster": "a3-01,a3-02",
        "total_steps": STEPS,
        "resumed_from_step": 2,
        "settings": {
            "DEVICE": {"value": "npu", "from": "recipe"},
            "NNODES": {"value": 2, "from": "site"},
            "EXPERIMENT_NAME": {"value": "exp", "from": "recipe"},
            "TOTAL_TRAINING_STEPS": {"value": STEPS, "from": "recipe"},
        },
    },
    "outcome.json": {
        "exit_code": 1,
        "ended_utc": "2026-12-02T11:00:00Z",
        "lost_nodes": [{"host": "a3-02", "ip": "10.0.0.2"}],
        "next": "run the same command: it resumes from the latest checkpoint",
    },
    "alerts.json": [
        {
            "rule": "step_time",
            "metric": "timing_s/step",
            "value": 9.5,
            "threshold": 4.0,
            "step": 3,
            "time_utc": "2026-12-02T10:03:00Z",
            "line": "alert step_time: timing_s/step = 9.5 at step 3",
            "stops_run": False,
        }
    ],
    "lost_nodes.json": [{"host": "a3-02", "ip": "10.0.0.2", "at_step": 5}],
    "diagnosis.json": {
        "findings": [
            {
                "id": "npu-oom",
                "title": "NPU out of memory",
                "cause": "c",
                "fix": "f",
                "prevent": "p",
                "file": "train.log",
                "line": 3,
                "excerpt": "RuntimeError: NPU out of memory",
            }
        ],
        "unknown": {"last_error_block": "RuntimeError: x", "logs": ["train.log"]},
    },
}
LOG = 'INFO step 1\nTraceback (most recent call last):\n  File "x.py", line 1\nRuntimeError: worker died\n'


def good_bytes(name: str) -> bytes:
    if name == "metrics.jsonl":
        return "".join(json.dumps(step_line(k)) + "\n" for k in range(1, STEPS + 1)).encode()
    if name == "train.log":
        return LOG.encode()
    return json.dumps(DOCS[name], indent=2).encode()


def make_run(root: Path, name: str = "run") -> Path:
    d = root / name
    d.mkdir()
    for file in (*DOCS, "metrics.jsonl", "train.log"):
        (d / file).write_bytes(good_bytes(file))
    (d / "nodes").mkdir()
    (d / "nodes" / "a3-02.log").write_text("INFO ok\n")
    return d


# ------------------------------------------------------------------------------------------------ damaged content

DEEP = b"[" * 5000 + b"]" * 5000
# Raw JSON text put where one value was: what json.dumps of a Python value cannot write.
RAW_VALUES = st.sampled_from(
    [
        DEEP,
        b'{"a": ' * 3000 + b"1" + b"}" * 3000,
        b"[" * 990 + b"]" * 990,
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"1e999",
        b"1" * 400,
        b"-" + b"9" * 4000,
        b"1" * 5000,
        b"2" + b"0" * 19,
        b'"\\ud800"',
        b'"\\udcff\\u0000\\n"',
        b'"' + b"x" * 100_000 + b'"',
        b"null",
        b"true",
        b"[]",
        b"{}",
        b'"1"',
        b"4",
        b"-1",
        b"0",
        b"1.5",
        b'[1, "a", null, {"b": []}]',
        b'{"value": [1]}',
        b'{"host": {"x": 1}, "ip": []}',
    ]
)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
REPLACEMENT = st.one_of(RAW_VALUES, VALUES.map(lambda v: json.dumps(v).encode()))
HOLE = "@@hole@@"


def paths_of(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document a value sits at (the whole document too)."""
    out = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths_of(v, (*at, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths_of(v, (*at, i))
    return out


def with_hole(doc: Any, path: tuple[Any, ...]) -> Any:
    if not path:
        return HOLE
    copy = json.loads(json.dumps(doc))
    parent = copy
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = HOLE
    return copy


@st.composite
def replaced_value(draw: st.DrawFn, doc: Any) -> bytes:
    """The document with one value (or a new key) replaced by raw JSON text of another shape."""
    places = paths_of(doc)
    path = draw(st.sampled_from(places))
    if isinstance(doc, dict) and draw(st.booleans()):
        path = (draw(st.sampled_from(["settings", "exit_code", "lost_nodes", "findings", "unknown", "x"])),)
    text = json.dumps(with_hole(doc, path)).encode()
    return text.replace(json.dumps(HOLE).encode(), draw(REPLACEMENT), 1)


@st.composite
def damaged(draw: st.DrawFn, good: bytes) -> bytes:
    kind = draw(st.sampled_from(["cut", "bytes", "insert", "binary", "many", "sample"]))
    if kind == "cut":
        return good[: draw(st.integers(0, max(0, len(good) - 1)))]
    if kind == "bytes":
        at = draw(st.integers(0, len(good)))
        return good[:at] + draw(st.sampled_from([b"\xff\xfe", b"\x80", b"\xc3", b"\x00", b"\xed\xa0\x80"])) + good[at:]
    if kind == "insert":
        at = draw(st.integers(0, len(good)))
        return good[:at] + draw(RAW_VALUES) + good[at:]
    if kind == "binary":
        return draw(st.binary(max_size=300))
    if kind == "many":
        line = draw(st.sampled_from([b"\n", b"x\n", b"[]\n", b'{"step": 1, "data": {}}\n', b"{}\n"]))
        return line * 300_000
    return draw(
        st.sampled_from([b"", b"\n", b"  ", b"\xef\xbb\xbf{}", b"[" * 100_000, b"{" * 100_000, DEEP, b"\xff" * 64])
    )


def content_for(name: str) -> st.SearchStrategy[bytes]:
    good = good_bytes(name)
    if name == "metrics.jsonl":
        return st.one_of(damaged(good), metrics_of_another_shape())
    return st.one_of(damaged(good), replaced_value(DOCS[name]), VALUES.map(lambda v: json.dumps(v).encode()))


STEP_VALUES = st.sampled_from(
    [b'"1"', b"1.0", b"true", b"null", b"-1", b"0", b"1e999", b"1" * 400, b"1" * 5000, b"9007199254740993", b"[1]"]
)
DATA_VALUES = st.one_of(
    st.sampled_from([b"4", b"[]", b'"x"', b"null", DEEP, b'{"timing_s/step": ' + DEEP + b"}"]),
    st.dictionaries(
        st.sampled_from(["timing_s/step", "perf/throughput", "critic/rewards/mean", "actor/pg_loss", "x", "\ud800"]),
        st.one_of(VALUES, st.sampled_from([float("nan"), float("inf"), 10**400, -(10**300), True])),
        max_size=4,
    ).map(lambda d: json.dumps(d).encode()),
)


@st.composite
def metrics_of_another_shape(draw: st.DrawFn) -> bytes:
    """Valid lines around one odd line: a step of another type, data of another shape, a line nested deep, a
    record that is no object; or many steps, each with hundreds of per-node memory series."""
    good = [json.dumps(step_line(k)).encode() for k in range(1, STEPS + 1)]
    at = draw(st.integers(0, STEPS))
    odd = draw(
        st.one_of(
            st.builds(lambda s, d: b'{"step": ' + s + b', "data": ' + d + b"}", STEP_VALUES, DATA_VALUES),
            st.builds(lambda d: b'{"step": 3, "data": ' + d + b"}", DATA_VALUES),
            st.sampled_from([b"[1, 2]", b'"step"', b"4", b"null", b'{"step": 1, "data": ' + DEEP + b"}", b"{}"]),
        )
    )
    if draw(st.booleans()):
        good[at:at] = [odd]
    else:
        good[min(at, STEPS - 1)] = odd
    if draw(st.integers(0, 9)) == 0:
        wide = {f"actor/perf/max_memory_allocated_gb/node{i}": 1.0 for i in range(5000)}
        good.append(json.dumps({"step": STEPS + 1, "data": wide}).encode())
    return b"\n".join(good) + draw(st.sampled_from([b"\n", b"", b'\n{"step": 99, "da']))


def place(run_dir: Path, name: str, content: bytes) -> None:
    path = run_dir / name
    path.unlink(missing_ok=True)
    path.write_bytes(content)


RUN_FILES = ["settings.json", "metrics.jsonl", "outcome.json", "alerts.json", "lost_nodes.json", "diagnosis.json"]


# ------------------------------------------------------------------------------------------------ the run page


@FAST
@given(data=st.data(), name=st.sampled_from(RUN_FILES))
def test_run_page_of_any_file_content(capsys: pytest.CaptureFixture[str], data: st.DataObject, name: str) -> None:
    content = data.draw(content_for(name))
    with tempfile.TemporaryDirectory() as tmp:
        d = make_run(Path(tmp))
        place(d, name, content)
        rc, out, err = call(capsys, ["report", str(d)])
        assert_contract(rc, out, err, name, str(d))
        if rc == 0:
            page = (d / "run.html").read_text(encoding="utf-8")
            assert 'id="step-time"' in page
            if name != "metrics.jsonl":  # the plots are drawn whatever the other files hold
                assert f'data-points="{STEPS}"' in page, name


@pytest.mark.parametrize("name", [*RUN_FILES, "run.html"])
@pytest.mark.parametrize("how", ["missing", "folder", "loop", "fifo"])
def test_run_page_with_a_file_missing_or_not_a_file(capsys: pytest.CaptureFixture[str], name: str, how: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = make_run(Path(tmp))
        damage_kind(d / name, how)
        rc, out, err = call(capsys, ["report", str(d)])
        assert_contract(rc, out, err, name)
        if rc == 0 and name not in ("metrics.jsonl", "run.html"):
            assert f'data-points="{STEPS}"' in (d / "run.html").read_text(encoding="utf-8")


def damage_kind(path: Path, how: str) -> None:
    path.unlink(missing_ok=True)
    if how == "folder":
        path.mkdir()
        (path / "x.log").write_text("RuntimeError: inside a folder\n")
    elif how == "loop":
        path.symlink_to(path.name)
    elif how == "fifo":
        os.mkfifo(path)  # nothing ever writes it: opening it to read would wait for ever


@pytest.mark.parametrize(
    ("name", "text", "note"),
    [
        ("settings.json", "[1, 2]", "settings.json"),
        ("settings.json", '{"settings": {"DEVICE": {"value": ["npu"]}}}', "settings.json"),
        ("settings.json", "null", "settings.json"),
        ("settings.json", '{"settings": [1]}', "settings.json"),
        ("outcome.json", '{"exit_code": "1"}', "outcome.json"),
        ("outcome.json", '{"exit_code": 1, "lost_nodes": 3}', "outcome.json"),
        ("lost_nodes.json", '{"host": "a3-02"}', "lost_nodes.json"),
        ("alerts.json", '[{"step": 3, "metric": ["timing_s/step"]}]', "alerts.json"),
        ("alerts.json", '{"step": 3}', "alerts.json"),
        ("diagnosis.json", '{"findings": 4}', "diagnosis.json"),
        ("diagnosis.json", '{"findings": [], "unknown": {"logs": {"a": 1}}}', "diagnosis.json"),
    ],
)
def test_a_record_file_of_another_shape_is_set_aside_with_a_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str, note: str
) -> None:
    d = make_run(tmp_path)
    (d / name).write_text(text)
    rc, out, err = call(capsys, ["report", str(d)])
    assert rc == 0, err
    page = (d / "run.html").read_text(encoding="utf-8")
    assert f'data-points="{STEPS}"' in page
    notes = [line for line in page.split('<p class="note">')[1:] if line.startswith(note)]
    assert notes and "not drawn" in notes[0], page[-3000:]


# ------------------------------------------------------------------------------------------------ compare


@FAST
@given(content=content_for("metrics.jsonl"), as_baseline=st.booleans())
def test_compare_of_any_metric_stream(capsys: pytest.CaptureFixture[str], content: bytes, as_baseline: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good, odd = make_run(Path(tmp), "good"), make_run(Path(tmp), "odd")
        place(odd, "metrics.jsonl", content)
        pair = [str(good), "--baseline", str(odd)] if as_baseline else [str(odd), "--baseline", str(good)]
        rc, out, err = call(capsys, ["compare", *pair])
    assert_contract(rc, out, err, "metrics.jsonl", str(odd), codes=(0, 6))


@FEW
@given(content=content_for("settings.json"))
def test_compare_of_any_settings_file(capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good, odd = make_run(Path(tmp), "good"), make_run(Path(tmp), "odd")
        place(odd, "settings.json", content)
        rc, out, err = call(capsys, ["compare", str(odd), "--baseline", str(good)])
    assert_contract(rc, out, err, codes=(0, 6))
    assert rc == 0, err  # the stream is whole: settings.json only names the recipe


@st.composite
def baseline_content(draw: st.DrawFn) -> bytes:
    doc = {
        "format": "verl-recipe-baseline/1",
        "recipe": "train-2b-fsdp",
        "window": [5, 14],
        "steps": list(range(5, 15)),
        "metrics": {k: v for k, v in step_line(5)["data"].items() if k != "training/global_step"},
        "peak": ["actor/perf/max_memory_allocated_gb"],
        "source": {"run": "/x", "saved_utc": "2026-12-02T10:00:00Z"},
    }
    good = json.dumps(doc, indent=2).encode()
    return draw(st.one_of(damaged(good), replaced_value(doc), VALUES.map(lambda v: json.dumps(v).encode())))


@FAST
@given(content=baseline_content())
def test_compare_against_any_baseline_file(capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good = make_run(Path(tmp), "good")
        base = Path(tmp) / "base.json"
        base.write_bytes(content)
        rc, out, err = call(capsys, ["compare", str(good), "--baseline", str(base)])
    assert_contract(rc, out, err, "base.json", codes=(0, 6))


@pytest.mark.parametrize("how", ["folder", "loop", "fifo"])
def test_compare_against_a_baseline_that_is_not_a_file(capsys: pytest.CaptureFixture[str], how: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good = make_run(Path(tmp), "good")
        damage_kind(Path(tmp) / "base.json", how)
        rc, out, err = call(capsys, ["compare", str(good), "--baseline", str(Path(tmp) / "base.json")])
    assert_contract(rc, out, err, "base.json", codes=(0, 6))


@pytest.mark.parametrize("name", ["metrics.jsonl", "settings.json"])
@pytest.mark.parametrize("how", ["missing", "folder", "loop", "fifo"])
def test_compare_of_a_run_whose_file_is_not_a_file(capsys: pytest.CaptureFixture[str], name: str, how: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        good, odd = make_run(Path(tmp), "good"), make_run(Path(tmp), "odd")
        damage_kind(odd / name, how)
        rc, out, err = call(capsys, ["compare", str(odd), "--baseline", str(good)])
    assert_contract(rc, out, err, name, codes=(0, 6))


@FAST
@given(content=content_for("metrics.jsonl"))
def test_a_saved_baseline_is_one_compare_can_use(capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    """--save-baseline writes a file only where the same run compares against it: exit 0, never bad input."""
    with tempfile.TemporaryDirectory() as tmp:
        odd = make_run(Path(tmp), "odd")
        place(odd, "metrics.jsonl", content)
        target = Path(tmp) / "saved.json"
        rc, out, err = call(capsys, ["compare", str(odd), "--save-baseline", str(target)])
        assert_contract(rc, out, err, "metrics.jsonl", str(odd), "--save-baseline")
        assert (rc == 0) == target.exists(), (rc, err)
        if rc == 0:
            json.loads(target.read_text(encoding="utf-8"), parse_constant=lambda c: pytest.fail(f"{c} in the file"))
            rc, out, err = call(capsys, ["compare", str(odd), "--baseline", str(target)])
            assert rc == 0, out + err


@pytest.mark.parametrize(
    "data",
    [{}, {"x": 1.0}, {"perf/throughput": 60.0}, {"timing_s/step": None, "perf/throughput": float("nan")}],
)
def test_save_baseline_refuses_a_run_without_the_metrics_verl_always_logs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, data: dict[str, Any]
) -> None:
    d = make_run(tmp_path)
    place(d, "metrics.jsonl", "".join(json.dumps({"step": k, "data": data}) + "\n" for k in range(1, 9)).encode())
    target = tmp_path / "saved.json"
    rc, out, err = call(capsys, ["compare", str(d), "--save-baseline", str(target)])
    assert rc == 2 and not target.exists(), (out, err)
    assert err.count("\n") == 1 and "--save-baseline" in err and "fix:" in err, err


# ------------------------------------------------------------------------------------------------ diagnose

LOG_CONTENT = st.one_of(
    damaged(LOG.encode()),
    st.text(max_size=400).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [
            b"x" * 3_000_000,
            b"Traceback (most recent call last):\n" * 50_000,
            b"\x1b[" + b"0;" * 100_000 + b"m",
            b"RuntimeError: " + b"(" * 200_000,
            b"ERROR " * 200_000,
            b"\r" * 100_000,
            b"\n" * 300_000,
        ]
    ),
)


@FAST
@given(content=LOG_CONTENT, where=st.sampled_from(["train.log", "nodes/a3-02.log", "bundle/plog/plog-1.log", "a.out"]))
def test_diagnose_of_any_log(capsys: pytest.CaptureFixture[str], content: bytes, where: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = make_run(Path(tmp))
        (d / where).parent.mkdir(parents=True, exist_ok=True)
        (d / where).write_bytes(content)
        rc, out, err = call(capsys, ["diagnose", str(d)])
        assert_contract(rc, out, err)
        rc, out, err = call(capsys, ["diagnose", "--json", str(d)])
        assert_contract(rc, out, err)
        if rc == 0:
            json.loads(out)


@pytest.mark.parametrize("name", ["train.log", "nodes", "other.log", "deep/x.log"])
@pytest.mark.parametrize("how", ["missing", "folder", "loop", "fifo"])
def test_diagnose_of_a_run_whose_log_is_not_a_file(capsys: pytest.CaptureFixture[str], name: str, how: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = make_run(Path(tmp))
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            for child in path.iterdir():
                child.unlink()
            path.rmdir()
        damage_kind(path, how)
        for argv in (["diagnose", str(d)], ["diagnose", str(path)]):
            rc, out, err = call(capsys, argv)
            assert_contract(rc, out, err)


# ------------------------------------------------------------------------------------------------ the live tail

THRESHOLDS = Thresholds(
    mem_growth_gb=1.0, mem_window=3, step_time_ratio=1.5, stall_factor=5.0, reward_drop=0.5, host_mem_fraction=0.9
)
FINAL = {"step": 1000, "data": {"timing_s/step": 2.0}}


def feed_everything(records: list[dict[str, Any]]) -> None:
    """What the launcher does with each record: the progress line and the health rules."""
    progress = Progress(STEPS)
    health = Health(THRESHOLDS, host_total_gb=64.0, total_steps=STEPS, describe_cluster=lambda: "ray: -")
    for rec in records:
        assert parse_record(json.dumps(rec)) is not None
        progress.line(rec)
        health.on_record(rec)


def test_the_health_rules_take_steps_without_a_step_time_first() -> None:
    """The step-time rule takes its baseline from the steps that carry timing_s/step: when the first steps lack it,
    it waits for enough timed ones (it once asked for the median of none, which in the launcher ended the tail's
    thread with a traceback)."""
    records = [{"step": k, "data": {}} for k in range(1, 8)] + [{"step": 8, "data": {"timing_s/step": 2.0}}]
    feed_everything(records)


@FAST
@given(content=st.one_of(content_for("metrics.jsonl"), damaged(good_bytes("metrics.jsonl"))))
def test_the_live_tail_of_any_stream(content: bytes) -> None:
    with clock():
        records, rest = complete_records(content + b"\n" + json.dumps(FINAL).encode() + b"\n")
        assert records[-1] == FINAL and rest == b""
        assert all(isinstance(r["step"], int) and isinstance(r["data"], dict) for r in records)
        feed_everything(records)


@FEW
@given(content=content_for("metrics.jsonl"), cut=st.integers(0, 200))
def test_the_tail_thread_goes_on_past_any_line(
    tmp_path_factory: pytest.TempPathFactory, content: bytes, cut: int
) -> None:
    path = tmp_path_factory.mktemp("tail") / "metrics.jsonl"
    path.write_bytes(content[: len(content) - cut] + b"\n")
    seen: list[dict[str, Any]] = []
    with clock():
        with MetricTail(path, seen.append, every_s=0.01), path.open("ab") as fh:
            fh.write(json.dumps(FINAL).encode() + b"\n")
        assert seen and seen[-1] == FINAL
        feed_everything(seen)


# ------------------------------------------------------------------------------------------------ found before

DEEP_SETTINGS = b'{"recipe": ' + b"[" * 5000 + b"]" * 5000 + b"}"


def lines_of(*data: dict[str, Any], steps: list[int] | None = None) -> bytes:
    numbers = steps or list(range(1, len(data) + 1))
    return "".join(json.dumps({"step": k, "data": d}) + "\n" for k, d in zip(numbers, data, strict=True)).encode()


FOUND = {
    # (file in the run folder, its content, the command's arguments after the run folder, exit code, in the output)
    "compare: a 400-digit number in a metric": (
        "metrics.jsonl",
        good_bytes("metrics.jsonl") + b'{"step": 17, "data": {"timing_s/step": ' + b"1" * 400 + b"}}\n",
        ["compare", "--baseline", "GOOD"],
        0,
        "ok: every metric",
    ),
    "compare: settings.json nested deep": ("settings.json", DEEP_SETTINGS, ["compare", "--baseline", "GOOD"], 0, ""),
    "compare: steps 2**53 apart": (
        "metrics.jsonl",
        lines_of(step_line(1)["data"], step_line(2)["data"], steps=[1, 2**53]),
        ["compare", "--baseline", "SELF"],
        0,
        "compared steps 1,9007199254740992 instead",
    ),
    "report: step times of +-1e308": (
        "metrics.jsonl",
        lines_of({"timing_s/step": 1e308}, {"timing_s/step": -1e308}, {"timing_s/step": 2.0}),
        ["report"],
        0,
        "run page:",
    ),
    "report: a lone surrogate in the recipe": ("settings.json", b'{"recipe": "\\ud800"}', ["report"], 0, "run page:"),
    "report: an alert's metric is a list": (
        "alerts.json",
        b'[{"step": 3, "metric": ["timing_s/step"], "value": 1}]',
        ["report"],
        0,
        "run page:",
    ),
    "report: outcome.json's lost_nodes is a number": (
        "outcome.json",
        b'{"exit_code": 1, "lost_nodes": 3}',
        ["report"],
        0,
        "run page:",
    ),
    "compare: a lone surrogate in the recipe": (
        "settings.json",
        b'{"recipe": "\\ud800"}',
        ["compare", "--baseline", "GOOD"],
        0,
        "ok: every metric",
    ),
}


@pytest.mark.parametrize("case", sorted(FOUND))
def test_inputs_that_broke_a_command(capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str) -> None:
    check_case(capsys, tmp_path, FOUND[case])


def check_case(capsys: pytest.CaptureFixture[str], tmp_path: Path, case: tuple[Any, ...]) -> None:
    name, content, argv, code, said = case
    good, odd = make_run(tmp_path, "good"), make_run(tmp_path, "odd")
    for other in ("alerts.json", "lost_nodes.json"):  # an alert's mark widens a plot; lost_nodes.json hides outcome's
        (odd / other).unlink()
    place(odd, name, content)
    args = [argv[0], str(odd), *(str(good) if a == "GOOD" else str(odd) if a == "SELF" else a for a in argv[1:])]
    rc, out, err = call(capsys, args)
    assert rc == code and said in out + err, (rc, out, err)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b'{"format": "verl-recipe-baseline/1", "steps": ' + DEEP + b"}", "nested too deep to read"),
        (b'{"format": "verl-recipe-baseline/1", "recipe": "\xff"}', "not UTF-8"),
        (b"[" * 100_000, "nested too deep to read"),
        (b'{"format": "verl-recipe-baseline/1", "steps": [true], "metrics": {"x": 1}}', "steps (a list of step"),
        (b'{"format": "verl-recipe-baseline/1", "steps": [5], "metrics": {"x": 1e999, "y": "1"}}', "no finite number"),
        (b'{"format": "verl-recipe-baseline/1", "steps": [5], "metrics": [1]}', "are malformed"),
    ],
)
def test_a_baseline_file_of_another_shape_is_named_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes, said: str
) -> None:
    base = tmp_path / "base.json"
    base.write_bytes(content)
    rc, out, err = call(capsys, ["compare", str(make_run(tmp_path)), "--baseline", str(base)])
    assert rc == 2 and err.count("\n") == 1 and said in err and str(base) in err and "fix:" in err, err


def test_a_saved_baseline_of_huge_figures_is_finite(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The mean of two step times near the float's limit overflowed: the file held Infinity, which no compare
    reads as a figure."""
    d = make_run(tmp_path)
    recs = [dict(step_line(k)["data"], **{"timing_s/step": 1.7e308}) for k in range(1, 4)]
    place(d, "metrics.jsonl", lines_of(*recs))
    target = tmp_path / "saved.json"
    rc, out, err = call(capsys, ["compare", str(d), "--save-baseline", str(target)])
    assert rc == 0, err
    assert json.loads(target.read_text())["metrics"]["timing_s/step"] == pytest.approx(1.7e308)
    assert call(capsys, ["compare", str(d), "--baseline", str(target)])[0] == 0


# ---------------------------------------------------------------------------------- the watch judges any numbers

# verl's names the progress line and the health rules read, with values at the edges of what a float holds.
JUDGED = [
    "timing_s/step",
    "timing_s/save_checkpoint",
    "timing_s/testing",
    "perf/throughput",
    "critic/rewards/mean",
    "response_length/mean",
    "actor/perf/max_memory_allocated_gb",
    "perf/cpu_memory_used_gb",
    "actor/pg_loss",
    "actor/grad_norm",
]
EDGE_NUMBERS = st.sampled_from(
    [0, 0.0, -0.0, 1, -1, 1e308, -1e308, 1.7e308, 5e-324, 10**300, -(10**300), float("nan"), float("inf"), None, True]
)
EDGE_STEPS = st.one_of(st.integers(-3, 40), st.sampled_from([2**53, -(2**53), 10**15]))


@FAST
@given(
    rows=st.lists(
        st.tuples(EDGE_STEPS, st.dictionaries(st.sampled_from(JUDGED), EDGE_NUMBERS | st.floats(), max_size=6)),
        min_size=1,
        max_size=24,
    )
)
def test_the_progress_line_and_the_health_rules_take_any_numbers(rows: list[tuple[int, dict[str, Any]]]) -> None:
    """Found by this test: a step time of 0 in the first steps divided the step-time alert by zero, rewards near the
    float's limit overflowed the reward rule's mean (fsum), and a step time of 1e308 s gave an ETA round() could not
    take. Each ended the launcher's watch thread (no progress, no rule, no HEALTH_STOP)."""
    now = [1000.0]
    progress = Progress(STEPS)
    health = Health(
        THRESHOLDS, host_total_gb=64.0, total_steps=STEPS, describe_cluster=lambda: "ray: -", clock=lambda: now[0]
    )
    with clock():
        for step, data in rows:
            rec = {"step": step, "data": data}
            assert progress.line(rec).startswith(f"progress: step {step}")
            health.on_record(rec)
            now[0] += 1e6  # long after the step: the stall rule is asked too
            health.tick()


@pytest.mark.parametrize(
    "data",
    [
        [{"timing_s/step": 0.0}] * 5 + [{"timing_s/step": 1.0}],
        [{"timing_s/step": 1.0, "perf/throughput": 0.0}] * 5 + [{"timing_s/step": 1.0, "perf/throughput": 5.0}],
        [{"critic/rewards/mean": 1.7e308}] * 4,
        [{"timing_s/step": 1e308}],
    ],
    ids=["zero-step-time", "zero-throughput", "huge-rewards", "huge-step-time"],
)
def test_numbers_that_broke_the_watch(data: list[dict[str, Any]]) -> None:
    progress, health = Progress(STEPS), Health(THRESHOLDS, total_steps=STEPS, describe_cluster=lambda: "-")
    for k, d in enumerate(data, 1):
        assert progress.line({"step": k, "data": d}).startswith(f"progress: step {k}/{STEPS}")
        health.on_record({"step": k, "data": d})
    if data[0] == {"timing_s/step": 0.0}:
        assert [a.rule for a in health.alerts] == ["step_time"], "a step after steps of 0 s is a slow one"


# ------------------------------------------------------------------------------------------------ the watch goes on


def test_a_callback_that_raises_is_reported_once_and_the_tail_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(lines_of({}, {}, {}, {}) + b'{"step": 9, "data": {}}\n')
    seen: list[int] = []

    def judge(rec: dict[str, Any]) -> None:
        if rec["step"] == 2:
            raise ZeroDivisionError("float division by zero")
        seen.append(rec["step"])

    with clock(), MetricTail(path, judge, every_s=0.01), path.open("ab") as fh:
        fh.write(json.dumps(FINAL).encode() + b"\n")
    assert seen == [1, 3, 4, 9, 1000]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert "metrics.jsonl line 2" in err[0] and "ZeroDivisionError" in err[0] and "goes on" in err[0], err


def test_failures_of_one_kind_are_counted_after_a_few(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(lines_of(*[{}] * 50))

    def judge(rec: dict[str, Any]) -> None:
        raise ZeroDivisionError("division by zero")

    with clock(), MetricTail(path, judge, every_s=0.01):
        time.sleep(0.05)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 + 1 + 1, err  # three shown, one saying the rest are counted, the summary at the end
    assert err[-1] == "watch: 50 failures in all while reading or judging lines; 47 not shown"


@pytest.mark.parametrize("how", ["fifo", "folder", "loop"])
def test_the_tail_never_waits_on_a_stream_that_is_not_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    path = tmp_path / "metrics.jsonl"
    damage_kind(path, how)
    seen: list[dict[str, Any]] = []
    with clock(), MetricTail(path, seen.append, every_s=0.01):
        time.sleep(0.05)
    assert seen == []
    err = capsys.readouterr().err
    assert err.count("\n") <= 1 and "Traceback" not in err, err
    if how != "loop":  # a loop cannot be opened: the same as a stream not written yet
        assert "not a regular file" in err, err


def test_a_truncated_stream_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(lines_of({}, {}, {}))
    seen: list[int] = []
    tail = MetricTail(path, lambda r: seen.append(r["step"]))
    tail.poll()
    path.write_bytes(lines_of({}, steps=[7]))
    tail.poll()
    assert seen == [1, 2, 3, 7]


FAKE_STEPS = """
import json, os
with open(os.environ["VERL_FILE_LOGGER_PATH"], "a") as f:
    for k in range(1, 5):
        f.write(json.dumps({"step": k, "data": {"timing_s/step": 0.1, "critic/rewards/mean": 0.5}}) + "\\n")
        f.flush()
print("fake verl done")
"""


def test_a_launch_whose_watch_raises_on_every_stage_still_ends_with_its_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real launch of a stand-in verl: the health rules raise on step 2, the progress line on step 3, the run page
    on every step. Each is one stderr line; the other stages still run on that step, the steps after still come, and
    outcome.json and the final page are written."""
    from verl_recipe.run import launcher

    from .fixtures import install_fake_verl, make_shared, set_args

    install_fake_verl(tmp_path, monkeypatch, FAKE_STEPS)
    paths = make_shared(tmp_path / "shared")
    on_record, line, page = Health.on_record, Progress.line, launcher.write_run_page

    def rules(self: Health, rec: dict[str, Any]) -> Any:
        if rec["step"] == 2:
            raise ZeroDivisionError("injected")
        return on_record(self, rec)

    def progress_line(self: Progress, rec: dict[str, Any]) -> str:
        if rec["step"] == 3:
            raise KeyError("injected")
        return line(self, rec)

    def run_page(run_dir: Path) -> Path:
        if not (run_dir / "outcome.json").exists():
            raise RuntimeError("injected")
        return page(run_dir)

    monkeypatch.setattr(Health, "on_record", rules)
    monkeypatch.setattr(Progress, "line", progress_line)
    monkeypatch.setattr(launcher, "write_run_page", run_page)
    rc = main(["launch", "qwen3.5-397b", *set_args(paths), "--set", "TOTAL_TRAINING_STEPS=4"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert [x.split("/")[0] for x in out.splitlines() if x.startswith("progress:")] == [
        "progress: step 1",
        "progress: step 2",
        "progress: step 4",
    ]
    watch = [x for x in err.splitlines() if x.startswith("watch:")]
    assert watch == [
        "watch: the health rules failed at step 2: ZeroDivisionError: injected; the watch goes on with the next line",
        "watch: the progress line failed at step 3: KeyError: 'injected'; the watch goes on with the next line",
    ], err
    assert "run page: not written (RuntimeError)" in err
    assert "Traceback" not in err
    (run_dir,) = (Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-397b" / "runs").iterdir()
    outcome = json.loads((run_dir / "outcome.json").read_text())
    assert outcome["exit_code"] == 0 and outcome["steps"]["last_step"] == 4
    assert 'data-points="4"' in (run_dir / "run.html").read_text(), "the final page is drawn"


# ---------------------------------------------------------------------------------- diagnose: line numbers

# What ends a line for str.splitlines() but not for grep: a progress bar's carriage returns and the rest.
NOT_LINE_ENDS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
SIGNATURE_LINE = "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB"
TQDM = " 40%|####      | 4/10 [00:02<00:03,  1.98it/s]\r 50%|#####     | 5/10 [00:02<00:02,  1.98it/s]\r"


def grep_n(content: bytes, needle: str) -> int:
    """The line number `grep -n` gives the first line holding `needle`."""
    return next(i for i, line in enumerate(content.split(b"\n"), 1) if needle.encode() in line)


@FAST
@given(
    before=st.lists(
        st.text(alphabet=st.sampled_from(["a", " ", "%", "|", *NOT_LINE_ENDS]), max_size=30), min_size=0, max_size=30
    ),
    crlf=st.booleans(),
    tail_only=st.booleans(),
)
def test_diagnose_numbers_lines_as_grep_does(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    before: list[str],
    crlf: bool,
    tail_only: bool,
) -> None:
    from verl_recipe.diagnosis import logs

    end = "\r\n" if crlf else "\n"
    content = (end.join([TQDM, *before, SIGNATURE_LINE, TQDM]) + end).encode()
    if tail_only:  # the tail read starts inside the file: the lines before it are counted, not read
        monkeypatch.setattr(logs, "MAX_TAIL_BYTES", len(SIGNATURE_LINE) + 200)
    with tempfile.TemporaryDirectory() as tmp:
        d = make_run(Path(tmp))
        (d / "train.log").write_bytes(content)
        rc, out, err = call(capsys, ["diagnose", "--json", str(d)])
    assert rc == 0, err
    (finding,) = [f for f in json.loads(out)["findings"] if f["id"] == "npu-oom"]
    assert finding["file"] == str(d / "train.log") and finding["line"] == grep_n(content, "NPU out of memory"), content


def test_a_tqdm_bar_does_not_move_the_line_diagnose_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = make_run(tmp_path)
    bars = "".join(f"\rEpoch 1: {k:3d}%|{'#' * (k // 10)}" for k in range(0, 101, 5))
    content = f"INFO start\n{bars}\nINFO after the bar\n{SIGNATURE_LINE}\n".encode()
    (d / "train.log").write_bytes(content)
    rc, out, err = call(capsys, ["diagnose", str(d)])
    assert rc == 0 and "train.log:4: " in out, out  # grep -n says 4; splitlines() said 25


# ------------------------------------------------------------------------------------------------ odd run folders


def test_a_log_named_in_bytes_that_are_not_utf8_is_printed_escaped(tmp_path: Path) -> None:
    """On a real stdout (strict UTF-8), a name from os.listdir with surrogates failed to print."""
    import subprocess
    import sys

    d = make_run(tmp_path)
    (d / "train.log").write_text("INFO\n")
    name = os.fsdecode(b"node-\xff\n.log")
    (d / name).write_text(f"{SIGNATURE_LINE}\n")  # the finding names the file
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    command = Path(sys.executable).parent / "verl-recipe"
    proc = subprocess.run([str(command), "diagnose", str(d)], capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    assert b"node-\\xff\\n.log" in proc.stdout, proc.stdout[-2000:]


def test_diagnose_walks_no_folder_loop_and_skips_what_it_cannot_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = make_run(tmp_path)
    (d / "bundle").mkdir()
    (d / "bundle" / "up").symlink_to("..")  # a folder loop: the walk follows no link
    (d / "bundle" / "gone.log").symlink_to(tmp_path / "nowhere.log")
    (d / "bundle" / "secret.log").write_text(f"{SIGNATURE_LINE}\n")
    real_open = os.open

    def refuse(path: Any, flags: int, *args: Any) -> int:  # root reads any file: the refusal is injected
        if str(path).endswith("secret.log"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refuse)
    rc, out, err = call(capsys, ["diagnose", "--json", str(d)])
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["findings"] == [] and str(d / "train.log") in doc["unknown"]["logs"], doc
    assert not any("secret.log" in name or "up/" in name for name in doc["unknown"]["logs"]), doc


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000")
def test_unreadable_run_files_are_one_line_or_left_out(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    d = make_run(tmp_path)
    for name in ("metrics.jsonl", "train.log", "settings.json"):
        (d / name).chmod(0)
    for argv in (["report", str(d)], ["diagnose", str(d)], ["compare", str(d), "--baseline", str(d)]):
        rc, out, err = call(capsys, argv)
        assert_contract(rc, out, err, codes=(0, 6))


BIG = 100 * 2**20


@pytest.fixture(scope="module")
def huge_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose metrics.jsonl ends in a line of 100 MB with no newline and whose train.log is 100 MB of one
    line: what a writer that lost its newlines (or a binary dumped into the log) leaves."""
    d = make_run(tmp_path_factory.mktemp("huge"))
    with (d / "metrics.jsonl").open("ab") as fh:
        fh.write(b'{"step": 17, "data": {"x": "')
        fh.truncate(fh.tell() + BIG)  # sparse: 100 MB of NUL bytes that read as a string never closed
    with (d / "train.log").open("ab") as fh:
        fh.truncate(BIG)
    return d


@pytest.mark.parametrize("command", ["report", "compare", "diagnose", "tail"])
def test_a_100_mb_line_without_a_newline(capsys: pytest.CaptureFixture[str], huge_run: Path, command: str) -> None:
    if command == "tail":
        seen: list[dict[str, Any]] = []
        with clock():
            tail = MetricTail(huge_run / "metrics.jsonl", seen.append)
            tail.poll()
        assert [r["step"] for r in seen] == list(range(1, STEPS + 1)) and tail._rest == b"" and tail._overlong
        return
    argv = {
        "report": ["report", str(huge_run)],
        "compare": ["compare", str(huge_run), "--baseline", str(huge_run)],
        "diagnose": ["diagnose", str(huge_run)],
    }[command]
    rc, out, err = call(capsys, argv)
    assert_contract(rc, out, err)
    assert rc == 0, err
    if command == "compare":
        assert "ok: every metric" in out


def test_compare_keeps_the_window_and_a_bounded_number_of_other_steps(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from verl_recipe.review import compare

    monkeypatch.setattr(compare, "MAX_KEPT_STEPS", 3)
    d = make_run(tmp_path)
    place(d, "metrics.jsonl", lines_of(*[step_line(k)["data"] for k in range(1, 41)]))
    # kept: steps 1-3 (the first MAX_KEPT_STEPS) and the window's 5-14; left out: 4 and 15-40
    rc, out, err = call(capsys, ["compare", str(d), "--baseline", str(d)])
    assert rc == 0, err
    assert f"note: {d}: 27 lines of steps outside 5-14 left out (more than 3 steps in its metrics.jsonl)" in out


@pytest.mark.parametrize("how", ["elsewhere", "dangling", "tmp-planted", "folder"])
def test_report_never_writes_through_a_planted_link(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, how: str
) -> None:
    d = make_run(tmp_path)
    victim = tmp_path / "victim.txt"
    if how == "elsewhere":
        victim.write_text("keep me\n")
        (d / "run.html").symlink_to(victim)
    elif how == "dangling":
        (d / "run.html").symlink_to(victim)
    elif how == "tmp-planted":  # the name the page used to be written through first
        victim.write_text("keep me\n")
        (d / ".run.html.tmp").symlink_to(victim)
    else:
        (d / "run.html").mkdir()
    rc, out, err = call(capsys, ["report", str(d)])
    assert_contract(rc, out, err, "run.html")
    if how == "folder":
        assert rc == 2 and "move the folder run.html" in err
    else:
        assert rc == 0, err
        assert not (d / "run.html").is_symlink() and 'id="step-time"' in (d / "run.html").read_text()
        assert (victim.read_text() == "keep me\n") if how != "dangling" else not victim.exists()
    assert not [p for p in d.iterdir() if p.name.startswith(".run.html.") and not p.is_symlink()], "no temp left"


FAR_APART_AND_NOT_FINITE = {
    "compare: steps 1 and 10**18": (
        "metrics.jsonl",
        lines_of(step_line(1)["data"], step_line(2)["data"], steps=[1, 10**18]),
        ["compare", "--baseline", "SELF"],
        0,
        "ok: every metric",
    ),
    "report: steps 1 and 10**18": (
        "metrics.jsonl",
        lines_of(step_line(1)["data"], step_line(2)["data"], steps=[1, 10**18]),
        ["report"],
        0,
        "run page:",
    ),
    "report: every value NaN or infinite": (
        "metrics.jsonl",
        b'{"step": 1, "data": {"timing_s/step": NaN, "perf/throughput": Infinity}}\n'
        b'{"step": 2, "data": {"timing_s/step": -Infinity, "critic/rewards/mean": 1e999}}\n',
        ["report"],
        0,
        "run page:",
    ),
    "compare: a 5000-digit step": (
        "metrics.jsonl",
        good_bytes("metrics.jsonl") + b'{"step": ' + b"9" * 5000 + b', "data": {}}\n',
        ["compare", "--baseline", "GOOD"],
        0,
        "ok: every metric",
    ),
}


@pytest.mark.parametrize("case", sorted(FAR_APART_AND_NOT_FINITE))
def test_steps_far_apart_and_numbers_not_finite(capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str) -> None:
    check_case(capsys, tmp_path, FAR_APART_AND_NOT_FINITE[case])
