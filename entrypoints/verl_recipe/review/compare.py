"""`verl-recipe compare RUN --baseline RUN_OR_FILE`: a finished (or running) run against a baseline, as a table.

The checks and their defaults follow verl-ascend-recipe's nightly check (github.com/verl-project/verl-ascend-recipe,
baseline/check_npu.py): steps 5-14, device memory at most 1 GB above the baseline, throughput at most 5 % below,
step time at most 5 % above, reward mean within +-0.05, rollout/train probability difference within +-5 %.
Differences from it, on purpose: memory is the peak over the window (the anchor takes the last step); the window is
clipped to the steps both sides have (a short run still compares, and says which steps it used); a metric that
neither side logs is an error only when verl always logs it (the probability difference needs
actor_rollout_ref.rollout.calculate_log_probs=True); values that are NaN, inf or null are left out of the means.

Numbers come from verl's own metric stream, metrics.jsonl in the run record (metricstream.py reads it).
A baseline is a run folder or a file written by `--save-baseline FILE` (what it holds: baseline_document;
docs/compare.md describes it).
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import stat
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..contracts import metrics as verl_metrics
from ..contracts import runfiles
from ..contracts.records import MAX_LINE_BYTES, finite_number, is_step, load_json, parse_record, read_file
from ..exitcodes import EXIT_BAD_INPUT, EXIT_OK, EXIT_REGRESSION
from ..problems import error, one_line
from ..run.record import METRICS_FILE

BASELINE_FORMAT = "verl-recipe-baseline/1"
MAX_STREAM_BYTES = 2**31  # ~400,000 steps of verl's ~5 KB lines; the steps after are left out (the window is early)
MAX_FILE_BYTES = 64 * 2**20  # settings.json, a baseline file: a few KB as written
WINDOW = (5, 14)  # the steps compared, both ends included: past the first steps' warm-up and graph capture
# Steps kept besides the window's (~200 bytes each): a short run compares every step; a stream of millions of
# steps keeps the window's and the first MAX_KEPT_STEPS others, and says how many it left out.
MAX_KEPT_STEPS = 100_000

# The defaults of the thresholds (each a flag of the command).
MEMORY_RISE_GB = 1.0  # peak device memory: this run may use at most this much more (using less never fails)
THROUGHPUT_DROP_PCT = 5.0  # perf/throughput: at most this much lower (faster never fails)
STEP_TIME_RISE_PCT = 5.0  # timing_s/step: at most this much longer (shorter never fails)
REWARD_SHIFT = 0.05  # critic/rewards/mean: at most this far, either way
PROBS_DIFF_CHANGE_PCT = 5.0  # training/rollout_probs_diff_mean: at most this much, either way

# What an exception no input should raise says (the fuzz tests fail on it): one line all the same.
BUG = "fix: none in the run folder: this is a bug in verl-recipe, report it with the run folder"
BAD_RUN_FIX = "fix: give a run folder (LOG_DIR/<project>/<experiment>/runs/<stamp>) that holds metrics.jsonl"
BAD_BASELINE_FIX = "fix: give a run folder or a file written by `verl-recipe compare RUN --save-baseline FILE`"


class CompareError(Exception):
    """Bad input: the message is one line naming the path and the fix."""


@dataclass(frozen=True)
class MetricRule:
    label: str
    keys: tuple[str, ...]  # verl's names, in order of preference: the first one both sides have is compared
    peak: bool  # the highest value over the window, else the mean
    rule: str  # "rise" (absolute), "rise_pct", "drop_pct", "shift" (absolute, either way), "shift_pct"
    limit: float
    always_logged: bool  # verl logs it every step: absent from both sides is an error, not a skipped row


def checks(
    memory_gb: float = MEMORY_RISE_GB,
    throughput_pct: float = THROUGHPUT_DROP_PCT,
    step_time_pct: float = STEP_TIME_RISE_PCT,
    reward: float = REWARD_SHIFT,
    probs_pct: float = PROBS_DIFF_CHANGE_PCT,
) -> list[MetricRule]:
    # Names as verl 0.8.0 writes them: the memory keys come from workers/engine_workers.py (prefixed "actor/" by
    # the trainer; the bare name is older verl's, which the anchor also accepts); host RAM is the fallback where the
    # device figures are absent. Throughput: trainer/ppo/metric_utils.py compute_throughout_metrics; step time and
    # reward: ray_trainer.py and metric_utils.py; probability difference: utils/debug/metrics.py.
    memory_keys = (*reversed(verl_metrics.DEVICE_MEM), *reversed(verl_metrics.HOST_MEM))
    return [
        MetricRule("peak memory (GB)", memory_keys, True, "rise", memory_gb, True),
        MetricRule("throughput (tokens/s/device)", (verl_metrics.THROUGHPUT,), False, "drop_pct", throughput_pct, True),
        MetricRule("step time (s)", (verl_metrics.STEP_S,), False, "rise_pct", step_time_pct, True),
        MetricRule("reward mean", (verl_metrics.REWARD,), False, "shift", reward, True),
        MetricRule("rollout/train probs diff", (verl_metrics.PROBS_DIFF,), False, "shift_pct", probs_pct, False),
    ]


# Every metric name a check reads: a step keeps only these of verl's ~150 (a million steps stay small).
COMPARED = tuple(dict.fromkeys(key for check in checks() for key in check.keys))


def _finite(value: Any) -> float | None:
    return finite_number(value)  # None for null (orjson's NaN), NaN, inf, an int beyond a float, or not a number


def _shown(text: str) -> str:
    """A name read from a file, safe to print: one line, and lone surrogates (JSON's "\\ud800") escaped."""
    return one_line(text.encode("utf-8", "backslashreplace").decode("utf-8"))


def read_stream(path: Path, window: tuple[int, int] = WINDOW) -> tuple[dict[int, dict[str, float]], int]:
    """Each step's finite numbers of the metrics compare checks (COMPARED), and how many steps were left out; a
    half-written last line is left out, and a step written twice keeps its last line. Lines are read as
    metricstream.parse_record reads them (lines that are no record are left out), at most MAX_STREAM_BYTES, in
    pieces: a line longer than MAX_LINE_BYTES (no verl step is) is skipped without being held. The steps of
    `window` are always kept, others up to MAX_KEPT_STEPS in all: memory stays bounded whatever the file holds."""
    steps: dict[int, dict[str, float]] = {}
    left_out = 0
    lo, hi = window
    try:
        for line in stream_lines(path, MAX_STREAM_BYTES):
            rec = parse_record(line)
            if rec is None:
                continue
            step = rec["step"]
            if len(steps) >= MAX_KEPT_STEPS and not lo <= step <= hi and step not in steps:
                left_out += 1
                continue
            data = rec["data"]
            steps[step] = {k: v for k in COMPARED if (v := _finite(data.get(k))) is not None}
    except OSError as exc:
        raise CompareError(f"{path}: cannot be read ({exc.strerror}); {BAD_RUN_FIX}") from exc
    if not steps:
        raise CompareError(f"{path}: no step written yet (verl writes one line per finished step); {BAD_RUN_FIX}")
    return steps, left_out


def stream_lines(path: Path, limit: int, chunk: int = 4 * 2**20) -> Iterator[bytes]:
    """The whole lines ("\\n"-ended) of a regular file's first `limit` bytes, each at most MAX_LINE_BYTES long
    (longer ones are skipped to their end). Raises OSError for a folder, a fifo (opened without waiting) or a
    file that cannot be read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        rest, overlong, left = b"", False, limit
        while left > 0 and (piece := os.read(fd, min(chunk, left))):
            left -= len(piece)
            if overlong:
                end = piece.find(b"\n")
                if end == -1:
                    continue
                piece, overlong = piece[end + 1 :], False
            *lines, rest = (rest + piece).split(b"\n")
            yield from (line for line in lines if len(line) <= MAX_LINE_BYTES)
            if len(rest) > MAX_LINE_BYTES:
                rest, overlong = b"", True
    finally:
        os.close(fd)


@dataclass
class Side:
    """One side of the comparison: a run folder's stream, or a saved baseline's figures."""

    name: str
    recipe: str | None
    steps: dict[int, dict[str, float]] | None  # None for a baseline file: only its figures are known
    saved: dict[str, float]  # a baseline file's figures, by verl name
    saved_steps: list[int]
    left_out: int = 0  # lines of steps outside the window beyond MAX_KEPT_STEPS, not read into the comparison


def _recipe_of(run_dir: Path) -> str | None:
    try:
        settings = load_json(read_file(run_dir / runfiles.SETTINGS, MAX_FILE_BYTES))
    except (OSError, ValueError):
        return None  # a folder without a readable settings.json still compares; the table just names no recipe
    recipe = settings.get("recipe") if isinstance(settings, dict) else None
    return _shown(recipe) if isinstance(recipe, str) else None


def load_run(raw: str, window: tuple[int, int] = WINDOW) -> Side:
    path = Path(raw)
    if not raw or not path.is_dir():
        raise CompareError(f"{raw or repr(raw)} is not a folder; {BAD_RUN_FIX}")
    stream = path / METRICS_FILE
    if not stream.exists():
        raise CompareError(
            f"{path} has no {METRICS_FILE} (runs launched before verl-recipe recorded verl's metrics have none); "
            f"{BAD_RUN_FIX}"
        )
    steps, left_out = read_stream(stream, window)
    return Side(str(path), _recipe_of(path), steps, {}, [], left_out)


def load_baseline(raw: str, window: tuple[int, int] = WINDOW) -> Side:
    path = Path(raw)
    if raw and path.is_dir():
        return load_run(raw, window)
    try:
        text = read_file(path, MAX_FILE_BYTES + 1) if raw else b"null"
    except OSError as exc:
        raise CompareError(f"baseline {raw}: cannot be read ({exc.strerror}); {BAD_BASELINE_FIX}") from exc
    if len(text) > MAX_FILE_BYTES:
        raise CompareError(f"baseline {raw}: larger than {MAX_FILE_BYTES} bytes, no baseline file; {BAD_BASELINE_FIX}")
    try:
        doc = load_json(text)
    except ValueError as exc:  # not UTF-8, nested too deep, or no JSON: the reason is the message
        raise CompareError(f"baseline {raw}: {exc}; {BAD_BASELINE_FIX}") from exc
    if not isinstance(doc, dict) or doc.get("format") != BASELINE_FORMAT:
        raise CompareError(f"baseline {raw or repr(raw)}: not a {BASELINE_FORMAT} file; {BAD_BASELINE_FIX}")
    metrics, steps = doc.get("metrics"), doc.get("steps")
    if not isinstance(metrics, dict) or not isinstance(steps, list) or not steps or not all(map(is_step, steps)):
        raise CompareError(
            f"baseline {raw}: its metrics (an object of numbers) or steps (a list of step numbers) are malformed; "
            f"{BAD_BASELINE_FIX}"
        )
    figures = {k: v for k, v in ((k, _finite(v)) for k, v in metrics.items()) if v is not None}
    if not figures:
        raise CompareError(f"baseline {raw}: its metrics hold no finite number; {BAD_BASELINE_FIX}")
    recipe = doc.get("recipe")
    return Side(str(path), _shown(recipe) if isinstance(recipe, str) else None, None, figures, sorted(set(steps)))


def choose_steps(run: dict[int, dict[str, float]], other: list[int], window: tuple[int, int]) -> tuple[list[int], str]:
    """The steps compared: those of the window both sides have; when they share none there (a short run), every
    step they share. The note says so."""
    shared = sorted(set(run) & set(other))
    lo, hi = window
    inside = [s for s in shared if lo <= s <= hi]
    if inside:
        return inside, ""
    if not shared:
        return [], ""
    return shared, f"steps {lo}-{hi} are not in both runs: compared steps {_span(shared)} instead"


def _span(steps: list[int]) -> str:
    """Sorted steps as FIRST-LAST where they run without a gap, else listed."""
    if steps[-1] - steps[0] + 1 == len(steps) and steps == list(range(steps[0], steps[-1] + 1)):
        return f"{steps[0]}-{steps[-1]}" if len(steps) > 1 else str(steps[0])
    return ",".join(map(str, steps))


def figure(steps: dict[int, dict[str, float]], used: list[int], key: str, peak: bool) -> float | None:
    values = [steps[s][key] for s in used if key in steps[s]]
    if not values:
        return None
    if peak:
        return max(values)
    mean = sum(values) / len(values)
    # A sum of values near the float's limit overflows to inf: divided first, the mean stays finite.
    return mean if math.isfinite(mean) else sum(v / len(values) for v in values)


def figures(steps: dict[int, dict[str, float]], used: list[int], all_checks: list[MetricRule]) -> dict[str, float]:
    """Every checked metric's figure over the steps used, by verl name (absent ones left out)."""
    out = {}
    for check in all_checks:
        for key in check.keys:
            value = figure(steps, used, key, check.peak)
            if value is not None:
                out[key] = value
    return out


@dataclass(frozen=True)
class Row:
    label: str
    key: str
    baseline: float | None
    run: float | None
    change: str
    threshold: str
    result: str  # "ok", "FAIL" or "skip"


def _threshold_text(check: MetricRule) -> str:
    return {
        "rise": f"<= +{check.limit:g}",
        "rise_pct": f"<= +{check.limit:g} %",
        "drop_pct": f">= -{check.limit:g} %",
        "shift": f"+-{check.limit:g}",
        "shift_pct": f"+-{check.limit:g} %",
    }[check.rule]


def judge(check: MetricRule, base: float, run: float) -> tuple[str, bool]:
    """The change, as shown, and whether it is within the threshold."""
    diff = run - base
    if check.rule in ("rise", "shift"):
        within = diff <= check.limit if check.rule == "rise" else abs(diff) <= check.limit
        return f"{diff:+.4g}", within
    # Against a baseline of 0, any change is an infinite one.
    pct = diff / abs(base) * 100 if base else (0.0 if run == 0 else math.copysign(math.inf, diff))
    if check.rule == "rise_pct":
        within = pct <= check.limit
    elif check.rule == "drop_pct":
        within = pct >= -check.limit
    else:
        within = abs(pct) <= check.limit
    return f"{pct:+.1f} %", within


def _pick_key(check: MetricRule, has_base: set[str], has_run: set[str]) -> str | None:
    for key in check.keys:
        if key in has_base and key in has_run:
            return key
    for key in check.keys:
        if key in has_base or key in has_run:
            return key
    return None


def compare_sides(
    run: Side, base: Side, window: tuple[int, int], all_checks: list[MetricRule]
) -> tuple[list[Row], str]:
    """The table's rows and a note on the steps used. A metric missing from this run but in the baseline fails
    (it can no longer be checked); one in this run only is skipped (nothing to check it against)."""
    assert run.steps is not None
    base_steps = base.saved_steps if base.steps is None else list(base.steps)
    used, note = choose_steps(run.steps, base_steps, window)
    if base.steps is None and not used:
        # A saved baseline's steps were never reached by this run: compare what this run has in the window
        # anyway (a short run), and say so.
        lo, hi = window
        used = [s for s in sorted(run.steps) if lo <= s <= hi] or sorted(run.steps)
        note = f"this run has none of the baseline's steps {_span(base_steps)}: compared its steps {_span(used)}"
    if not used:
        raise CompareError(
            f"{run.name} (steps {_span(sorted(run.steps))}) and {base.name} (steps {_span(base_steps)}) share no "
            "step; fix: compare runs of the same training (a resumed run starts at step K+1)"
        )
    if base.steps is None and used != base.saved_steps:
        extra = f"the baseline's figures are over its steps {_span(base.saved_steps)}"
        note = f"{note}; {extra}" if note else f"compared steps {_span(used)}; {extra}"

    got_base = base.saved if base.steps is None else figures(base.steps, used, all_checks)
    got_run = figures(run.steps, used, all_checks)
    rows = []
    for check in all_checks:
        key = _pick_key(check, set(got_base), set(got_run))
        threshold = _threshold_text(check)
        if key is None:
            if check.always_logged:
                raise CompareError(
                    f"neither {run.name} nor {base.name} has {' or '.join(check.keys)} in steps {_span(used)}; "
                    "fix: compare runs of verl 0.8.0's trainer, whose metrics.jsonl logs it every step"
                )
            rows.append(Row(check.label, check.keys[0], None, None, "not logged", threshold, "skip"))
            continue
        b, r = got_base.get(key), got_run.get(key)
        if b is None or r is None:
            change = "missing in this run" if r is None else "missing in the baseline"
            rows.append(Row(check.label, key, b, r, change, threshold, "FAIL" if r is None else "skip"))
            continue
        change, within = judge(check, b, r)
        rows.append(Row(check.label, key, b, r, change, threshold, "ok" if within else "FAIL"))
    return rows, note


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def render_table(rows: list[Row]) -> str:
    header = ("metric", "verl name", "baseline", "this run", "change", "threshold", "result")
    body = [(r.label, r.key, _num(r.baseline), _num(r.run), r.change, r.threshold, r.result) for r in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    return "".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() + "\n" for line in [header, *body]
    )


def baseline_document(run: Side, window: tuple[int, int], all_checks: list[MetricRule]) -> dict[str, Any]:
    """What --save-baseline writes: the recipe, the steps, each metric's figure and where it came from."""
    assert run.steps is not None
    used, _note = choose_steps(run.steps, list(run.steps), window)
    metrics = figures(run.steps, used, all_checks)
    return {
        "format": BASELINE_FORMAT,
        "recipe": run.recipe,
        "window": list(window),
        "steps": used,
        "metrics": metrics,
        "peak": sorted({k for c in all_checks if c.peak for k in c.keys} & set(metrics)),
        "source": {"run": str(Path(run.name).resolve()), "saved_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")},
    }


def refuse_unusable(doc: dict[str, Any], run: Side, target: Path, all_checks: list[MetricRule]) -> None:
    """A baseline without a figure for a metric verl always logs is one no compare can use (comparing against it
    is bad input on that metric): refused, and nothing written."""
    for check in all_checks:
        if check.always_logged and not any(key in doc["metrics"] for key in check.keys):
            raise CompareError(
                f"--save-baseline {target}: {run.name} has no finite {' or '.join(check.keys)} in steps "
                f"{_span(doc['steps'])}, so no compare could use the file; fix: save a baseline from a run of verl "
                "0.8.0's trainer, whose metrics.jsonl logs it every step"
            )


def _window(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition("-")
    try:
        window = (int(lo), int(hi)) if sep else (int(lo), int(lo))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not FIRST-LAST (e.g. 5-14)") from None
    if window[0] < 0 or window[0] > window[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: FIRST must be >= 0 and <= LAST (e.g. 5-14)")
    return window


def _limit(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number >= 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="verl-recipe compare",
        description="A run against a baseline (a run folder or a saved baseline file), from verl's metrics.jsonl. "
        f"Exit {EXIT_OK}: every metric within its threshold; {EXIT_REGRESSION}: one crossed it; "
        f"{EXIT_BAD_INPUT}: bad input.",
    )
    p.add_argument("run", metavar="RUN", help="the run folder (LOG_DIR/<project>/<experiment>/runs/<stamp>)")
    p.add_argument("--baseline", metavar="RUN_OR_FILE", help="a run folder, or a file written by --save-baseline")
    p.add_argument("--save-baseline", metavar="FILE", help="write RUN's figures as a baseline file (JSON)")
    p.add_argument("--steps", type=_window, default=WINDOW, help="the steps compared, FIRST-LAST (default 5-14)")
    p.add_argument("--max-memory-rise-gb", type=_limit, default=MEMORY_RISE_GB, help="default %(default)s")
    p.add_argument("--max-throughput-drop", type=_limit, default=THROUGHPUT_DROP_PCT, help="%%, default %(default)s")
    p.add_argument("--max-step-time-rise", type=_limit, default=STEP_TIME_RISE_PCT, help="%%, default %(default)s")
    p.add_argument("--max-reward-shift", type=_limit, default=REWARD_SHIFT, help="default %(default)s")
    p.add_argument(
        "--max-probs-diff-change", type=_limit, default=PROBS_DIFF_CHANGE_PCT, help="%%, default %(default)s"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    if ns.baseline is None and ns.save_baseline is None:
        parser.error("give --baseline RUN_OR_FILE, --save-baseline FILE, or both")
    all_checks = checks(
        ns.max_memory_rise_gb,
        ns.max_throughput_drop,
        ns.max_step_time_rise,
        ns.max_reward_shift,
        ns.max_probs_diff_change,
    )
    try:
        run = load_run(ns.run, ns.steps)
        base = load_baseline(ns.baseline, ns.steps) if ns.baseline is not None else None
        target = Path(ns.save_baseline) if ns.save_baseline is not None else None
        if target is not None and (
            not ns.save_baseline
            or not target.parent.is_dir()
            or target.is_dir()
            or (target.exists() and not target.is_file())  # a fifo: writing it would wait for a reader
        ):
            raise CompareError(
                f"--save-baseline {ns.save_baseline or repr(ns.save_baseline)}: not a file in an existing folder; "
                "fix: name a file, e.g. baselines/train-2b.json, in a folder that exists"
            )
        result = compare_sides(run, base, ns.steps, all_checks) if base is not None else None
        if target is not None:
            doc = baseline_document(run, ns.steps, all_checks)
            refuse_unusable(doc, run, target, all_checks)
            try:
                target.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
            except OSError as exc:
                raise CompareError(
                    f"--save-baseline {target}: cannot be written ({exc.strerror}); fix: name a file you can write"
                ) from exc
    except CompareError as exc:
        error(f"compare: {exc}")
        return EXIT_BAD_INPUT
    except Exception as exc:  # noqa: BLE001 - no input should get here (the fuzz tests look): one line still
        error(f"compare: {ns.run}: {type(exc).__name__} while comparing; {BUG}")
        return EXIT_BAD_INPUT
    for side in (run, base):
        if side is not None and side.left_out:
            lo, hi = ns.steps
            print(
                f"note: {side.name}: {side.left_out} lines of steps outside {lo}-{hi} left out (more than "
                f"{MAX_KEPT_STEPS} steps in its {METRICS_FILE})"
            )
    if target is not None:
        recipe = run.recipe or "recipe unknown"
        print(f"saved: {target} ({recipe}, steps {_span(doc['steps'])}, {len(doc['metrics'])} metrics)")
    if result is None or base is None:
        return EXIT_OK
    rows, note = result
    print(f"compare: {run.name} ({run.recipe or 'recipe unknown'}) against {base.name}")
    if run.recipe != base.recipe:
        print(f"note: the recipes differ: this run {run.recipe or 'unknown'}, the baseline {base.recipe or 'unknown'}")
    if note:
        print(f"note: {note}")
    sys.stdout.write(render_table(rows))
    failed = [r.label for r in rows if r.result == "FAIL"]
    if failed:
        print(f"regression: {', '.join(failed)} crossed the threshold (exit {EXIT_REGRESSION})")
        return EXIT_REGRESSION
    print("ok: every metric within its threshold")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
