"""The diagnosis measured on its corpus of real failure texts (tests/corpus): the corpus is well formed and split by
thread, and docs/diagnose.md quotes what the held-out half measures today (its figures cannot drift from the code);
the quiet texts stay quiet."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from verl_recipe.diagnosis.families import FAMILIES

from tests.corpus import measure

DOC = Path(__file__).resolve().parents[2] / "docs" / "diagnose.md"


def test_the_corpus_is_well_formed_and_split_by_thread() -> None:
    records = measure.load()
    assert len(records) >= 90
    assert len({r.id for r in records}) == len(records)
    known = {f.id for f in FAMILIES} | set(measure.QUIET)
    for r in records:
        assert r.family in known, r.id
        assert re.match(r"https://", r.source), r.id
        assert r.text.strip() and len(r.text.splitlines()) <= 40 and r.cause, r.id
    halves: dict[str, set[str]] = {}
    for r in records:
        halves.setdefault(r.source, set()).add(r.split)
    assert all(len(s) == 1 for s in halves.values()), "a thread in both halves"
    sizes = Counter(r.split for r in records)
    assert min(sizes.values()) >= len(records) // 3, sizes
    assert sum(1 for r in records if r.first_failure) >= 8, "multi-host texts for the first failure"


def test_docs_quote_what_the_held_out_half_measures() -> None:
    held = [r for r in measure.load() if r.split == "held-out"]
    table = measure.markdown(measure.table(measure.measure(held)))
    assert table in DOC.read_text(), f"docs/diagnose.md's held-out table is not today's; today:\n{table}"
