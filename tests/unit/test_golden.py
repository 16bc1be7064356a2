"""The golden corpus (tests/golden): what the product prints and writes, unchanged by a move of code.

GOLDEN_WRITE=1 (`make golden`) writes the corpus anew; the commit that does names each intended difference.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

from tests.golden.corpus import build, read_expected, write_expected


def test_the_product_prints_and_writes_what_the_corpus_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # argparse's help and usage lines wrap at the terminal's width
    cases = build(tmp_path, capsys, monkeypatch)
    if os.environ.get("GOLDEN_WRITE") == "1":
        write_expected(cases)
    expected = read_expected()
    assert sorted(cases) == sorted(expected), "cases added or gone: run `make golden` and name why in the commit"
    changed = []
    for name, text in cases.items():
        if text != expected[name]:
            diff = difflib.unified_diff(
                expected[name].splitlines(), text.splitlines(), f"expected/{name}.txt", "now", lineterm="", n=1
            )
            changed.append("\n".join(list(diff)[:40]))
    assert not changed, f"{len(changed)} case(s) differ from the corpus:\n" + "\n".join(changed[:5])
