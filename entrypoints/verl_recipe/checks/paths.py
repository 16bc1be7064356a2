"""The filesystem behind the path settings: the checkpoint, the data files, the writable output roots."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..models import TINY_STANDIN_KEY, ModelArch, ModelConfigError, arch_from_config, read_config_json
from .problem import Problem

PARQUET_MAGIC = b"PAR1"  # a Parquet file starts and ends with it (Apache Parquet format specification)
WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.safetensors.index.json")
CONFIG_MAX_BYTES = 16 * 1024 * 1024  # a Hugging Face config.json is a few KiB; this is not one


def check_paths(values: dict[str, Any], expected: ModelArch) -> tuple[list[Problem], ModelArch]:
    """Paths exist; MODEL_PATH's config.json (when present) gives the real architecture."""
    problems: list[Problem] = []
    model = expected
    model_path = Path(str(values["MODEL_PATH"]))
    subject = f"MODEL_PATH={model_path}"
    if not model_path.is_dir():
        problems.append(
            Problem(
                subject,
                "is not a directory",
                "copy the Hugging Face checkpoint to shared storage (on a host, `docker compose run --rm "
                "prepare-data <recipe>` checks it) or pass --skip-path-checks to render only",
            )
        )
    else:
        config = model_path / "config.json"
        if not config.is_file():
            problems.append(
                Problem(
                    subject, "has no config.json", "point MODEL_PATH at the checkpoint directory that holds config.json"
                )
            )
        else:
            try:
                if config.stat().st_size > CONFIG_MAX_BYTES:
                    raise ModelConfigError(f"{config}: {config.stat().st_size} bytes is not a model's config.json")
                data = read_config_json(config)
                model, differences = arch_from_config(expected, data)
                if differences and data.get(TINY_STANDIN_KEY) and values.get("DEVICE") == "cpu":
                    differences = []  # the simulated cluster's tiny model: its own numbers go through every rule
                if differences:
                    problems.append(
                        Problem(
                            subject,
                            f"config.json does not describe {expected.name}: " + ", ".join(differences[:4]),
                            "point MODEL_PATH at the model this recipe trains, or use the recipe for this model",
                        )
                    )
            except ModelConfigError as exc:
                problems.append(Problem(subject, str(exc), "re-copy config.json from the checkpoint"))
            except UnicodeDecodeError as exc:
                problems.append(
                    Problem(
                        subject, f"{config}: byte {exc.start} is not UTF-8", "re-copy config.json from the checkpoint"
                    )
                )
            except RecursionError:
                problems.append(
                    Problem(subject, f"{config}: nests too deep to be a model's config", "re-copy config.json")
                )
        if not any(any(model_path.glob(g)) for g in WEIGHT_GLOBS):
            problems.append(
                Problem(subject, "holds no weights (*.safetensors or *.bin)", "finish copying the checkpoint")
            )
    for name in ("TRAIN_FILES", "VAL_FILES"):
        for data_file in values.get(name) or []:
            if data_file.startswith("/") and not Path(data_file).is_file():
                problems.append(
                    Problem(
                        f"{name}={data_file}",
                        "does not exist",
                        "copy the data there (on a host, `docker compose run --rm prepare-data <recipe>` checks it), "
                        "or fix the path",
                    )
                )
            elif data_file.startswith("/") and not is_parquet(Path(data_file)):
                problems.append(
                    Problem(
                        f"{name}={data_file}",
                        "is not a Parquet file (no PAR1 magic at its start and end); verl 0.8.0 reads its data "
                        "with datasets' parquet loader",
                        "convert the data to Parquet (verl's examples/data_preprocess scripts write it), or point at "
                        "the .parquet file",
                    )
                )
    for name in ("CKPT_DIR", "LOG_DIR"):
        root = Path(str(values[name]))
        if not root.is_absolute():
            continue
        existing = root
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
            problems.append(
                Problem(
                    f"{name}={root}",
                    f"is not writable (checked {existing})",
                    "mount the shared storage read-write, or choose a writable path",
                )
            )
    return problems, model


def is_parquet(path: Path) -> bool:
    """Parquet magic at both ends, or the simulated cluster's placeholder (placeholder.py), which nothing reads."""
    from ..placeholder import PLACEHOLDER

    try:
        with path.open("rb") as fh:
            head = fh.read(len(PLACEHOLDER))
            if head == PLACEHOLDER:
                return True
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size < len(PARQUET_MAGIC):
                return False
            fh.seek(size - len(PARQUET_MAGIC))
            tail = fh.read()
    except OSError:
        return False
    return head.startswith(PARQUET_MAGIC) and tail == PARQUET_MAGIC
