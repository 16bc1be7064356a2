"""`verl-recipe export RUN [--step N] [--out DIR]`: a run's save as a checked Hugging Face folder (export/);
`verl-recipe export --check DIR --base MODEL_PATH`: the checker alone, over any folder (a Megatron actor's
huggingface/, a copy made by hand)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from ..checks.problem import Problem
from ..contracts import checkpoints
from ..exitcodes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from ..problems import print_lines


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="verl-recipe export",
        description="Write a run's save as a Hugging Face folder, checked against the base model (docs/export.md).",
    )
    p.add_argument(
        "run",
        nargs="?",
        help="a run folder, <experiment>/<stamp> or an experiment as `runs` prints them, "
        "or CKPT_DIR/<project>/<experiment>",
    )
    p.add_argument("--step", type=int, default=None, help="the save's step (default: the newest complete one)")
    p.add_argument("--out", type=Path, default=None, help="where (default: <experiment folder>/export/global_step_N)")
    p.add_argument("--log-dir", type=Path, action="append", help="LOG_DIR (default: every recipe's, from the site)")
    p.add_argument("--check", type=Path, default=None, metavar="DIR", help="only check DIR against --base")
    p.add_argument("--base", type=Path, default=None, help="the base model (MODEL_PATH) of --check")
    return p


def _folder(name: str, log_dirs: list[Path] | None) -> Path | Problem:
    path = Path(name)
    if (path / checkpoints.IDENTITY).is_file():
        return path
    from ..export.source import checkpoint_folder
    from ..run.lifecycle import default_log_dirs, resolve_run

    dirs = log_dirs or default_log_dirs()
    run_dir = resolve_run(name, dirs)
    if run_dir is None:
        return Problem(
            name,
            f"is neither a run under {', '.join(map(str, dirs))} nor a checkpoint folder",
            "verl-recipe runs lists the runs",
        )
    return checkpoint_folder(run_dir)


def main(argv: Sequence[str]) -> int:
    ns = parser().parse_args(list(argv))
    from ..export.check import check_export

    if ns.check is not None:
        if ns.base is None:
            print_lines([str(Problem("--check", "needs --base MODEL_PATH", "name the base model"))])
            return EXIT_BAD_INPUT
        report = check_export(ns.check, ns.base, again="export it again")
        print_lines([str(p) for p in report.problems] + [f"note: export: {n}" for n in report.notes])
        if report.ok:
            print(f"checked: {ns.check} against {ns.base}")
        return EXIT_OK if report.ok else EXIT_FAILED
    if not ns.run:
        print_lines([str(Problem("RUN", "is missing", "give a run, an experiment or a checkpoint folder"))])
        return EXIT_BAD_INPUT
    from ..export.source import locate
    from ..export.write import export
    from ..run.lifecycle import who

    folder = _folder(ns.run, ns.log_dir)
    src = folder if isinstance(folder, Problem) else locate(folder, ns.step)
    if isinstance(src, Problem):
        print_lines([str(src)])
        return EXIT_BAD_INPUT
    out = ns.out or src.folder / checkpoints.EXPORT_DIR / checkpoints.step_dir(src.step)
    print(f"export: step {src.step} of {src.folder} ({src.engine}) into {out}", flush=True)
    problems, built = export(src, out, who())
    notes = [f"note: export: {n}" for n in built.notes] if built else []
    print_lines([str(p) for p in problems] + notes)
    if problems:
        return EXIT_FAILED if built is not None else EXIT_BAD_INPUT
    print(f"exported: {out}")
    return EXIT_OK
