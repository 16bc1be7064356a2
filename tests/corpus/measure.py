"""`verl-recipe diagnose` measured on real failure texts it was not written from (tests/corpus/README.md).

Each record of failures.jsonl is one text as a public thread posted it, with the family and cause the thread gives.
The records are split by their source thread (a hash of its address: no thread is in both halves, and nobody chose
which half a thread went to): rules may be written against the `tune` half; the `held-out` half is only measured.

    python -m tests.corpus.measure [--split held-out|tune|all] [--json]

prints, per family, how many texts were put first in the right family (recall), how many of the findings put first
in that family were right (precision), the quiet ones (noise and healthy logs with no finding) and the multi-host
texts whose first failure was located."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_recipe.diagnosis import diagnose as dg
from verl_recipe.diagnosis.families import FAMILIES

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "failures.jsonl"
QUIET = ("noise", "healthy")  # no finding is the right answer
SPLITS = ("tune", "held-out")


def split_of(source: str) -> str:
    """The half a thread belongs to, from its address alone."""
    return SPLITS[hashlib.sha256(source.encode()).digest()[0] % 2]


@dataclass(frozen=True)
class Record:
    id: str
    source: str
    family: str
    cause: str
    first_failure: str | None
    text: str

    @property
    def split(self) -> str:
        return split_of(self.source)


def load(path: Path = CORPUS) -> list[Record]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            d = json.loads(line)
            out.append(Record(d["id"], d["source"], d["family"], d["cause"], d.get("first_failure"), d["text"]))
    return out


@dataclass(frozen=True)
class Outcome:
    record: Record
    got: str  # the first finding's family, or "" for none
    located: bool | None  # multi-host texts: was the first failure placed on the right host or rank


def _located(result: dg.Diagnosis, expected: str) -> bool:
    first = result.first_failure
    if first is None:
        return False
    said = " ".join(str(x) for x in (first.host, first.rank, first.excerpt) if x)
    return expected.lower() in said.lower()


def judge(record: Record, work: Path) -> Outcome:
    run = work / record.id
    run.mkdir(parents=True, exist_ok=True)
    log = run / "train.log"
    log.write_text(record.text + "\n", encoding="utf-8")
    result = dg.diagnose([log])
    got = result.findings[0].family if result.findings else ""
    located = _located(result, record.first_failure) if record.first_failure else None
    return Outcome(record, got, located)


def measure(records: list[Record]) -> list[Outcome]:
    with tempfile.TemporaryDirectory() as tmp:
        return [judge(r, Path(tmp)) for r in records]


def table(outcomes: list[Outcome]) -> dict[str, Any]:
    families = [f.id for f in FAMILIES]
    per: dict[str, dict[str, Any]] = {}
    said = Counter(o.got for o in outcomes if o.got)
    for fam_id in families:
        mine = [o for o in outcomes if o.record.family == fam_id]
        right = sum(1 for o in mine if o.got == fam_id)
        claimed = said.get(fam_id, 0)
        hit = sum(1 for o in outcomes if o.got == fam_id and o.record.family == fam_id)
        per[fam_id] = {
            "texts": len(mine),
            "right_first": right,
            "recall": round(right / len(mine), 3) if mine else None,
            "put_first": claimed,
            "precision": round(hit / claimed, 3) if claimed else None,
        }
    failures = [o for o in outcomes if o.record.family not in QUIET]
    quiet = [o for o in outcomes if o.record.family in QUIET]
    multi = [o for o in outcomes if o.located is not None]
    right = sum(1 for o in failures if o.got == o.record.family)
    return {
        "texts": len(outcomes),
        "failures": len(failures),
        "right_first": right,
        "share_right_first": round(right / len(failures), 3) if failures else None,
        "quiet": {"texts": len(quiet), "quiet": sum(1 for o in quiet if not o.got)},
        "first_failure": {"texts": len(multi), "located": sum(1 for o in multi if o.located)},
        "families": per,
        "missed": [
            {"id": o.record.id, "family": o.record.family, "got": o.got or "none"}
            for o in outcomes
            if o.got != ("" if o.record.family in QUIET else o.record.family)
        ],
    }


def markdown(t: dict[str, Any]) -> str:
    lines = ["| family | texts | right first (recall) | put first | precision |", "|---|---|---|---|---|"]
    for fam_id, row in t["families"].items():
        if not row["texts"] and not row["put_first"]:
            continue
        rec = "-" if row["recall"] is None else f"{row['right_first']} ({row['recall']:.0%})"
        prec = "-" if row["precision"] is None else f"{row['precision']:.0%}"
        lines.append(f"| {fam_id} | {row['texts']} | {rec} | {row['put_first']} | {prec} |")
    q, ff = t["quiet"], t["first_failure"]
    lines.append(
        f"| all failures | {t['failures']} | {t['right_first']} ({t['share_right_first']:.0%}) | | |"
        if t["failures"]
        else "| all failures | 0 | - | | |"
    )
    lines.append(f"| noise and healthy logs left quiet | {q['texts']} | {q['quiet']} | | |")
    lines.append(f"| multi-host texts, first failure located | {ff['texts']} | {ff['located']} | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.corpus.measure", description=__doc__.split("\n\n")[0])
    p.add_argument("--split", choices=(*SPLITS, "all"), default="held-out")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    records = [r for r in load() if args.split == "all" or r.split == args.split]
    t = table(measure(records))
    sys.stdout.write(json.dumps(t, indent=2) + "\n" if args.json else markdown(t) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
