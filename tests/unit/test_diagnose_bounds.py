"""The diagnosis stays bounded whatever the logs hold (issue: one line of 80,000 characters took 69 s, 16 logs of
8 MB of short lines 3.3 GB): lines are cut to MAX_LINE_CHARS keeping their start and end, a file keeps its last
MAX_TAIL_LINES lines with their true numbers, a diagnosis MAX_TOTAL_LINES in all. Properties over generated logs,
then the worst cases named in the issue in a process of their own, against 30 s and 1 GiB."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from verl_recipe.diagnosis import logs
from verl_recipe.diagnosis.diagnose import diagnose


@settings(max_examples=30, deadline=None)
@given(
    length=st.integers(0, 3 * logs.MAX_LINE_CHARS),
    fill=st.sampled_from(["a", "ab", " undefined symbol", "torch_npu.so", "\u00e9", "ERROR "]),
)
def test_a_line_is_cut_to_its_start_and_end(tmp_path_factory: object, length: int, fill: str) -> None:
    line = (fill * (length // max(1, len(fill)) + 1))[:length]
    text = "HEAD" + line + "TAIL"
    path = Path(str(tmp_path_factory.mktemp("l"))) / "a.log"  # type: ignore[attr-defined]
    path.write_text(f"first\n{text}\nlast\n")
    lines, first = logs.read_tail(path)
    assert first == 1 and lines[0] == "first" and lines[2] == "last"
    got = lines[1]
    assert len(got) <= logs.MAX_LINE_CHARS + len(logs.LINE_CUT)
    assert got.startswith("HEAD") and got.endswith("TAIL")
    assert (got == text) is (len(text) <= logs.MAX_LINE_CHARS)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 3000), keep=st.integers(1, 2000))
def test_a_file_keeps_its_last_lines_with_their_true_numbers(tmp_path_factory: object, n: int, keep: int) -> None:
    path = Path(str(tmp_path_factory.mktemp("n"))) / "a.log"  # type: ignore[attr-defined]
    path.write_text("".join(f"line {i}\n" for i in range(1, n + 1)))
    lines, first = logs.read_tail(path, max_lines=keep)
    assert len(lines) == min(n, keep)
    assert first == n - len(lines) + 1 and lines[0] == f"line {first}" and lines[-1] == f"line {n}"


def test_the_line_budget_holds_across_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "MAX_TOTAL_LINES", 1000)
    monkeypatch.setattr(logs, "MAX_TAIL_LINES", 400)
    files = []
    for k in range(5):
        p = tmp_path / f"{k}.log"
        p.write_text("x\n" * 700)
        files.append((p, p.name))
    got = logs.read_logs(files)
    assert [len(g.lines) for g in got] == [400, 400, 200]


WORST = """
import resource, sys, time
from pathlib import Path
from verl_recipe.diagnosis.diagnose import diagnose
t = time.monotonic()
diagnose([Path(sys.argv[1])])
print(time.monotonic() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def _worst(folder: Path) -> tuple[float, float]:
    p = subprocess.run([sys.executable, "-c", WORST, str(folder)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    took, rss = (float(x) for x in p.stdout.split())
    return took, rss


def test_the_worst_logs_of_the_issue_stay_within_30_s_and_1_gib(tmp_path: Path) -> None:
    one_line = tmp_path / "long"
    one_line.mkdir()
    (one_line / "train.log").write_text("x" * 80_000 + " undefined symbol " + "y" * 80_000 + "\n")
    symbols = tmp_path / "symbols"
    symbols.mkdir()
    (symbols / "train.log").write_text(("libtorch_npu" + "a" * 2000 + " undefined symbol\n") * 3000)
    short = tmp_path / "short"
    (short / "nodes").mkdir(parents=True)
    chunk = b"a\n" * (4 * 2**20)  # 8 MB of two-byte lines
    for k in range(16):
        (short / "nodes" / f"h{k}.log").write_bytes(chunk)
    for folder in (one_line, symbols, short):
        took, rss = _worst(folder)
        assert took < 30 and rss < 2**30, f"{folder.name}: {took:.1f} s, {rss / 2**20:.0f} MiB"


def test_a_diagnosis_still_finds_an_error_at_the_end_of_a_cut_line(tmp_path: Path) -> None:
    (tmp_path / "train.log").write_text("noise " * 20_000 + "RuntimeError: [Errno 28] No space left on device\n")
    t = time.monotonic()
    result = diagnose([tmp_path])
    assert time.monotonic() - t < 30
    assert result.findings and result.findings[0].family == "checkpoint", result
