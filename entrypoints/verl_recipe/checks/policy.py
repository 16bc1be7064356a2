"""Settings that fix upstream defects (project policy, no rule id): absolute shared paths, plain names, trackers
that have what they need, the vLLM #42995 workaround, and HEALTH_STOP naming known rules."""

from __future__ import annotations

from collections.abc import Mapping

from ..contracts.alerts import alert_problems
from ..contracts.health_rules import ALL, RULES, threshold_problems, unknown_stop_rules
from ..render import experiment_dir
from ..workarounds import mm_cache_rule_active
from .context import Context

# Linux limits a path's single name to NAME_MAX bytes and a whole path to PATH_MAX; the run record's own part
# (runs/<stamp>-N/settings.json) must fit below the experiment directory too.
NAME_MAX = 255
PATH_MAX = 4096
RECORD_TAIL = len("/runs/20260101T000000Z-99/settings.json")

SUPPORTED_LOGGERS = (
    "console",
    "tensorboard",
    "file",
    "wandb",
    "mlflow",
    "swanlab",
    "vemlp_wandb",
    "clearml",
    "trackio",
)
# A tracker is only allowed when what it needs is present: an air-gapped cluster without a key must not fail late.
TRACKER_NEEDS: dict[str, tuple[tuple[str, ...], str]] = {
    "wandb": (("WANDB_API_KEY", "WANDB_MODE"), "name WANDB_API_KEY in the site's secret_files (or WANDB_MODE=offline)"),
    "swanlab": (
        ("SWANLAB_API_KEY", "SWANLAB_MODE"),
        "name SWANLAB_API_KEY in the site's secret_files (or SWANLAB_MODE=local)",
    ),
    "mlflow": (("MLFLOW_TRACKING_URI",), "export MLFLOW_TRACKING_URI (its default is a node-local /tmp file)"),
    "vemlp_wandb": (
        ("VOLC_ACCESS_KEY_ID",),
        "name VOLC_ACCESS_KEY_ID and VOLC_SECRET_ACCESS_KEY in the site's secret_files",
    ),
    "clearml": (
        ("CLEARML_API_ACCESS_KEY", "CLEARML_CONFIG_FILE"),
        "name CLEARML_API_ACCESS_KEY in the site's secret_files",
    ),
}


def check(
    ctx: Context,
    environ: Mapping[str, str],
    env_overrides: Mapping[str, str],
    secret_names: tuple[str, ...] = (),
) -> None:
    absolute_paths(ctx)
    plain_names(ctx)
    path_lengths(ctx)
    trackers(ctx, {**environ, **env_overrides, **dict.fromkeys(secret_names, "(a secret file)")})
    mm_cache(ctx)
    health_stop(ctx)
    no_checkpoint(ctx)


def no_checkpoint(ctx: Context) -> None:
    """SAVE_FREQ=-1 (a smoke rung: nothing to keep) leaves a restart nothing to resume from: it would train again
    from step 1, so the restart policy must be off."""
    values = ctx.values
    if values.get("SAVE_FREQ") == -1 and int(values.get("RESTARTS") or 0) > 0:
        ctx.add(
            f"SAVE_FREQ=-1 with RESTARTS={values['RESTARTS']}",
            "a run that saves no checkpoint cannot be restarted from one",
            "set RESTARTS=0, or SAVE_FREQ >= 1",
        )


def health_stop(ctx: Context) -> None:
    wrong = unknown_stop_rules(ctx.values.get("HEALTH_STOP") or ())
    if wrong:
        ctx.add(
            f"HEALTH_STOP={','.join(ctx.values['HEALTH_STOP'])}",
            f"{', '.join(wrong)} names no health rule",
            f"use some of {', '.join(RULES)}, or {ALL}",
        )
    # what the thresholds' and the alert settings' own domains cannot say (contracts/health_rules.py, alerts.py)
    for subject, what, fix in threshold_problems(ctx.values) + alert_problems(ctx.values):
        ctx.add(subject, what, fix)


def absolute_paths(ctx: Context) -> None:
    values = ctx.values
    for name in ("CKPT_DIR", "LOG_DIR", "MODEL_PATH"):
        value = str(values.get(name) or "")
        if not value.startswith("/"):
            what = (
                (
                    "must be absolute on shared storage: the trainer may run on any node and would not find "
                    "the checkpoint tracker after a restart"
                )
                if name != "MODEL_PATH"
                else "must be an absolute local path: nothing is downloaded at launch (a hub id needs network)"
            )
            ctx.add(f"{name}={value}", what, f"set {name} to an absolute path under the shared storage mount")
    for name in ("TRAIN_FILES", "VAL_FILES"):
        for path in values.get(name) or []:
            if not path.startswith("/"):
                ctx.add(f"{name}={path}", "must be an absolute path on shared storage", f"use an absolute {name}")
        if not values.get(name):
            ctx.add(f"{name}=", "is empty", f"set {name} to the parquet file(s)")


def plain_names(ctx: Context) -> None:
    """Each name is one folder of the checkpoint and run-record paths (CKPT_DIR/PROJECT/EXPERIMENT)."""
    for name in ("PROJECT_NAME", "EXPERIMENT_NAME"):
        value = str(ctx.values.get(name) or "")
        if not value or "/" in value or value.strip() != value or value in (".", "..") or not value.isprintable():
            ctx.add(
                f"{name}={value[:80]!r}",
                "must be a non-empty printable name without '/' or surrounding spaces, and not '.' or '..'",
                f"set {name} to a plain name",
            )
        elif len(value.encode()) > NAME_MAX:
            ctx.add(
                f"{name}={value[:40]!r}...",
                f"is {len(value.encode())} bytes, longer than a file name may be ({NAME_MAX})",
                f"set {name} to a name of at most {NAME_MAX} bytes",
            )


def path_lengths(ctx: Context) -> None:
    """Every path a launch creates or reads fits the file system's limits (the run record is written first)."""
    values = ctx.values
    paths = [(name, str(values.get(name) or "")) for name in ("MODEL_PATH", "CKPT_DIR", "LOG_DIR")]
    paths += [(name, str(p)) for name in ("TRAIN_FILES", "VAL_FILES") for p in values.get(name) or []]
    names = [str(values.get(n) or "") for n in ("PROJECT_NAME", "EXPERIMENT_NAME")]
    names_ok = all(0 < len(n.encode()) <= NAME_MAX for n in names)
    for name, path in paths:
        size = len(path.encode())
        if names_ok and name == "CKPT_DIR":
            size = len(experiment_dir(path, values).encode())
        elif names_ok and name == "LOG_DIR":
            size = len(experiment_dir(path, values).encode()) + RECORD_TAIL
        long_part = next((part for part in path.split("/") if len(part.encode()) > NAME_MAX), None)
        if long_part is not None:
            ctx.add(
                f"{name}={path[:60]}...",
                f"has a folder or file name of {len(long_part.encode())} bytes (at most {NAME_MAX})",
                f"shorten that part of {name}",
            )
        elif size >= PATH_MAX:
            also = ", PROJECT_NAME or EXPERIMENT_NAME" if name in ("CKPT_DIR", "LOG_DIR") else ""
            ctx.add(
                f"{name}={path[:60]}...",
                f"gives paths of {size} bytes, at least the file system's limit of {PATH_MAX}",
                f"shorten {name}{also}",
            )


# verl's file logger writes the run record's metrics.jsonl, which the progress line, the health rules, the run page,
# compare and diagnose read: without it a run goes unobserved.
OBSERVED_BY = "file"


def trackers(ctx: Context, env: Mapping[str, str]) -> None:
    chosen = ctx.values["LOGGER"]
    if OBSERVED_BY not in chosen:
        ctx.add(
            f"LOGGER={','.join(chosen)}",
            f"has no '{OBSERVED_BY}': verl would write no metrics.jsonl, so the progress line, health rules, run "
            "page, compare and diagnose would see nothing",
            f"keep '{OBSERVED_BY}' in LOGGER (e.g. LOGGER=console,tensorboard,{OBSERVED_BY})",
        )
    for logger in chosen:
        if logger not in SUPPORTED_LOGGERS:
            ctx.add(
                f"LOGGER={','.join(chosen)}",
                f"'{logger}' is not a verl 0.8.0 tracker",
                f"use some of {', '.join(SUPPORTED_LOGGERS)}",
            )
        elif logger in TRACKER_NEEDS:
            keys, fix = TRACKER_NEEDS[logger]
            if not any(env.get(k) for k in keys):
                ctx.add(
                    f"LOGGER={','.join(chosen)}",
                    f"'{logger}' is chosen but {keys[0]} is not set, so it would fail or hang on an air-gapped cluster",
                    f"{fix}, or drop {logger} from LOGGER",
                )


def mm_cache(ctx: Context) -> None:
    values = ctx.values
    cache_gb = values["MM_PROCESSOR_CACHE_GB"]
    if (
        isinstance(cache_gb, int)
        and cache_gb > 0
        and values["DEVICE"] == "npu"
        and mm_cache_rule_active(str(values["DEVICE"]))
        and not values["FORCE_MM_CACHE"]
    ):
        ctx.add(
            f"MM_PROCESSOR_CACHE_GB={cache_gb}",
            "the pinned vLLM clears its receiver-side multimodal cache on "
            "sleep/wake and then asserts on a re-used hash (vllm-project/vllm#42995, fixed by #43001, "
            "not in the pinned vLLM)",
            "keep MM_PROCESSOR_CACHE_GB=0, or set FORCE_MM_CACHE=true to accept the crash risk",
        )
