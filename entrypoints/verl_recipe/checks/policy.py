"""Settings that fix upstream defects (project policy, no rule id): absolute shared paths, plain names, trackers
that have what they need, and the vLLM #42995 workaround."""

from __future__ import annotations

from collections.abc import Mapping

from ..workarounds import mm_cache_rule_active
from .context import Context

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
    "wandb": (("WANDB_API_KEY", "WANDB_MODE"), "export WANDB_API_KEY (or WANDB_MODE=offline)"),
    "swanlab": (("SWANLAB_API_KEY", "SWANLAB_MODE"), "export SWANLAB_API_KEY (or SWANLAB_MODE=local)"),
    "mlflow": (("MLFLOW_TRACKING_URI",), "export MLFLOW_TRACKING_URI (its default is a node-local /tmp file)"),
    "vemlp_wandb": (("VOLC_ACCESS_KEY_ID",), "export VOLC_ACCESS_KEY_ID and VOLC_SECRET_ACCESS_KEY"),
    "clearml": (("CLEARML_API_ACCESS_KEY", "CLEARML_CONFIG_FILE"), "export CLEARML_API_ACCESS_KEY"),
}


def check(ctx: Context, environ: Mapping[str, str], env_overrides: Mapping[str, str]) -> None:
    absolute_paths(ctx)
    plain_names(ctx)
    trackers(ctx, {**environ, **env_overrides})
    mm_cache(ctx)


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
    for name in ("PROJECT_NAME", "EXPERIMENT_NAME"):
        value = str(ctx.values.get(name) or "")
        if not value or "/" in value or value.strip() != value:
            ctx.add(
                f"{name}={value!r}",
                "must be a non-empty name without '/' or surrounding spaces",
                f"set {name} to a plain name",
            )


def trackers(ctx: Context, env: Mapping[str, str]) -> None:
    chosen = ctx.values["LOGGER"]
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
        and mm_cache_rule_active()
        and not values["FORCE_MM_CACHE"]
    ):
        ctx.add(
            f"MM_PROCESSOR_CACHE_GB={cache_gb}",
            "the pinned vLLM clears its receiver-side multimodal cache on "
            "sleep/wake and then asserts on a re-used hash (vllm-project/vllm#42995, fixed by #43001, "
            "not in the pinned vLLM)",
            "keep MM_PROCESSOR_CACHE_GB=0, or set FORCE_MM_CACHE=true to accept the crash risk",
        )
