"""The run page: run_dir/run.html, one self-contained HTML file drawn from a run folder (the readiness page's
sibling). Plots over steps from verl's own metric stream (metrics.jsonl): step time, throughput, reward, response
length and memory, with the alerts of alerts.json marked at their step; the run's identity from settings.json; how it
ended (outcome.json, lost_nodes.json), a failed run's diagnosis.json, and the newest `eval` against the base model.
verl reports memory as the maximum over its ranks; a per-node series is drawn where the stream has one, named
`<memory metric>/<node>`. `write_run_page(run_dir)` is the launcher's entry (after each step and at the end);
`verl-recipe report RUN_DIR` draws it again. Every input is bounded and may be absent or half-written: the page says
what it could not read.
"""

from __future__ import annotations

import argparse
import errno
import stat
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..contracts import metrics as verl_metrics
from ..contracts import runfiles
from ..contracts.records import is_step, load_json, parse_record, read_file
from ..exitcodes import EXIT_BAD_INPUT, EXIT_OK
from ..problems import error
from .eval_section import eval_section
from .kit import (
    BASE_CSS,
    PLOT_CSS,
    Mark,
    Plot,
    Series,
    esc,
    finite,
    source_commit,
    svg_plot,
    thin,
    utc_now,
    write_atomic,
)

RUN_PAGE = runfiles.RUN_PAGE
METRICS = runfiles.METRICS
MAX_METRIC_BYTES = 64 * 2**20  # ~12,000 steps of verl's ~5 KB lines; a longer stream is drawn from its tail
MAX_ROWS = 100_000
MAX_JSON_BYTES = 8 * 2**20
MAX_ALERTS = 500
MAX_LOST = 500
MAX_FINDINGS = 100
MAX_NODE_SERIES = 32  # per-node memory series drawn in one plot
# What a plot draws: a value beyond this (or a step beyond +-MAX_STEP) would break the axes' arithmetic, and one
# nearer 0 than MIN_PLOT_VALUE is drawn as 0 (a float too small to divide by); no metric drawn here comes close.
MAX_PLOT_VALUE = 1e15
MIN_PLOT_VALUE = 1e-12
REFRESH_S = 30  # a page of a run still going reloads itself
# (plot id, title, unit, metric names: the first present is drawn)
PLOTS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("step-time", "Step time", f"s ({verl_metrics.STEP_S})", (verl_metrics.STEP_S,)),
    ("throughput", "Throughput", f"tokens/s ({verl_metrics.THROUGHPUT})", (verl_metrics.THROUGHPUT,)),
    ("reward", "Reward mean", verl_metrics.REWARD, (verl_metrics.REWARD,)),
    ("response-length", "Response length", f"tokens ({verl_metrics.RESPONSE_LENGTH})", (verl_metrics.RESPONSE_LENGTH,)),
)
DEVICE_MEM, HOST_MEM = verl_metrics.DEVICE_MEM, verl_metrics.HOST_MEM
IDENTITY = (
    "DEVICE",
    "NNODES",
    "NDEVICES_PER_NODE",
    "MODEL_PATH",
    "TP",
    "GEN_TP",
    "TRAIN_BATCH_SIZE",
    "ROLLOUT_N",
    "MAX_RESPONSE_LENGTH",
    "LR",
    "TOTAL_TRAINING_STEPS",
    "EXPERIMENT_NAME",
)


# What an exception no run folder should raise says (the fuzz tests fail on it): one line all the same.
BUG = "fix: none in the run folder: this is a bug in verl-recipe, report it with the run folder"


class RunPageError(ValueError):
    """A folder that cannot be drawn; the message is one line naming it and the fix."""


@dataclass
class Run:
    path: Path
    settings: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    outcome: dict[str, Any] | None = None
    alerts: list[dict[str, Any]] = field(default_factory=list)
    diagnosis: dict[str, Any] | None = None
    lost: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what could not be read, said on the page


NOT_READ = object()  # what _json_file returns for a file it could not read (JSON's null is None)


def _json_file(path: Path, notes: list[str]) -> Any:
    """An optional record file's JSON: NOT_READ when absent, or with a note when it is unreadable, not a file or
    half-written."""
    try:
        text = read_file(path, MAX_JSON_BYTES + 1)
    except FileNotFoundError:
        return NOT_READ
    except OSError as exc:  # a folder, a fifo, a symlink loop, no permission
        notes.append(f"{path.name}: not readable: {exc.strerror or exc.__class__.__name__}, not drawn")
        return NOT_READ
    if len(text) > MAX_JSON_BYTES:
        notes.append(f"{path.name}: larger than {MAX_JSON_BYTES} bytes, not drawn")
        return NOT_READ
    try:
        return load_json(text)
    except ValueError as exc:  # not UTF-8, nested too deep, half-written
        notes.append(f"{path.name}: not readable: {exc}, not drawn")
        return NOT_READ


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float)


def _fields_problem(doc: dict[str, Any], keys: Sequence[str], where: str = "") -> str | None:
    for key in keys:
        if not _scalar(doc.get(key)):
            return f'{where}"{key}" is not a single value'
    return None


def _list_problem(doc: Any, what: str, check: Callable[[Any], str | None]) -> str | None:
    """The first entry of the list `doc` that `check` finds a problem with, said as 'entry N: ...'."""
    if not isinstance(doc, list):
        return f"not a list of {what}"
    for i, entry in enumerate(doc):
        problem = check(entry)
        if problem:
            return f"entry {i + 1}: {problem}"
    return None


SETTINGS_FIELDS = ("recipe", "host", "started_utc", "cluster", "standin", "total_steps", "resumed_from_step")
ALERT_FIELDS = ("rule", "metric", "value", "threshold", "step", "time_utc", "line", "stops_run")
FINDING_FIELDS = ("id", "title", "cause", "fix", "prevent", "file", "line", "excerpt")


def settings_problem(doc: Any) -> str | None:
    """What is wrong with settings.json's shape for the page (None: nothing)."""
    if not isinstance(doc, dict):
        return "not a JSON object"
    problem = _fields_problem(doc, SETTINGS_FIELDS)
    entries = doc.get("settings")
    if problem or entries is None:
        return problem
    if not isinstance(entries, dict):
        return '"settings" is not an object of settings'
    for name in ("DEVICE", *IDENTITY):
        if not _scalar(_value(entries.get(name))):
            return f'"settings.{name}" is not a single value'
    return None


def _node_problem(node: Any) -> str | None:
    if isinstance(node, dict):
        return _fields_problem(node, ("host", "ip"))
    return None if _scalar(node) else "not a node (an object with host and ip)"


def outcome_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return "not a JSON object"
    code = doc.get("exit_code")
    if not isinstance(code, int) or isinstance(code, bool):
        return '"exit_code" is not a whole number'
    problem = _fields_problem(doc, ("ended_utc", "next"))
    if problem or doc.get("lost_nodes") is None:
        return problem
    lost = _list_problem(doc["lost_nodes"], "nodes", _node_problem)
    return f'"lost_nodes" {lost}' if lost else None


def _alert_problem(alert: Any) -> str | None:
    if not isinstance(alert, dict):
        return "not an alert object"
    step = alert.get("step")
    if isinstance(step, int) and not isinstance(step, bool) and not is_step(step):
        return '"step" is out of range'
    return _fields_problem(alert, ALERT_FIELDS)


def _finding_problem(finding: Any) -> str | None:
    return _fields_problem(finding, FINDING_FIELDS) if isinstance(finding, dict) else "not a finding object"


def diagnosis_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return "not a JSON object"
    if doc.get("findings") is not None:
        problem = _list_problem(doc["findings"], "findings", _finding_problem)
        if problem:
            return f'"findings" {problem}'
    unknown = doc.get("unknown")
    if unknown is None:
        return None
    if not isinstance(unknown, dict):
        return '"unknown" is not an object'
    logs = unknown.get("logs")
    if not _scalar(unknown.get("last_error_block")) or not (
        _scalar(logs) or (isinstance(logs, list) and all(map(_scalar, logs)))
    ):
        return '"unknown" has a last_error_block or logs that are not text'
    return None


def _record_file(path: Path, notes: list[str], problem_of: Callable[[Any], str | None]) -> Any:
    """A record file of the shape the page draws; one absent is None, one of another shape is set aside with a
    note (None too)."""
    doc = _json_file(path, notes)
    if doc is NOT_READ:
        return None
    problem = problem_of(doc)
    if problem:
        notes.append(f"{path.name}: {problem}, not drawn")
        return None
    return doc


def _capped(items: list[Any], cap: int, name: str, notes: list[str]) -> list[Any]:
    if len(items) > cap:
        notes.append(f"{name}: {len(items)} entries; the first {cap} drawn")
    return items[:cap]


def read_metrics(path: Path, notes: list[str]) -> list[dict[str, Any]]:
    """verl's {"step", "data"} lines, in order; a partial last line and lines that are no record are skipped.

    Bounded whatever the file holds: at most its last MAX_METRIC_BYTES are read, parsed from the end until
    MAX_ROWS steps are found, and each step keeps only the metrics the page draws (a verl line has ~150)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a folder, a fifo (opening it would wait for ever)
            folder = stat.S_ISDIR(info.st_mode)
            raise OSError(errno.EISDIR if folder else errno.EINVAL, "a folder, not a file" if folder else "not a file")
        size = info.st_size
        blob = read_file(path, size + 1) if size <= MAX_METRIC_BYTES else _tail_of(path, size)
    except FileNotFoundError:
        return []
    except OSError as exc:
        notes.append(f"{METRICS}: not readable: {exc.strerror or exc.__class__.__name__}, no step drawn")
        return []
    if size > MAX_METRIC_BYTES:
        notes.append(f"{METRICS}: {size} bytes; the first steps are left out, the last {MAX_METRIC_BYTES} drawn")
    # Lines are what "\n" ends, as the live tail reads them; the last one, without its "\n", may be half-written.
    lines = blob.split(b"\n")[:-1]
    del blob  # held once, as lines
    records: list[dict[str, Any]] = []
    skipped = unread = 0
    for i in range(len(lines) - 1, -1, -1):
        if not (line := lines[i]).strip():
            continue
        if len(records) == MAX_ROWS:
            unread = i + 1
            break
        if (rec := parse_record(line)) is None:
            skipped += 1
        else:
            records.append({"step": rec["step"], "data": _drawn(rec["data"])})
    records.reverse()
    if skipped:
        notes.append(f"{METRICS}: {skipped} line(s) skipped (not a whole {{step, data}} record)")
    if unread:
        notes.append(f"{METRICS}: the last {MAX_ROWS} steps drawn, {unread} earlier line(s) not read")
    return records


def _tail_of(path: Path, size: int) -> bytes:
    """The last MAX_METRIC_BYTES of a regular file, from the first line that starts in them."""
    with path.open("rb") as fh:
        fh.seek(size - MAX_METRIC_BYTES)
        blob = fh.read(MAX_METRIC_BYTES)
    cut = blob.find(b"\n")
    return b"" if cut == -1 else blob[cut + 1 :]  # the first line read is cut


# What the page reads of a step: the plots' metrics, step time for the header, the memory series per node.
DRAWN = frozenset({verl_metrics.STEP_S, *(name for _, _, _, names in PLOTS for name in names), *DEVICE_MEM, *HOST_MEM})
PER_NODE = tuple(f"{name}/" for name in (*DEVICE_MEM, *HOST_MEM))


def _drawn(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k in DRAWN or k.startswith(PER_NODE)}


def load_run(run_dir: str | Path) -> Run:
    """The run folder's files; each one absent, unreadable or of another shape is left out with a note."""
    d = Path(run_dir)
    if not d.is_dir():
        raise RunPageError(f"{d}: not a folder; fix: give a run folder (LOG_DIR/<project>/<experiment>/runs/<stamp>)")
    if not (d / runfiles.SETTINGS).exists() and not (d / METRICS).exists():
        raise RunPageError(f"{d}: no settings.json or {METRICS}; fix: give a run folder a launch wrote")
    run = Run(d)
    run.settings = _record_file(d / runfiles.SETTINGS, run.notes, settings_problem) or {}
    run.records = read_metrics(d / METRICS, run.notes)
    run.outcome = _record_file(d / runfiles.OUTCOME, run.notes, outcome_problem)
    alerts = _record_file(d / runfiles.ALERTS, run.notes, lambda doc: _list_problem(doc, "alerts", _alert_problem))
    run.alerts = _capped(alerts or [], MAX_ALERTS, runfiles.ALERTS, run.notes)
    run.diagnosis = _record_file(d / runfiles.DIAGNOSIS, run.notes, diagnosis_problem)
    if run.diagnosis is not None and run.diagnosis.get("findings"):
        run.diagnosis["findings"] = _capped(run.diagnosis["findings"], MAX_FINDINGS, runfiles.DIAGNOSIS, run.notes)
    lost = _record_file(d / runfiles.LOST_NODES, run.notes, lambda doc: _list_problem(doc, "nodes", _node_problem))
    if lost is None:
        lost = (run.outcome or {}).get("lost_nodes") or []
    run.lost = _capped(lost, MAX_LOST, "lost nodes", run.notes)
    return run


# ------------------------------------------------------------------------------------------------------- model


def plottable(value: Any) -> float | None:
    """A value a plot can draw: finite and at most MAX_PLOT_VALUE either way, a tiny one as 0 (None: not drawn)."""
    v = finite(value)
    if v is None or abs(v) > MAX_PLOT_VALUE:
        return None
    return 0.0 if abs(v) < MIN_PLOT_VALUE else v


def series_of(records: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    pts = []
    for r in records:
        v = plottable(r["data"].get(key))
        if v is not None:
            pts.append((float(r["step"]), v))
    return thin(pts)


def _alert_step(a: dict[str, Any]) -> int | None:
    s = a.get("step")
    return s if is_step(s) else None


def _alert_label(a: dict[str, Any]) -> str:
    return str(a.get("line") or f"{a.get('rule', 'alert')}: {a.get('metric')} = {a.get('value')}")


def plots(run: Run) -> list[Plot]:
    keys = {k for r in run.records for k in r["data"]}
    cpu = str(_values(run).get("DEVICE", "")) == "cpu" or bool(run.settings.get("standin"))
    specs = [(pid, title, unit, names, "") for pid, title, unit, names in PLOTS]
    mem_names = HOST_MEM if cpu else DEVICE_MEM
    mem_title = "Host memory (CPU run)" if cpu else "Device memory"
    specs.append(("memory", mem_title, "GB, highest allocated", mem_names, "mem"))
    if not cpu:
        specs.append(("host-memory", "Host memory", "GB used", HOST_MEM, "mem"))
    out = []
    for pid, title, unit, names, kind in specs:
        key = next((n for n in names if n in keys), names[0])
        per_node = sorted(k for k in keys if kind and k.startswith(key + "/"))
        if per_node:
            series = [Series(k[len(key) + 1 :], series_of(run.records, k)) for k in per_node[:MAX_NODE_SERIES]]
            note = "per node"
            if len(per_node) > MAX_NODE_SERIES:
                note += f" ({len(per_node)} series in the stream; the first {MAX_NODE_SERIES} drawn)"
        else:
            series = [Series(key, series_of(run.records, key))]
            note = "the maximum over ranks, as verl reports it (no per-node series in the stream)" if kind else ""
        metrics = {key, *per_node, *names}
        marks = []
        for a in run.alerts:
            step = _alert_step(a)
            if step is None:
                continue
            y = plottable(a.get("value")) if a.get("metric") in metrics else None
            marks.append(Mark(float(step), _alert_label(a), y))
        out.append(Plot(pid, title, unit, series, marks, note))
    return out


# ------------------------------------------------------------------------------------------------------ render

CSS = (
    BASE_CSS
    + PLOT_CSS
    + """
table.list{border-collapse:collapse;width:100%;font-size:12px;table-layout:fixed}
table.list th,table.list td{border-bottom:1px solid var(--line);padding:3px 6px;text-align:left;vertical-align:top;
overflow-wrap:anywhere}
.finding{border-left:4px solid var(--fail);padding:4px 10px;margin:6px 0}
.finding h3{font-size:14px;margin:0 0 4px}
pre{background:#f6f8fa;border:1px solid var(--line);border-radius:4px;padding:6px;font-size:11px;overflow-x:auto;
white-space:pre-wrap;overflow-wrap:anywhere;max-height:320px}
.note{color:var(--mute);font-size:12px;margin:6px 0 0}
.standin{background:#f3eefc;border:1px solid #6f42c1;border-radius:6px;padding:4px 10px;margin-top:8px}
"""
)


def _value(entry: Any) -> Any:
    return entry.get("value") if isinstance(entry, dict) else entry


def _values(run: Run) -> dict[str, Any]:
    """settings.json's settings, name -> value (an entry is {"value", "from"}, or the bare value)."""
    entries = run.settings.get("settings")
    return {k: _value(v) for k, v in entries.items()} if isinstance(entries, dict) else {}


def _state(run: Run) -> tuple[str, str]:
    if run.outcome is None:
        return "warn", "running (no outcome.json yet)"
    code = run.outcome.get("exit_code")
    stopped, restart = run.outcome.get("stopped"), run.outcome.get("restart")
    if isinstance(stopped, dict):
        return "warn", f"stopped by {stopped.get('by', '?')} at step {stopped.get('at_step')}: exit code {code}"
    if isinstance(restart, dict) and restart.get("restarting"):
        return "warn", f"restarted by the head: exit code {code}; {restart.get('why', '')}"
    return ("ok", "ended: exit code 0") if code == 0 else ("fail", f"failed: exit code {code}")


def header(run: Run) -> str:
    s = run.settings
    values = _values(run)
    recipe = s.get("recipe") or "recipe not recorded"
    title = f"Run: {recipe}" + (f" / {values['EXPERIMENT_NAME']}" if values.get("EXPERIMENT_NAME") else "")
    sim = '<span class="sim">SIMULATED cluster</span>' if s.get("standin") else ""
    rows = [
        ("run folder", str(run.path)),
        ("host", s.get("host", "not recorded")),
        ("started", s.get("started_utc", "not recorded")),
        ("ended", (run.outcome or {}).get("ended_utc", "not yet")),
        ("cluster", s.get("cluster", "not recorded")),
        ("resumed from step", s.get("resumed_from_step")),
        ("page made", f"{utc_now()} from commit {source_commit()}"),
    ]
    rows += [(k, values[k]) for k in IDENTITY if k in values]
    meta = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in rows if v is not None)
    st, said = _state(run)
    steps = [r["step"] for r in run.records]
    total = s.get("total_steps") or values.get("TOTAL_TRAINING_STEPS")
    secs = [v for r in run.records if (v := finite(r["data"].get(verl_metrics.STEP_S))) is not None]
    cards = [(st, f"<b>{esc(said)}</b>")]
    cards.append(("ok", f"step <b>{steps[-1] if steps else 0}</b>" + (f" of {esc(total)}" if total else "")))
    if secs:
        cards.append(("ok", f"median step <b>{statistics.median(secs):.1f}</b> s"))
    cards.append(("fail" if run.alerts else "ok", f"<b>{len(run.alerts)}</b> alerts"))
    if run.lost:
        cards.append(("fail", f"<b>{len(run.lost)}</b> nodes lost"))
    card_html = '<div class="cards">' + "".join(f'<div class="card {c}">{t}</div>' for c, t in cards) + "</div>"
    standin = f'<p class="standin" id="standin">{esc(s["standin"])}</p>' if s.get("standin") else ""
    nxt = (run.outcome or {}).get("next")
    nxt_html = f'<p class="note" id="next">next: {esc(nxt)}</p>' if nxt else ""
    return (
        f'<header class="top"><h1>{esc(title)}{sim}</h1><table class="meta" id="meta">{meta}</table>'
        f"{card_html}{standin}{nxt_html}</header>"
    )


def alerts_section(run: Run) -> str:
    if not run.alerts:
        return '<section id="alerts"><h2>Alerts</h2><p>None raised.</p></section>'
    cols = ("step", "rule", "metric", "value", "threshold", "stops run", "alert")
    head = "".join(f"<th>{c}</th>" for c in cols)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{esc(x)}</td>"
            for x in (
                a.get("step", "-"),
                a.get("rule", ""),
                a.get("metric", ""),
                a.get("value", ""),
                a.get("threshold", ""),
                "yes" if a.get("stops_run") else "no",
                _alert_label(a),
            )
        )
        + "</tr>"
        for a in run.alerts
    )
    return (
        f'<section id="alerts"><h2>Alerts ({len(run.alerts)}), marked on the plots at their step</h2>'
        f'<table class="list"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>'
    )


def diagnosis_section(run: Run) -> str:
    failed = run.outcome is not None and run.outcome.get("exit_code") != 0
    if run.diagnosis is None:
        if not failed:
            return ""
        return (
            '<section id="diagnosis"><h2>Diagnosis</h2><p>No diagnosis.json in the run folder; fix: run '
            f"<code>verl-recipe diagnose {esc(run.path)}</code></p></section>"
        )
    out = ['<section id="diagnosis"><h2>Diagnosis</h2>']
    findings = [f for f in run.diagnosis.get("findings") or [] if isinstance(f, dict)]
    for f in findings:
        where = f"{f.get('file', '')}:{f.get('line', '')}" if f.get("file") else ""
        out.append(
            f'<div class="finding" data-id="{esc(f.get("id", ""))}"><h3>{esc(f.get("title", f.get("id", "")))}</h3>'
            f"<p><b>cause</b>: {esc(f.get('cause', ''))}</p><p><b>fix</b>: {esc(f.get('fix', ''))}</p>"
            f"<p><b>next time</b>: {esc(f.get('prevent', ''))}</p>"
            + (f'<p class="note">{esc(where)}</p>' if where else "")
            + (f"<pre>{esc(f['excerpt'])}</pre>" if f.get("excerpt") else "")
            + "</div>"
        )
    unknown = run.diagnosis.get("unknown")
    if isinstance(unknown, dict):
        out.append("<p>No known failure signature matched. The last error block:</p>")
        out.append(f'<pre id="last-error">{esc(unknown.get("last_error_block", ""))}</pre>')
        logs = unknown.get("logs")
        if logs:
            out.append(
                f'<p class="note">logs: {esc(", ".join(map(str, logs)) if isinstance(logs, list) else logs)}</p>'
            )
    if not findings and not isinstance(unknown, dict):
        out.append("<p>No finding.</p>")
    out.append("</section>")
    return "".join(out)


def lost_section(run: Run) -> str:
    if not run.lost:
        return ""
    items = "".join(
        f"<li>{esc(n.get('host', '?'))} ({esc(n.get('ip', '?'))})</li>" if isinstance(n, dict) else f"<li>{esc(n)}</li>"
        for n in run.lost
    )
    return f'<section id="lost"><h2>Nodes lost</h2><ul>{items}</ul></section>'


def render(run: Run) -> str:
    figs = "".join(svg_plot(p) for p in plots(run))
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in run.notes)
    body = (
        header(run)
        + diagnosis_section(run)
        + lost_section(run)
        + eval_section(run.path)
        + f'<section id="plots"><h2>Over steps ({len(run.records)} steps in {METRICS})</h2>'
        + f'<div class="plots">{figs}</div>{notes}</section>'
        + alerts_section(run)
    )
    refresh = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if run.outcome is None else ""
    title = f"Run {run.settings.get('recipe', '')} {run.path.name}".strip()
    page = (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width,initial-scale=1">{refresh}'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body><main>{body}</main></body></html>\n"
    )
    # A lone surrogate from a JSON file ("\\ud800") cannot be written as UTF-8: shown escaped instead.
    return page.encode("utf-8", "backslashreplace").decode("utf-8")


def write_run_page(run_dir: Path) -> Path:
    """Draw run_dir/run.html from the run folder (atomically: temp file + rename) and return its path.

    Raises RunPageError for a folder that is no run folder, OSError when the page cannot be written."""
    run = load_run(run_dir)
    return write_atomic(Path(run_dir) / RUN_PAGE, render(run))


def is_run_dir(arg: str) -> bool:
    p = Path(arg)
    return p.is_dir() and ((p / METRICS).exists() or (p / runfiles.SETTINGS).exists())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="verl-recipe report", description="Write RUN_DIR/run.html, the run page, from a run folder."
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run folder (LOG_DIR/<project>/<experiment>/runs/<stamp>)")
    ns = parser.parse_args(argv)
    try:
        dest = write_run_page(Path(ns.run_dir))
    except RunPageError as exc:
        error(exc)
        return EXIT_BAD_INPUT
    except OSError as exc:
        dest = Path(ns.run_dir) / RUN_PAGE
        fix = f"move the folder {RUN_PAGE} out of the run folder" if dest.is_dir() else "make the run folder writable"
        error(f"cannot write {dest}: {exc.strerror or exc}; fix: {fix}")
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - no run folder should get here (the fuzz tests look): one line still
        error(f"{ns.run_dir}: the page could not be drawn ({type(exc).__name__}): {BUG}")
        return EXIT_BAD_INPUT
    print(f"run page: {dest.resolve().as_uri()}")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
