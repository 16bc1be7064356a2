"""The run page's evaluation section: the newest `verl-recipe eval` of the run (eval/<stamp>/eval.json), the trained
model beside the base one, as the terminal showed it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..contracts import runfiles
from .kit import esc


def newest_eval(run_dir: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest eval.json of the run that reads as a result (eval folders are named by their UTC stamp)."""
    folder = run_dir / runfiles.EVAL_DIR
    try:
        found = sorted(folder.glob(f"*/{runfiles.EVAL_RESULT}"), reverse=True)
    except OSError:
        return None
    for path in found:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("verl"), list) and isinstance(doc.get("samples"), list):
            return path, doc
    return None


def _num(v: Any, signed: bool = False) -> str:
    if not isinstance(v, int | float) or isinstance(v, bool):
        return "-"
    return f"{v:+.4f}" if signed else f"{v:.4f}"


def _row(cells: list[str]) -> str:
    return "<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>"


def eval_section(run_dir: Path) -> str:
    got = newest_eval(run_dir)
    if got is None:
        return ""
    path, doc = got
    trained: dict[str, Any] = doc["trained"] if isinstance(doc.get("trained"), dict) else {}
    base: dict[str, Any] = doc["base"] if isinstance(doc.get("base"), dict) else {}
    what = trained.get("save") or trained.get("model_path") or "?"
    head = ["data source", "metric", "base", "trained", "difference", "95% CI", "n"]
    rows = []
    for r in doc["verl"]:
        if isinstance(r, dict):
            cells = [str(r.get("data_source")), str(r.get("metric")), _num(r.get("base")), _num(r.get("trained"))]
            rows.append(_row([*cells, _num(r.get("difference"), True), "", ""]))
    for d in doc["samples"]:
        if isinstance(d, dict):
            ci = "-" if d.get("low") is None else f"[{_num(d.get('low'), True)}, {_num(d.get('high'), True)}]"
            cells = [str(d.get("data_source")), "score (samples)", _num(d.get("base")), _num(d.get("trained"))]
            rows.append(_row([*cells, _num(d.get("difference"), True), ci, f"{d.get('n_base')}/{d.get('n_trained')}"]))
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in doc.get("notes") or [] if isinstance(n, str))
    return (
        f'<section id="eval"><h2>Evaluation against the base model</h2><p>{esc(what)} against '
        f"{esc(base.get('model_path', '?'))}, {esc(doc.get('time_utc', ''))} ({esc(path)})</p>"
        f"<table><tr>{''.join(f'<th>{esc(h)}</th>' for h in head)}</tr>{''.join(rows)}</table>{notes}</section>"
    )
