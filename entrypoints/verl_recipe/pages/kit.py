"""What the recipe's self-contained HTML pages share: escaping, the page's time and commit, the base style, an atomic
write, and line plots drawn as inline SVG.

Standard library only, like its users: the Ansible controller imports the readiness page (and so this module) from
the checkout without the installed package.
"""

from __future__ import annotations

import datetime
import html
import json
import math
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..contracts import runfiles

IMAGE_RECORD = Path(runfiles.IMAGE_RECORD_DIR) / runfiles.IMAGE_RECORD_FILE

# The frame of both pages: colours, header, cards, sections.
BASE_CSS = """
:root{--ok:#2e9e4f;--fail:#d0312d;--warn:#e0a100;--nodata:#9aa0a6;--untried:#eceff1;--ink:#1f2328;--mute:#59636e;
--line:#d0d7de;--bg:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;font:13px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);
background:var(--bg)}
main{max-width:1240px;margin:0 auto;padding:12px 16px 80px}
header.top{background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px 16px;margin-bottom:12px}
h1{font-size:20px;margin:0 0 4px}
h2{font-size:15px;margin:0 0 8px}
.sim{display:inline-block;background:#6f42c1;color:#fff;border-radius:4px;padding:1px 8px;font-size:13px;
vertical-align:middle;margin-left:8px}
.meta{color:var(--mute);font-size:12px;overflow-wrap:anywhere}
.meta td{padding:0 12px 0 0;vertical-align:top}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px 16px;margin-bottom:12px;
overflow-x:auto}
.cards{display:flex;flex-wrap:wrap;gap:8px;margin-top:8px}
.card{border:1px solid var(--line);border-radius:6px;padding:4px 10px;font-size:13px;background:#fff}
.card b{font-size:16px}
.card.fail{border-color:var(--fail);color:var(--fail)}
.card.warn{border-color:var(--warn)}
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def source_commit(start: str | Path | None = None) -> str:
    """The commit the reporting code came from: `git describe` of the working tree, else the image record's
    vcs_ref (set by the image build), else "unknown"."""
    where = Path(start) if start else Path(__file__).resolve().parent
    try:
        proc = subprocess.run(
            ["git", "-C", str(where), "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        if proc.returncode == 0 and proc.stdout.strip():
            return proc.stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        ref = json.loads(IMAGE_RECORD.read_text(encoding="utf-8")).get("meta", {}).get("vcs_ref", "")
    except (OSError, ValueError, AttributeError):
        ref = ""
    return str(ref) if ref else "unknown"


def write_atomic(dest: Path, text: str) -> Path:
    """Write through a temporary file in the same folder and rename it: a reader (a browser refreshing the page
    while the run rewrites it) sees the old page or the new one, never half of one.

    Never writes through a link planted in the folder: the temporary file is created new under a name no one can
    foresee (O_EXCL: it follows no symlink), and the rename replaces a symlink at `dest` itself, not what it points
    to. Raises OSError (IsADirectoryError for a folder at `dest`), and leaves no temporary file behind."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the page from the other accounts that read the run folder
        os.replace(tmp, dest)
    except BaseException:
        os.unlink(tmp)
        raise
    return dest


# ----------------------------------------------------------------------------------------------------- SVG plots

PLOT_CSS = """
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:12px}
figure.plot{margin:0;border:1px solid var(--line);border-radius:6px;padding:6px 8px;background:#fff}
figure.plot figcaption{font-size:13px;font-weight:600}
figure.plot .sub{font-size:11px;color:var(--mute);font-weight:400}
svg.chart{display:block;width:100%;height:auto}
svg.chart text{font-size:11px;fill:var(--mute)}
svg.chart .axis{stroke:#8c959f;stroke-width:1}
svg.chart .grid{stroke:#eaeef2;stroke-width:1}
svg.chart polyline{fill:none;stroke-width:1.8}
svg.chart .alert{stroke:var(--fail);stroke-width:1.2;stroke-dasharray:4 3}
svg.chart circle.alert-at{fill:var(--fail);stroke:#fff;stroke-width:1}
svg.chart .pt{stroke:none}
.keys{display:flex;flex-wrap:wrap;gap:10px;font-size:11px;color:var(--mute)}
.keys i{display:inline-block;width:12px;height:3px;vertical-align:3px;margin-right:4px}
"""
COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d755d", "#e45756", "#72b7b2", "#eeca3b")
MAX_PLOT_POINTS = 1500  # per series: a browser draws this many at once; longer runs are thinned evenly


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]  # (x, y), finite values only


@dataclass
class Mark:
    """A vertical line at x (an alert at its step), with a dot at y when the value is known."""

    x: float
    label: str
    y: float | None = None


@dataclass
class Plot:
    id: str
    title: str
    unit: str
    series: list[Series]
    marks: list[Mark] = field(default_factory=list)
    note: str = ""


def finite(value: Any) -> float | None:
    """A plottable number: int or float, not bool, not NaN or inf (None for anything else)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def thin(points: Sequence[tuple[float, float]], limit: int = MAX_PLOT_POINTS) -> list[tuple[float, float]]:
    """At most `limit` points spread evenly, the first and the last kept."""
    if len(points) <= limit:
        return list(points)
    stride = (len(points) - 1) / (limit - 1)
    return [points[round(i * stride)] for i in range(limit)]


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step + 1e-9) + 1)]


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 10000 or abs(v) < 0.01:
        return f"{v:.2g}"
    return f"{v:.4g}"


def svg_plot(plot: Plot, width: int = 440, height: int = 200) -> str:
    """One line plot as a <figure> with inline SVG: a polyline and a point per value for each series, the alert
    marks, axes with a few ticks. Data attributes name what is drawn (the tests count them)."""
    left, right, top, bottom = 52, 10, 8, 26
    xs = [x for s in plot.series for x, _ in s.points] + [m.x for m in plot.marks]
    ys = [y for s in plot.series for _, y in s.points] + [m.y for m in plot.marks if m.y is not None]
    npts = sum(len(s.points) for s in plot.series)
    head = (
        f'<figure class="plot" id="{esc(plot.id)}" data-points="{npts}" data-marks="{len(plot.marks)}">'
        f'<figcaption>{esc(plot.title)} <span class="sub">{esc(plot.unit)}</span></figcaption>'
    )
    if not xs or not ys:
        return head + '<p class="note">no values of this metric in the stream</p></figure>'
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    if y1 == y0:
        pad = abs(y0) * 0.1 or 1.0
        y0, y1 = y0 - pad, y1 + pad
    else:
        pad = (y1 - y0) * 0.06
        y0, y1 = y0 - pad, y1 + pad
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + (y1 - y) / (y1 - y0) * ph

    out = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{esc(plot.title)}">']
    for t in _ticks(y0, y1):
        out.append(
            f'<line class="grid" x1="{left}" x2="{width - right}" y1="{py(t):.1f}" y2="{py(t):.1f}"/>'
            f'<text x="{left - 4}" y="{py(t) + 4:.1f}" text-anchor="end">{esc(_fmt(t))}</text>'
        )
    for t in _ticks(x0, x1, 5):
        if float(t).is_integer() or x1 - x0 < 5:
            out.append(f'<text x="{px(t):.1f}" y="{height - 8}" text-anchor="middle">{esc(_fmt(t))}</text>')
    out.append(
        f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}"/>'
        f'<line class="axis" x1="{left}" x2="{width - right}" y1="{top + ph}" y2="{top + ph}"/>'
    )
    for i, s in enumerate(plot.series):
        colour = COLOURS[i % len(COLOURS)]
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
        out.append(
            f'<g class="series" data-series="{esc(s.name)}" data-n="{len(s.points)}">'
            f'<polyline points="{coords}" stroke="{colour}"/>'
        )
        if len(s.points) <= 200:  # dots for a short run; a long one is a line
            out += [
                f'<circle class="pt" cx="{px(x):.1f}" cy="{py(y):.1f}" r="2" fill="{colour}">'
                f"<title>{esc(s.name)} step {_fmt(x)}: {esc(_fmt(y))}</title></circle>"
                for x, y in s.points
            ]
        out.append("</g>")
    for m in plot.marks:
        out.append(
            f'<g class="mark" data-step="{_fmt(m.x)}"><line class="alert" x1="{px(m.x):.1f}" x2="{px(m.x):.1f}" '
            f'y1="{top}" y2="{top + ph}"><title>{esc(m.label)}</title></line>'
        )
        if m.y is not None:
            out.append(
                f'<circle class="alert-at" cx="{px(m.x):.1f}" cy="{py(m.y):.1f}" r="4">'
                f"<title>{esc(m.label)}</title></circle>"
            )
        out.append("</g>")
    out.append("</svg>")
    if len(plot.series) > 1:
        out.append(
            '<div class="keys">'
            + "".join(
                f'<span><i style="background:{COLOURS[i % len(COLOURS)]}"></i>{esc(s.name)}</span>'
                for i, s in enumerate(plot.series)
            )
            + "</div>"
        )
    if plot.note:
        out.append(f'<p class="note">{esc(plot.note)}</p>')
    return head + "".join(out) + "</figure>"
