"""The readiness page's inputs: preflight and rehearsal JSON reports, read within bounds and checked field by
field (a report of another shape is one line naming the file and field), and the meta block a report carries."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...contracts.preflight import SCHEMA
from ..kit import source_commit, utc_now

SEVERITY = {"ok": 0, "skip": 0, "nodata": 1, "warn": 2, "fail": 3}
STATUS_WORDS = {
    "fail": ("fail", "failed", "error", "bad", "critical"),
    "warn": ("warn", "warning", "degraded"),
    "ok": ("ok", "pass", "passed", "success", "healthy"),
    "skip": ("skip", "skipped", "n/a", "na", "not applicable"),
}
IPV4 = re.compile(r"\b(\d{1,3}(?:\.\d{1,3}){3})\b")
PAGE_SUFFIX = ".html"
# A preflight writes some 50 rows per host: 50,000 rows are a thousand hosts. Bigger files are not reports and would
# take minutes to draw into a page no browser opens.
MAX_REPORT_ROWS = 50_000
MAX_REPORT_BYTES = 64 * 1024 * 1024


class ReportError(ValueError):
    """A report that cannot be drawn; the message is one line naming the file and the fix."""


# ---------------------------------------------------------------------------------------------------------- meta


def report_meta(kind: str, *, simulated: bool | None = None, commit_from: str | None = None, **extra: Any) -> dict:
    """The `meta` block a report writer adds to its JSON so the page can say when, from what and where."""
    return {"kind": kind, "generated": utc_now(), "commit": source_commit(commit_from), "simulated": simulated, **extra}


# -------------------------------------------------------------------------------------------------------- loading


@dataclass
class Source:
    path: str
    kind: str  # "preflight" or "rehearsal"
    data: dict[str, Any]

    @property
    def meta(self) -> dict[str, Any]:
        meta = self.data.get("meta")
        return meta if isinstance(meta, dict) else {}


def _texts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(i, str) for i in v)


def _number(v: Any) -> bool:
    return v is None or (isinstance(v, int | float) and not isinstance(v, bool))


def _count(v: Any) -> bool:
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_REPORT_ROWS)


def _text(v: Any) -> bool:
    return v is None or isinstance(v, str)


# The fields of a rehearsal report (rehearse.py NodeReport and summary) the page draws, each with the test its value
# must pass and what that is in words: a report of another shape is named in one line instead of breaking the page.
REHEARSAL_NODE_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "ip": (lambda v: isinstance(v, str), "text"),
    "bundles": (_count, "a count"),
    "problems": (_texts, "a list of text"),
    "allreduce_ms": (_number, "a number"),
    "algbw_gbps": (_number, "a number"),
    "busbw_gbps": (_number, "a number"),
    "alltoall_ms": (_number, "a number"),
    "alltoall_busbw_gbps": (_number, "a number"),
    "alltoall_slowest_peer": (_text, "text"),
}


def _alltoall(v: Any) -> bool:
    """The summary's all-to-all patterns (rehearse alltoall_summary): each an object whose drawn fields, where
    present, are of their kind: its per-node rows and slowest pair too."""
    if v is None:
        return True
    if not isinstance(v, list):
        return False
    for pat in v:
        if not isinstance(pat, dict) or _odd_field("", pat, ALLTOALL_FIELDS):
            return False
        for row in pat.get("nodes") or []:
            if not isinstance(row, dict) or _odd_field("", row, ALLTOALL_NODE_FIELDS):
                return False
        pair = pat.get("slowest_pair")
        if pair is not None and (not isinstance(pair, dict) or _odd_field("", pair, ALLTOALL_PAIR_FIELDS)):
            return False
    return True


def _groups(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(g, list) and all(_count(r) for r in g) for g in v)


ALLTOALL_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "pattern": (_text, "text"),
    "size": (_count, "a count"),
    "groups": (_count, "a count"),
    "rehearsed_ranks": (_groups, "lists of ranks"),
    "nodes": (lambda v: isinstance(v, list), "a list"),
}
ALLTOALL_NODE_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "node": (lambda v: isinstance(v, str), "text"),
    "ms": (_number, "a number"),
    "busbw_gbps": (_number, "a number"),
    "peer": (_text, "text"),
}
ALLTOALL_PAIR_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "nodes": (lambda v: isinstance(v, list) and len(v) == 2 and all(isinstance(n, str) for n in v), "two nodes"),
    "ms": (_number, "a number"),
}
REHEARSAL_SUMMARY_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "dies_per_node": (_count, "a count"),
    "error": (_text, "text"),
    "placement": (lambda v: v is None or (isinstance(v, list) and all(isinstance(g, dict) for g in v)), "objects"),
    "alltoall": (_alltoall, "a list of all-to-all patterns"),
}


def _odd_field(where: str, data: dict[str, Any], fields: dict[str, tuple[Callable[[Any], bool], str]]) -> str | None:
    for key, (ok, what) in fields.items():
        if key in data and not ok(data[key]):
            return f"{where}.{key} is {type(data[key]).__name__} {str(data[key])[:40]!r}, expected {what}"
    return None


def classify(path: str, data: Any) -> Source:
    if not isinstance(data, dict):
        raise ReportError(f"{path}: not a JSON object; fix: give a preflight or rehearsal report")
    for key in ("rows", "nodes"):
        if isinstance(data.get(key), list) and len(data[key]) > MAX_REPORT_ROWS:
            raise ReportError(
                f"{path}: {len(data[key])} {key}, more than the page draws ({MAX_REPORT_ROWS}); "
                "fix: give one site's report"
            )
    if isinstance(data.get("rows"), list):
        if data.get("schema") != SCHEMA:
            raise ReportError(
                f"{path}: a preflight report of schema {data.get('schema', 1)!r}, not {SCHEMA} (written before its "
                "rows named their dies as entries); fix: run the preflight again (`make preflight`) to write one"
            )
        for i, row in enumerate(data["rows"]):
            if (
                not isinstance(row, dict)
                or not isinstance(row.get("host"), str)
                or not isinstance(row.get("check"), str)
            ):
                raise ReportError(
                    f"{path}: rows[{i}] has no host/check fields; fix: give the preflight JSON written by deploy.yml"
                )
        return Source(path, "preflight", data)
    if isinstance(data.get("summary"), dict) and isinstance(data.get("nodes"), list):
        for i, node in enumerate(data["nodes"]):
            if not isinstance(node, dict) or not isinstance(node.get("node"), str):
                raise ReportError(
                    f"{path}: nodes[{i}] has no node name; fix: give the rehearsal JSON `--rehearse` wrote"
                )
        odd = _odd_field("summary", data["summary"], REHEARSAL_SUMMARY_FIELDS) or next(
            (o for i, n in enumerate(data["nodes"]) if (o := _odd_field(f"nodes[{i}]", n, REHEARSAL_NODE_FIELDS))),
            None,
        )
        if odd:
            raise ReportError(f"{path}: {odd}; fix: give the rehearsal JSON `--rehearse` wrote")
        return Source(path, "rehearsal", data)
    raise ReportError(
        f"{path}: neither a preflight report (with 'rows') nor a rehearsal report (with 'summary' and 'nodes'); "
        "fix: give ansible/.cache/reports/preflight-<inventory>.json or <LOG_DIR>/.../rehearsals/<N>-nodes.json"
    )


def load(paths: Sequence[str | os.PathLike[str]]) -> list[Source]:
    """Every report, checked before anything is written: all problems in one error."""
    if not paths:
        raise ReportError("no report given; fix: name at least one preflight or rehearsal JSON file")
    sources, problems = [], []
    for p in paths:
        name = str(p)
        try:
            size = Path(p).stat().st_size
            if size > MAX_REPORT_BYTES:
                raise ReportError(
                    f"{name}: {size} bytes is not a report (at most {MAX_REPORT_BYTES}); fix: give the report"
                )
            data = json.loads(Path(p).read_text(encoding="utf-8"))
            sources.append(classify(name, data))
        except FileNotFoundError:
            problems.append(f"{name}: no such file; fix: give the path of a saved report")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{name}: unreadable ({exc.__class__.__name__}); fix: check the file's permissions")
        except json.JSONDecodeError as exc:
            problems.append(f"{name}: not JSON (line {exc.lineno}: {exc.msg}); fix: give the report file itself")
        except RecursionError:
            problems.append(f"{name}: JSON nested too deep to be a report; fix: give the report file itself")
        except ReportError as exc:
            problems.append(str(exc))
    if problems:
        raise ReportError("; ".join(problems))
    return sources
