"""Score the base model and the trained one, each by a validation-only run of verl with the training run's own
launch (launches.py), one after the other on the same cluster; then the comparison (score.py) into the run folder's
eval/<stamp>-step<N>/eval.json, the run page and the terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks.problem import Problem
from ..contracts import checkpoints, runfiles
from ..exitcodes import EXIT_FAILED, EXIT_OK
from . import score
from .launches import BASE, GENERATIONS, LOG, TRAINED, Subject, eval_launch


@dataclass(frozen=True)
class Plan:
    run_dir: Path
    argv: list[str]
    env: dict[str, str]
    values: dict[str, Any]
    subjects: tuple[Subject, Subject]
    out: Path
    val_files: list[str]


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def plan(run_dir: Path, step: int | None, model: Path | None, val_files: list[str] | None) -> Plan | Problem:
    """What to score, from the run folder: its launch, its base model, its save (or `model`, an export)."""
    launch = _json(run_dir / runfiles.LAUNCH)
    settings = _json(run_dir / runfiles.SETTINGS)
    if not isinstance(launch, dict) or not isinstance(settings, dict) or "settings" not in settings:
        return Problem(str(run_dir), f"has no readable {runfiles.LAUNCH} and {runfiles.SETTINGS}", "name another run")
    values = {k: v.get("value") for k, v in settings["settings"].items() if isinstance(v, dict)}
    base = Subject(BASE, str(values.get("MODEL_PATH", "")))
    if model is not None:
        if not (model / "config.json").is_file():
            return Problem(str(model), "has no config.json: not a Hugging Face folder", "give an export's folder")
        trained, tag = Subject(TRAINED, str(model)), "model"
    else:
        from ..export.source import checkpoint_folder, locate

        folder = checkpoint_folder(run_dir)
        src = folder if isinstance(folder, Problem) else locate(folder, step)
        if isinstance(src, Problem):
            return src
        save = src.folder / checkpoints.step_dir(src.step)
        trained, tag = Subject(TRAINED, base.model_path, save=str(save)), f"step{src.step}"
    out = run_dir / runfiles.EVAL_DIR / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{tag}"
    files = list(val_files or values.get("VAL_FILES") or [])
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        return Problem(missing[0], "does not exist", "give validation files that exist on shared storage")
    return Plan(run_dir, list(launch["argv"]), dict(launch["env"]), values, (base, trained), out, files)


def validate_one(p: Plan, subject: Subject, show: bool) -> int:
    """verl's validation of one model; its output in <out>/<label>/verl.log."""
    folder = p.out / subject.label
    folder.mkdir(parents=True)
    argv, env = eval_launch(p.argv, p.env, subject, folder, p.val_files if p.val_files else None)
    what = subject.save or subject.model_path
    log_path = folder / LOG
    print(f"eval: {subject.label}: verl's validation of {what}; its output: {log_path}", file=sys.stderr, flush=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        for chunk in iter(proc.stdout.readline, b""):
            log.write(chunk)
            if show:
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
        return proc.wait()


def result_of(p: Plan, by: str) -> tuple[dict[str, Any], list[str]]:
    """The comparison of the two validations p.out holds, and what could not be read (each a line)."""
    notes: list[str] = []
    scored: dict[str, tuple[dict[str, float], list[dict[str, Any]]]] = {}
    for s in p.subjects:
        folder = p.out / s.label
        metrics = score.verl_scores(folder / "metrics.jsonl")
        samples = score.read_samples(folder / GENERATIONS / f"{s.step}.jsonl")
        scored[s.label] = (metrics, samples)
    try:
        rows: list[tuple[str, str]] | None = score.val_rows(p.val_files)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        rows = None
        notes.append(f"the validation files were not read for data sources ({type(exc).__name__})")
    diffs, note = score.compare_samples(scored[BASE][1], scored[TRAINED][1], rows)
    if note:
        notes.append(note)
    base, trained = p.subjects
    result = {
        "run": str(p.run_dir),
        "by": by,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "base": {"model_path": base.model_path},
        "trained": {"model_path": trained.model_path, "save": trained.save, "step": trained.step},
        "val_files": p.val_files,
        "verl": score.verl_rows(scored[BASE][0], scored[TRAINED][0]),
        "samples": score.as_dict(diffs),
        "notes": notes,
    }
    return result, notes


def evaluate(p: Plan, by: str, show: bool = False) -> int:
    for subject in p.subjects:
        rc = validate_one(p, subject, show)
        if rc:
            log = p.out / subject.label / LOG
            tail = log.read_bytes().decode(errors="replace").splitlines()[-20:]
            sys.stderr.write("".join(f"  {line}\n" for line in tail))
            print(
                f"error: eval: verl's validation of the {subject.label} model exited {rc}; fix: read {log}",
                file=sys.stderr,
            )
            return EXIT_FAILED
    try:
        result, notes = result_of(p, by)
    except (OSError, ValueError) as exc:
        print(
            f"error: eval: {p.out}: verl's validation wrote no readable result ({exc}); fix: read the verl.log files",
            file=sys.stderr,
        )
        return EXIT_FAILED
    (p.out / runfiles.EVAL_RESULT).write_text(json.dumps(result, indent=2) + "\n")
    print("\n".join(score.table(result)))
    for n in notes:
        print(f"note: eval: {n}", file=sys.stderr)
    from ..run.launcher import refresh_run_page

    page = refresh_run_page(p.run_dir)
    print(f"eval: {p.out / runfiles.EVAL_RESULT}" + (f"; run page: {page}" if page else ""), file=sys.stderr)
    return EXIT_OK
