"""What two validations say, side by side: verl's own metric line for each model (the numbers training logs, per data
source) and, from verl's per-sample dump, each model's n and mean with the difference's 95 % confidence interval.

verl 0.8.0's dump (`_write_generations`) holds input, output, gts, score and step per sample, but not the data
source; with `validation_shuffle: False` (its default) the samples come in the validation files' order, val_kwargs.n
repeats of a prompt in a row, minus prompts `filter_overlong_prompts` dropped. So each sample's data source is found
by walking the files' rows alongside, matching the ground truth; when that walk fails the interval is given for all
samples together and the result says why."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CORE = "val-core/"  # verl's process_validation_metrics: val-core/<data source>/<variable>/<stat>
ALL = "all"


def split_key(key: str) -> tuple[str, str, str] | None:
    """`val-core/openai/gsm8k/acc/mean@1` -> (openai/gsm8k, acc, mean@1); the data source may hold slashes."""
    if not key.startswith(CORE):
        return None
    parts = key[len(CORE) :].split("/")
    if len(parts) < 3:
        return None
    return "/".join(parts[:-2]), parts[-2], parts[-1]


def verl_scores(metrics: Path) -> dict[str, float]:
    """The val-core values of the last line verl's file logger wrote (a validation-only run writes one)."""
    last: dict[str, Any] = {}
    for line in metrics.read_text().splitlines():
        if line.strip():
            last = json.loads(line).get("data") or {}
    return {k: float(v) for k, v in last.items() if split_key(k) and isinstance(v, int | float)}


def read_samples(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def val_rows(files: Sequence[str]) -> list[tuple[str, str]]:
    """(data source, ground truth) of every row of the validation files, in verl's order."""
    import pyarrow.parquet as pq

    rows: list[tuple[str, str]] = []
    for f in files:
        table = pq.read_table(f)
        sources = table.column("data_source").to_pylist() if "data_source" in table.column_names else None
        models = table.column("reward_model").to_pylist() if "reward_model" in table.column_names else None
        for i in range(table.num_rows):
            truth = (models[i] or {}).get("ground_truth") if models else None
            rows.append((str(sources[i]) if sources else "unknown", str(truth)))
    return rows


def sources_of(samples: Sequence[dict[str, Any]], rows: Sequence[tuple[str, str]]) -> list[str] | None:
    """Each sample's data source, walking the rows alongside (repeats stay on a row, a dropped row is skipped);
    None when a sample matches no row ahead."""
    out: list[str] = []
    j = 0
    for s in samples:
        truth = str(s.get("gts"))
        while j < len(rows) and rows[j][1] != truth:
            j += 1
        if j == len(rows):
            return None
        out.append(rows[j][0])
    return out


def t975(df: float) -> float:
    """Student's t, two-sided 95 %: exact for 1 and 2 degrees of freedom, Cornish-Fisher's expansion beyond."""
    if df < 1.5:
        return 12.706
    if df < 2.5:
        return 4.303
    z = 1.959964
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


@dataclass(frozen=True)
class Difference:
    data_source: str
    n_base: int
    n_trained: int
    base: float
    trained: float
    difference: float
    low: float | None  # the 95 % interval of the difference; None below two samples a side
    high: float | None
    paired: bool  # the same prompts in the same order: the per-sample differences' interval


def difference(source: str, base: Sequence[float], trained: Sequence[float], paired: bool) -> Difference:
    mb, mt = statistics.fmean(base), statistics.fmean(trained)
    low = high = None
    if paired and len(base) == len(trained) and len(base) >= 2:
        d = [t - b for b, t in zip(base, trained, strict=True)]
        half = t975(len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))
        low, high = mt - mb - half, mt - mb + half
    elif len(base) >= 2 and len(trained) >= 2:  # Welch
        vb, vt = statistics.variance(base) / len(base), statistics.variance(trained) / len(trained)
        se = math.sqrt(vb + vt)
        if se == 0:
            low = high = mt - mb
        else:
            df = (vb + vt) ** 2 / ((vb**2 / (len(base) - 1) if vb else 0) + (vt**2 / (len(trained) - 1) if vt else 0))
            half = t975(df) * se
            low, high = mt - mb - half, mt - mb + half
    paired = paired and len(base) == len(trained)
    return Difference(source, len(base), len(trained), mb, mt, mt - mb, low, high, paired)


def compare_samples(
    base: Sequence[dict[str, Any]], trained: Sequence[dict[str, Any]], rows: Sequence[tuple[str, str]] | None
) -> tuple[list[Difference], str]:
    """The difference for all samples and per data source, and a note ("" when every part was found)."""
    paired = [s.get("input") for s in base] == [s.get("input") for s in trained]
    note = "" if paired else "the two dumps hold other prompts or another order: unpaired (Welch) intervals"
    sb = [float(s.get("score") or 0.0) for s in base]
    st = [float(s.get("score") or 0.0) for s in trained]
    out = [difference(ALL, sb, st, paired)]
    src_b = sources_of(base, rows) if rows is not None else None
    src_t = sources_of(trained, rows) if rows is not None else None
    if src_b is None or src_t is None:
        why = "the validation files could not be read" if rows is None else "no row of the validation files matched"
        return out, "; ".join(x for x in (note, f"per data source: {why}; all samples together only") if x)
    for source in sorted(set(src_b) | set(src_t)):
        b = [x for x, s in zip(sb, src_b, strict=True) if s == source]
        t = [x for x, s in zip(st, src_t, strict=True) if s == source]
        if b and t:
            out.append(difference(source, b, t, paired and src_b == src_t))
    return out, note


def verl_rows(base: dict[str, float], trained: dict[str, float]) -> list[dict[str, Any]]:
    """verl's own per-source numbers for both models, one row per metric either has."""
    rows = []
    for key in sorted(set(base) | set(trained)):
        parts = split_key(key)
        assert parts is not None
        b, t = base.get(key), trained.get(key)
        rows.append(
            {
                "data_source": parts[0],
                "metric": f"{parts[1]}/{parts[2]}",
                "base": b,
                "trained": t,
                "difference": None if b is None or t is None else t - b,
            }
        )
    return rows


def as_dict(diffs: Sequence[Difference]) -> list[dict[str, Any]]:
    return [asdict(d) for d in diffs]


def _num(v: Any, signed: bool = False) -> str:
    if v is None:
        return "-"
    return f"{v:+.4f}" if signed else f"{v:.4f}"


def table(result: dict[str, Any]) -> list[str]:
    """The result as text rows: verl's metrics, then the samples' means with the interval."""
    rows = [["data source", "metric", "base", "trained", "difference", "95% CI", "n"]]
    for r in result.get("verl", []):
        rows.append([r["data_source"], r["metric"], _num(r["base"]), _num(r["trained"]), _num(r["difference"], True)])
        rows[-1] += ["", ""]
    for d in result.get("samples", []):
        ci = "-" if d["low"] is None else f"[{_num(d['low'], True)}, {_num(d['high'], True)}]"
        n = str(d["n_base"]) if d["n_base"] == d["n_trained"] else f"{d['n_base']}/{d['n_trained']}"
        rows.append([d["data_source"], "score (samples)", _num(d["base"]), _num(d["trained"])])
        rows[-1] += [_num(d["difference"], True), ci + (" paired" if d["paired"] else ""), n]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
