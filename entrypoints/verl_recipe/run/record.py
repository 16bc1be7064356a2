"""The run directory each launch writes: what ran, with which settings, and where its log goes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import socket
import sys
import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..checks import resume
from ..contracts import checkpoints, runfiles
from ..layers import Resolved
from ..render import Launch, experiment_dir
from .steps import integrity

# verl 0.8.0's "file" logger (verl/utils/tracking.py FileLogger) writes one {"step", "data"} line per step to this
# path; the launcher points it into the run folder.
METRICS_ENV = "VERL_FILE_LOGGER_PATH"
METRICS_FILE = runfiles.METRICS
# What verl prints when trainer.resume_mode=auto finds a checkpoint (trainer/ppo/ray_trainer.py _load_checkpoint).
_RESUMING = re.compile(rb"Resuming from (\S*global_step_(\d+))")


def resumed_step(line: bytes) -> int | None:
    m = _RESUMING.search(line)
    return int(m.group(2)) if m else None


def record_resume(run_dir: Path, step: int) -> None:
    """The step this run resumed from (verl's own line), in settings.json the moment verl says it."""
    path = run_dir / runfiles.SETTINGS
    record = json.loads(path.read_text())
    record["resumed_from_step"] = step
    path.write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")


def new_run_dir(resolved: Resolved, now: float | None = None) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    base = Path(experiment_dir(str(resolved.values["LOG_DIR"]), resolved.values)) / "runs"
    run = base / stamp
    suffix = 1
    while run.exists():  # two launches in the same second get distinct folders
        suffix += 1
        run = base / f"{stamp}-{suffix}"
    return run


def write_run_record(run_dir: Path, launch: Launch, resolved: Resolved, extra_info: dict[str, Any]) -> Path:
    run_dir.mkdir(parents=True, exist_ok=False)
    (run_dir / runfiles.LAUNCH).write_text(launch.to_json())
    settings = {k: {"value": resolved.values[k], "from": resolved.origin.get(k, "?")} for k in sorted(resolved.values)}
    env_origin = {k: resolved.env_origin.get(k, "recipe") for k in sorted(launch.env)}
    record = {
        "recipe": launch.recipe,
        "verl_recipe_version": __version__,
        "host": socket.gethostname(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "settings": settings,
        "env_from": env_origin,
        # Where each worker reads its secrets (secretfiles.py); the contents are in no record.
        "secret_files": {
            k: {"path": v, "from": resolved.secret_origin.get(k, "?")} for k, v in sorted(resolved.secret_files.items())
        },
        "warnings": resolved.warnings,
        "log": str(run_dir / runfiles.LOG),
        # What the memory plan predicted, to compare with a run that later dies of memory (docs/memory.md).
        "memory_estimate": launch.memory,
        "resumed_from_step": None,
        "total_steps": resolved.values.get("TOTAL_TRAINING_STEPS") or None,
        **extra_info,
    }
    (run_dir / runfiles.SETTINGS).write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    (run_dir / runfiles.COMMAND).write_text(
        "#!/usr/bin/env bash\n# The exact launch of this run.\n" + shell_command(launch)
    )
    os.chmod(run_dir / runfiles.COMMAND, 0o755)
    # Node logs live beside the runs (one file per host for the node's life); the run points at them.
    nodes = Path(str(resolved.values["LOG_DIR"])) / runfiles.NODES
    (run_dir / runfiles.NODES).symlink_to(os.path.relpath(nodes, run_dir))
    (run_dir / runfiles.NODE_LOGS_AT_START).write_text(json.dumps(node_log_sizes(nodes), indent=1, sort_keys=True))
    return run_dir


def record_node_log_ends(run_dir: Path) -> Path:
    """Where this run's part of each node log ends, written just before its own diagnosis: a diagnosis made later
    reads the same window and gives the same answer, never a node's later restart or the next run's failure."""
    path = run_dir / runfiles.NODE_LOGS_AT_END
    path.write_text(json.dumps(node_log_sizes(run_dir / runfiles.NODES), indent=1, sort_keys=True))
    return path


def node_log_sizes(nodes: Path) -> dict[str, int]:
    """Each host's node log's size now: where this run's part of it begins, or ends (diagnose reads between)."""
    sizes: dict[str, int] = {}
    try:
        for log in nodes.glob("*.log"):
            with contextlib.suppress(OSError):
                if log.is_file():
                    sizes[log.name] = log.stat().st_size
    except OSError:
        pass  # no node folder yet (a launch outside the cluster): nothing to skip
    return sizes


def write_checkpoint_identity(recipe: str, engine: str, values: dict[str, Any]) -> Path | None:
    """What this launch's checkpoints are written with, beside them (checks/resume.py compares it at the next
    launch); replaced whole, never half-written. A folder that cannot be written is said, and the run goes on: verl
    itself stops on it at its first save."""
    folder = resume.checkpoint_dir(values)
    path = folder / checkpoints.IDENTITY
    tmp = folder / f".{checkpoints.IDENTITY}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(resume.identity(recipe, engine, values), indent=2, sort_keys=True) + "\n")
        tmp.replace(path)
    except OSError as exc:
        print(f"warning: {path} not written ({exc.strerror}): the next resume is not compared", file=sys.stderr)
        return None
    return path


def shell_command(launch: Launch) -> str:
    """The launch as one copy-pasteable shell command."""
    lines = ["env \\"]
    lines += [f"  {k}={shlex.quote(v)} \\" for k, v in sorted(launch.env.items())]
    lines += [f"  {shlex.quote(a)} \\" for a in launch.argv]
    lines[-1] = lines[-1].removesuffix(" \\")
    return "\n".join(lines) + "\n"


def record_lost(run_dir: Path, lost: list[dict[str, Any]]) -> Path:
    """Written the moment the head names a lost node, so the record holds it even if the head goes next."""
    path = run_dir / runfiles.LOST_NODES
    path.write_text(json.dumps(lost, indent=2) + "\n")
    return path


def record_end(
    run_dir: Path,
    exit_code: int,
    lost: list[dict[str, Any]],
    verl_exit_code: int | None = None,
    health_stop: dict[str, Any] | None = None,
    stopped: dict[str, Any] | None = None,
) -> None:
    """`exit_code` (the run's, as the command returned it) and `outcome.json`: how the run ended, which node it
    lost, and how to go on (the next launch resumes from the latest checkpoint: trainer.resume_mode=auto)."""
    (run_dir / runfiles.CODE_FILE).write_text(f"{exit_code}\n")
    outcome: dict[str, Any] = {
        "exit_code": exit_code,
        "ended_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "lost_nodes": lost,
    }
    if verl_exit_code is not None and verl_exit_code != exit_code:
        outcome["verl_exit_code"] = verl_exit_code
    if health_stop is not None:
        # The alert (alerts.json's form) whose rule HEALTH_STOP names: the launcher stopped verl for it.
        outcome["health_stop"] = health_stop
        outcome["next"] = f"{health_stop['line']}; then run the same command: it resumes from the latest checkpoint"
    if stopped is not None:
        # `verl-recipe stop`: who asked and when, the step reached, the checkpoint the same command resumes from
        outcome["stopped"] = stopped
        outcome["next"] = f"run the same command: it resumes from {stopped.get('last_checkpoint') or 'the start'}"
    if lost:
        hosts = ", ".join(f"{x['host']} ({x['ip']})" for x in lost)
        outcome["next"] = (
            f"bring {hosts} back (its Ray node rejoins by itself after a reboot), then run the same command "
            "again: it resumes from the latest checkpoint under CKPT_DIR (trainer.resume_mode=auto)"
        )
    outcome["steps"] = integrity(run_dir)
    (run_dir / runfiles.OUTCOME).write_text(json.dumps(outcome, indent=2) + "\n")
