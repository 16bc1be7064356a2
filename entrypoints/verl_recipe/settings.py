"""The one vocabulary of launch settings, and how layers of them are merged.

`SETTINGS` is the one table: each setting's name, type, upstream spellings, domain, engines and the Hydra keys it
drives. Rendering (render.py), the domain checks (checks/domains.py) and README's settings table
(scripts/gen_docs.py) are derived from it.

Precedence, lowest first: recipe defaults < site file < environment < --set KEY=VALUE < extra Hydra overrides.
Upstream's spellings are accepted with a warning naming the canonical one; a key that looks like a typo of a
known one is refused with "did you mean".
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .topology import DIES_PER_NODE

ENGINES = ("megatron", "fsdp")
# A bound, not a measured limit: 64 times the largest recipe's 16 nodes, so that every layout search and check of
# a request stays instant (plan, validate); a cluster beyond it is not one this project has been sized for.
MAX_NODES = 1024


@dataclass(frozen=True)
class Domain:
    """The values a numeric setting may take, and on which engine it is checked. The one place for ranges."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False  # lo itself excluded
    also: tuple[int, ...] = ()  # values outside the range that mean something (FSDP_SIZE=-1)
    engines: tuple[str, ...] = ENGINES
    engine_lo: tuple[tuple[str, float], ...] = ()  # a stricter lower bound on one engine
    why: str = ""  # why the bound exists, shown with a refusal

    def bounds(self, engine: str) -> tuple[float | None, bool]:
        for eng, lo in self.engine_lo:
            if eng == engine:
                return lo, False
        return self.lo, self.lo_open

    def range_text(self, engine: str | None = None) -> str:
        lo, lo_open = self.bounds(engine) if engine else (self.lo, self.lo_open)
        if lo is not None and self.hi is not None:
            text = f"in {'(' if lo_open else '['}{_num(lo)}, {_num(self.hi)}]"
        elif lo is not None:
            text = f"{'>' if lo_open else '>='} {_num(lo)}"
        elif self.hi is not None:
            text = f"<= {_num(self.hi)}"
        else:
            text = "any value"
        if self.also:
            text += " or " + " or ".join(str(a) for a in self.also)
        return text

    def describe(self, kind: str) -> str:
        """One cell of README's settings table."""
        rng = self.range_text()
        text = f"{kind}, any value" if rng == "any value" else f"{kind} {rng}"
        for eng, lo in self.engine_lo:
            text += f" ({eng}: >= {_num(lo)})"
        if self.engines != ENGINES:
            text += f"; {', '.join(self.engines)} only"
        return text

    def violation(self, value: float, engine: str) -> str | None:
        """None when value is in the domain on this engine, else what is wrong."""
        if engine not in self.engines or value in self.also:
            return None
        lo, lo_open = self.bounds(engine)
        if lo is not None and (value < lo or (lo_open and value == lo)):
            return f"must be {self.range_text(engine)}"
        if self.hi is not None and value > self.hi:
            return f"must be {self.range_text(engine)}"
        return None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


# The Hydra group of the actor, rollout and reference workers: most keys a setting drives live under it.
ARR = "actor_rollout_ref"

# How a setting's value is written to its Hydra keys (render.py holds one formatter per form).
AS_IS = "as-is"
DEVICE_NAME = "device name"  # npu stays npu, gpu becomes cuda
FILES = "files"  # one path, or a list of paths
LIST = "list"
EXPERIMENT_DIR = "experiment dir"  # the root joined with PROJECT_NAME/EXPERIMENT_NAME
ZERO_IS_NULL = "zero is null"  # 0 (off) becomes null
WHILE_WORKAROUND = "while the workaround is needed"  # rendered while the pinned vLLM lacks a fix, or when set
# Forms whose Hydra value is the setting's value itself: an extra override of such a key sets the setting back.
ONE_TO_ONE = (AS_IS, FILES, LIST, ZERO_IS_NULL)


@dataclass(frozen=True)
class Setting:
    """One row of the settings table: its name and type, its domain, and the Hydra keys it drives."""

    name: str
    kind: str  # int | float (kept as the text given, checked as a number) | str | bool | path | list
    help: str
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    domain: Domain | None = None
    hydra: tuple[str, ...] = ()  # Hydra keys (with their +/++ prefix), or leaves under each of `roles`
    roles: tuple[str, ...] = ()  # ARR roles the leaves in `hydra` are set for, role by role ("actor", "ref")
    form: str = AS_IS
    not_rendered: str = ""  # why a setting drives no Hydra key (who reads it instead)
    optional: bool = False  # a number the recipe may leave unset
    blocks_layout: bool = True  # a bad whole number stops the layout checks (they would divide by it)

    @property
    def engines(self) -> tuple[str, ...]:
        """The engines this setting is rendered and checked on."""
        return self.domain.engines if self.domain else ENGINES

    def hydra_keys(self, role: str | None = None) -> tuple[str, ...]:
        """Every Hydra key the setting drives, or those of one of its roles."""
        if not self.roles:
            return self.hydra
        roles = self.roles if role is None else (role,)
        return tuple(f"{ARR}.{r}.{leaf}" for r in roles for leaf in self.hydra)


def setting(
    name: str,
    kind: str,
    text: str,
    *aliases: str,
    choices: tuple[str, ...] = (),
    domain: Domain | None = None,
    hydra: tuple[str, ...] = (),
    roles: tuple[str, ...] = (),
    form: str = AS_IS,
    not_rendered: str = "",
    optional: bool = False,
    blocks_layout: bool = True,
) -> Setting:
    return Setting(
        name, kind, text, tuple(aliases), choices, domain, hydra, roles, form, not_rendered, optional, blocks_layout
    )


POS = Domain(lo=1)
MEGATRON_POS = Domain(lo=1, engines=("megatron",))
FSDP_POS = Domain(lo=1, engines=("fsdp",))
MEMORY_PLAN_ONLY = "read by the memory plan (memory.py) only"
HEALTH_ONLY = "read by the launcher's health rules (health.py) only"

SETTINGS: tuple[Setting, ...] = (
    # cluster and layout
    setting(
        "DEVICE",
        "str",
        "accelerator family (cpu: the simulated cluster's CPU stand-ins, in verl-recipe:sim only)",
        choices=("npu", "gpu", "cpu"),
        hydra=("trainer.device",),
        form=DEVICE_NAME,
    ),
    setting(
        "NNODES",
        "int",
        "nodes in the Ray cluster",
        "nnodes",
        "NUM_NODES",
        domain=Domain(lo=1, hi=MAX_NODES, why="verl-recipe's bound on a cluster (settings.MAX_NODES)"),
        hydra=("trainer.nnodes",),
    ),
    setting(
        "NDEVICES_PER_NODE",
        "int",
        "dies (NPU) or GPUs per node",
        "n_devices_per_node",
        "N_GPUS_PER_NODE",
        "NPUS_PER_NODE",
        domain=Domain(lo=1, hi=DIES_PER_NODE, why=f"an A3 host has {DIES_PER_NODE} dies"),
        hydra=("trainer.n_gpus_per_node",),
    ),
    setting(
        "TP",
        "int",
        "Megatron tensor parallel size (actor and ref)",
        domain=MEGATRON_POS,
        hydra=("megatron.tensor_model_parallel_size",),
        roles=("actor", "ref"),
    ),
    setting(
        "PP",
        "int",
        "Megatron pipeline parallel size",
        domain=MEGATRON_POS,
        hydra=("megatron.pipeline_model_parallel_size",),
        roles=("actor", "ref"),
    ),
    setting(
        "CP",
        "int",
        "Megatron context parallel size (1 for Qwen3.5's Gated DeltaNet on megatron-core 0.16.0)",
        domain=MEGATRON_POS,
        hydra=("megatron.context_parallel_size",),
        roles=("actor", "ref"),
    ),
    setting(
        "EP",
        "int",
        "Megatron expert parallel size",
        domain=MEGATRON_POS,
        hydra=("megatron.expert_model_parallel_size",),
        roles=("actor", "ref"),
    ),
    setting(
        "ETP",
        "int",
        "Megatron expert tensor parallel size",
        domain=MEGATRON_POS,
        hydra=("megatron.expert_tensor_parallel_size",),
        roles=("actor", "ref"),
    ),
    setting(
        "VPP",
        "int",
        "virtual pipeline stages per PP rank (0 = off)",
        domain=Domain(lo=0, engines=("megatron",)),
        hydra=(f"{ARR}.actor.megatron.virtual_pipeline_model_parallel_size",),
        form=ZERO_IS_NULL,
    ),
    setting(
        "GEN_TP",
        "int",
        "rollout (vLLM) tensor parallel size",
        domain=POS,
        hydra=(f"{ARR}.rollout.tensor_model_parallel_size",),
    ),
    setting(
        "GEN_DP",
        "int",
        "rollout (vLLM) data parallel size per replica",
        domain=POS,
        hydra=(f"{ARR}.rollout.data_parallel_size",),
    ),
    setting(
        "GEN_EP",
        "int",
        "rollout expert parallel size (1, or GEN_TP x GEN_DP)",
        domain=POS,
        hydra=(f"{ARR}.rollout.expert_parallel_size",),
    ),
    setting(
        "FSDP_SIZE",
        "int",
        "FSDP shard group size (-1, or any size >= the world, = shard over the whole world)",
        domain=Domain(lo=1, also=(-1,), engines=("fsdp",)),
        hydra=(f"{ARR}.actor.fsdp_config.fsdp_size",),
    ),
    setting(
        "SP_SIZE",
        "int",
        "Ulysses sequence parallel size (FSDP recipes)",
        domain=FSDP_POS,
        hydra=("fsdp_config.ulysses_sequence_parallel_size",),
        roles=("actor", "ref"),
    ),
    # paths and names
    setting(
        "MODEL_PATH",
        "path",
        "Hugging Face checkpoint directory on shared storage",
        "HF_MODEL_PATH",
        hydra=(f"{ARR}.model.path",),
    ),
    setting(
        "TRAIN_FILES",
        "list",
        "training parquet file(s), comma separated",
        "train_path",
        "train_files",
        "TRAIN_FILE",
        hydra=("data.train_files",),
        form=FILES,
    ),
    setting(
        "VAL_FILES",
        "list",
        "validation parquet file(s), comma separated",
        "test_path",
        "test_files",
        "TEST_FILE",
        "val_files",
        hydra=("data.val_files",),
        form=FILES,
    ),
    # Absolute, on shared storage: the TaskRunner may land on any node after a restart.
    setting(
        "CKPT_DIR",
        "path",
        "absolute checkpoint root on shared storage",
        "save_path",
        "default_local_dir",
        hydra=("trainer.default_local_dir",),
        form=EXPERIMENT_DIR,
    ),
    setting(
        "LOG_DIR",
        "path",
        "absolute root for run records and logs on shared storage",
        not_rendered="the launch environment (TENSORBOARD_DIR) and the run record",
    ),
    setting("PROJECT_NAME", "str", "tracker project name", "project_name", hydra=("trainer.project_name",)),
    setting(
        "EXPERIMENT_NAME",
        "str",
        "tracker experiment name",
        "experiment_name",
        "exp_name",
        hydra=("trainer.experiment_name",),
    ),
    # batch and lengths
    setting(
        "TRAIN_BATCH_SIZE",
        "int",
        "prompts per step (data.train_batch_size)",
        "train_batch_size",
        domain=POS,
        hydra=("data.train_batch_size",),
    ),
    setting(
        "PPO_MINI_BATCH_SIZE",
        "int",
        "prompts per actor update",
        "ppo_mini_batch_size",
        domain=POS,
        hydra=(f"{ARR}.actor.ppo_mini_batch_size",),
    ),
    setting(
        "PPO_MICRO_BATCH_SIZE_PER_GPU",
        "int",
        "sequences per device per micro step",
        domain=POS,
        hydra=(f"{ARR}.actor.ppo_micro_batch_size_per_gpu",),
    ),
    setting(
        "LOG_PROB_MICRO_BATCH_SIZE_PER_GPU",
        "int",
        "sequences per device when computing log-probs",
        domain=POS,
        hydra=("log_prob_micro_batch_size_per_gpu",),
        roles=("rollout", "ref"),
    ),
    setting(
        "PPO_MAX_TOKEN_LEN_PER_GPU",
        "int",
        "token budget per device (log-prob and update); with dynamic batching at least one full sequence",
        domain=MEGATRON_POS,
        hydra=(
            f"{ARR}.actor.ppo_max_token_len_per_gpu",
            f"{ARR}.rollout.log_prob_max_token_len_per_gpu",
            f"{ARR}.ref.log_prob_max_token_len_per_gpu",
        ),
    ),
    setting(
        "ROLLOUT_N",
        "int",
        "responses sampled per prompt (GRPO group size)",
        "n_resp_per_prompt",
        domain=POS,
        hydra=(f"{ARR}.rollout.n",),
    ),
    setting("MAX_PROMPT_LENGTH", "int", "tokens", "max_prompt_length", domain=POS, hydra=("data.max_prompt_length",)),
    setting(
        "MAX_RESPONSE_LENGTH",
        "int",
        "tokens; prompt + response must fit the checkpoint's max_position_embeddings",
        "max_response_length",
        domain=POS,
        hydra=("data.max_response_length",),
    ),
    # training loop
    setting(
        "LR",
        "float",
        "actor learning rate",
        domain=Domain(lo=0, why="Megatron's LR scheduler and torch's optimizers raise on a negative rate"),
        hydra=(f"{ARR}.actor.optim.lr",),
    ),
    setting(
        "TOTAL_EPOCHS",
        "int",
        "epochs",
        domain=Domain(
            lo=0,
            engine_lo=(("megatron", 1),),
            why="Megatron's LR scheduler asserts lr_decay_steps > 0, and 0 epochs give 0 training steps",
        ),
        hydra=("trainer.total_epochs",),
        blocks_layout=False,
    ),
    setting(
        "TOTAL_TRAINING_STEPS",
        "int",
        "stop after this many steps (0 = run TOTAL_EPOCHS)",
        domain=Domain(lo=0),
        hydra=("trainer.total_training_steps",),
        form=ZERO_IS_NULL,
        blocks_layout=False,
    ),
    setting(
        "SAVE_FREQ",
        "int",
        "checkpoint every N steps",
        domain=Domain(lo=1, why="verl saves no checkpoint at all unless SAVE_FREQ > 0"),
        hydra=("trainer.save_freq",),
        blocks_layout=False,
    ),
    setting(
        "TEST_FREQ",
        "int",
        "validate every N steps (<= 0: never, verl's own default is -1)",
        domain=Domain(),
        hydra=("trainer.test_freq",),
        blocks_layout=False,
    ),
    setting("VAL_BEFORE_TRAIN", "bool", "validate before the first step", hydra=("trainer.val_before_train",)),
    setting(
        "RESUME_MODE",
        "str",
        "resume from the latest checkpoint",
        choices=("auto", "disable"),
        hydra=("trainer.resume_mode",),
    ),
    setting(
        "GEN_MEM_UTIL",
        "float",
        "vLLM gpu_memory_utilization: the share of each die's memory the rollout may take",
        domain=Domain(lo=0, hi=1, lo_open=True, why="vLLM takes this share of the die's total memory"),
        hydra=(f"{ARR}.rollout.gpu_memory_utilization",),
    ),
    setting(
        "LOGGER",
        "list",
        "trackers: console, tensorboard, file, wandb, mlflow, swanlab, clearml, trackio",
        hydra=("trainer.logger",),
        form=LIST,
    ),
    # workarounds and cluster
    setting(
        "MM_PROCESSOR_CACHE_GB",
        "int",
        "vLLM multimodal processor cache (0 = the vLLM #42995 workaround)",
        domain=Domain(lo=0),
        hydra=(f"+{ARR}.rollout.engine_kwargs.vllm.mm_processor_cache_gb",),
        form=WHILE_WORKAROUND,
        blocks_layout=False,
    ),
    setting(
        "FORCE_MM_CACHE",
        "bool",
        "allow MM_PROCESSOR_CACHE_GB > 0 on NPU despite vLLM #42995",
        not_rendered="read by validate only (the MM_PROCESSOR_CACHE_GB rule)",
    ),
    # Fail fast when no cluster is reachable instead of silently starting a private one-node cluster.
    setting(
        "RAY_ADDRESS",
        "str",
        "Ray GCS address given to verl ('auto' = the cluster this node joined)",
        hydra=("+ray_kwargs.ray_init.address",),
    ),
    # memory plan (docs/memory.md)
    setting(
        "DEVICE_MEM_GIB",
        "float",
        "memory of one die or GPU in GiB (A3 die: 64); the memory plan refuses layouts above it",
        domain=Domain(lo=0, lo_open=True),
        not_rendered=MEMORY_PLAN_ONLY,
        optional=True,
    ),
    setting(
        "MEMORY_CHECK",
        "str",
        "what a layout over the memory estimate gets: refused, a warning, or one line (scaled: a layout scaled "
        "down for the simulated cluster)",
        choices=("refuse", "warn", "scaled"),
        not_rendered=MEMORY_PLAN_ONLY,
    ),
    setting(
        "HOST_MEM_GIB",
        "float",
        "RAM of one host in GiB, a site setting; 0 = the host estimate is printed but not checked",
        domain=Domain(lo=0),
        not_rendered=MEMORY_PLAN_ONLY,
        optional=True,
    ),
    # health rules on verl's metric stream during a launch (health.py, docs/watch.md)
    setting(
        "HEALTH_MEM_GROWTH_GB",
        "float",
        "alert when device or host memory rises every step of HEALTH_MEM_WINDOW steps by more than this many GB",
        domain=Domain(lo=0, lo_open=True),
        not_rendered=HEALTH_ONLY,
    ),
    setting(
        "HEALTH_MEM_WINDOW",
        "int",
        "steps the memory-growth rule looks back over",
        domain=Domain(lo=2),
        not_rendered=HEALTH_ONLY,
        blocks_layout=False,
    ),
    setting(
        "HEALTH_STEP_TIME_RATIO",
        "float",
        "alert when a step is this many times slower (or throughput this many times lower) than the run's first "
        "steps after warm-up",
        domain=Domain(lo=1, lo_open=True),
        not_rendered=HEALTH_ONLY,
    ),
    setting(
        "HEALTH_STALL_FACTOR",
        "float",
        "alert when no step arrives within this many times the run's median step time",
        domain=Domain(lo=1, lo_open=True),
        not_rendered=HEALTH_ONLY,
    ),
    setting(
        "HEALTH_REWARD_DROP",
        "float",
        "alert when critic/rewards/mean falls this far below its running best",
        domain=Domain(lo=0, lo_open=True),
        not_rendered=HEALTH_ONLY,
    ),
    setting(
        "HEALTH_HOST_MEM_FRACTION",
        "float",
        "alert when host memory in use reaches this share of the host's RAM (Ray's OOM killer acts at 0.95)",
        domain=Domain(lo=0, hi=1, lo_open=True),
        not_rendered=HEALTH_ONLY,
    ),
    setting(
        "HEALTH_STOP",
        "list",
        "health rules that stop the run (exit 5): memory_growth, step_time, throughput, nan, reward_drop, stall, "
        "host_memory, or all",
        not_rendered=HEALTH_ONLY,
    ),
)

BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
ALIASES: dict[str, str] = {a: s.name for s in SETTINGS for a in s.aliases}
ENV_SECTION = "env"  # site-file section / --set prefix for the launch environment ("env.HCCL_BUFFSIZE=400")
RECIPES_SECTION = "recipes"  # site-file section: settings for one recipe only, over the site's own
# Site-file section: NAME -> a root-only file whose content each Ray worker gets as $NAME (secretfiles.py); the
# content never enters a setting, the launch environment, a record or a command line.
SECRET_FILES_SECTION = "secret_files"

# A site file is a few dozen lines of SETTING: value, env and recipes sections (three levels). Anything far
# larger or deeper is not one; refusing it early keeps the YAML composer's recursion and memory out of reach.
SITE_FILE_MAX_BYTES = 1024 * 1024
SITE_FILE_MAX_DEPTH = 8
ENV_VALUE_MAX_CHARS = 32 * 1024  # one exec argument may be at most 128 KiB (Linux MAX_ARG_STRLEN)
INT_MAX_DIGITS = 18  # every whole-number setting fits a signed 64-bit integer, as verl and torch need
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT_TEXT = re.compile(r"[+-]?[0-9]+")  # ASCII digits only: int() also takes other scripts' digits
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # every control character but tab
# Names a secret goes by: any of these words as a part of the name (WANDB_API_KEY, RAY_AUTH_TOKEN, AWS_SECRET_...),
# or the last part ending in one (HFTOKEN, OPENAI_APIKEY). A last part naming where a secret is (…_TOKEN_PATH,
# …_KEY_FILE) or how it is used (…_MODE) is not a secret itself.
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY")
SECRET_SUFFIXES = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY")
NOT_SECRET_LAST = ("PATH", "FILE", "DIR", "MODE")


class SettingsError(ValueError):
    """One problem with a setting, phrased as: the key and value, what is wrong, the fix."""


@dataclass
class Layer:
    """One source of settings, kept so the run record can say where each value came from."""

    source: str
    values: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    secret_files: dict[str, str] = field(default_factory=dict)  # NAME -> path (never the content)


@dataclass
class Resolved:
    values: dict[str, Any]
    origin: dict[str, str]
    env_overrides: dict[str, str]
    env_origin: dict[str, str]
    warnings: list[str]
    secret_files: dict[str, str] = field(default_factory=dict)
    secret_origin: dict[str, str] = field(default_factory=dict)


def secret_looking(name: str) -> bool:
    """Whether an environment variable's name says it carries a secret (SECRET_WORDS)."""
    parts = [p for p in name.upper().split("_") if p]
    if not parts or parts[-1] in NOT_SECRET_LAST:
        return False
    return any(p in SECRET_WORDS for p in parts) or parts[-1].endswith(SECRET_SUFFIXES)


def secret_refusal(name: str, source: str) -> SettingsError:
    return SettingsError(
        f"{source}: {name} looks like a secret and would be written in plain text into the run record "
        f"(launch.json, command.sh) and the driver's command line; fix: put it in a root-only file and name it in "
        f"the site file's {SECRET_FILES_SECTION}: {{{name}: /path/to/file}} (docs/cluster.md, secrets), not as a value"
    )


def env_entry(name: Any, raw: Any, source: str) -> tuple[str, str]:
    """One launch-environment entry checked: a variable name, a one-line scalar value, and no secret."""
    key = str(name)
    if not ENV_NAME.fullmatch(key):
        raise SettingsError(
            f"{source}: {key!r} is not an environment variable name; fix: use letters, digits and '_' only, "
            "not starting with a digit"
        )
    if secret_looking(key):
        raise secret_refusal(key, source)
    if raw is None or isinstance(raw, bool | list | tuple | dict):
        shown = "null" if raw is None else type(raw).__name__
        raise SettingsError(
            f"{source}: {key}={raw!r} is a {shown}, not a text or number; fix: give the value itself, quoted "
            f'if it looks like something else ({key}: "1")'
        )
    if isinstance(raw, float) and (raw != raw or raw in (float("inf"), float("-inf"))):
        raise SettingsError(f"{source}: {key}={raw!r} is not a finite number; fix: give the value as text")
    value = str(raw)
    if _CONTROL.search(value):
        raise SettingsError(f"{source}: {key}={value!r} contains a control character; fix: give a one-line value")
    if len(value) > ENV_VALUE_MAX_CHARS:
        raise SettingsError(
            f"{source}: {key} is {len(value)} characters long; fix: keep it under {ENV_VALUE_MAX_CHARS} "
            "(a launch's exec refuses longer arguments)"
        )
    return key, value


def secret_file_entry(name: Any, raw: Any, source: str) -> tuple[str, str]:
    """One `secret_files` entry checked: a variable name and an absolute path the record may show."""
    key = str(name)
    where = f"{source} ({SECRET_FILES_SECTION}.{key})"
    if not ENV_NAME.fullmatch(key):
        raise SettingsError(
            f"{where}: {key!r} is not an environment variable name; fix: use letters, digits and '_' only"
        )
    path = raw if isinstance(raw, str) else ""
    if not path.startswith("/") or _CONTROL.search(path) or any(c in path for c in ",= \t"):
        raise SettingsError(
            f"{where}: {raw!r} is not an absolute file path; fix: give the path of a root-only file every node "
            "mounts read-only (no spaces, ',' or '=' in it)"
        )
    return key, path


def suggest(word: str, candidates: list[str] | tuple[str, ...]) -> str | None:
    upper = {c.upper(): c for c in candidates}
    hits = difflib.get_close_matches(word.upper(), list(upper), n=1, cutoff=0.75)
    return upper[hits[0]] if hits else None


def canonical_key(key: str, source: str, warnings: list[str]) -> str:
    if key in BY_NAME:
        return key
    if key in ALIASES:
        canon = ALIASES[key]
        warnings.append(f"warning: {source}: '{key}' is upstream's spelling; use '{canon}' (value applied to {canon})")
        return canon
    if key.upper() in BY_NAME:
        canon = key.upper()
        warnings.append(f"warning: {source}: '{key}' read as '{canon}'")
        return canon
    hint = suggest(key[:100], list(BY_NAME) + list(ALIASES))
    if hint is not None:
        hint = ALIASES.get(hint, hint)
    did = f"; did you mean '{hint}'?" if hint else f"; fix: use one of the known settings: {', '.join(sorted(BY_NAME))}"
    raise SettingsError(f"{source}: unknown setting {key[:80]!r}{did}")


def coerce(name: str, raw: Any, source: str) -> Any:
    spec = BY_NAME[name]
    if raw is None:
        # `NAME:` or `NAME: null` in a site file is the line emptied, as `--set NAME=` is: the checks then name it
        raw = ""
    if isinstance(raw, dict) or (isinstance(raw, list | tuple) and spec.kind != "list"):
        raise SettingsError(
            f"{source}: {name} is given a {type(raw).__name__} ({str(raw)[:60]}); fix: give one {spec.kind} value"
        )
    if spec.kind == "int":
        text = str(raw).strip()
        if isinstance(raw, bool) or not _INT_TEXT.fullmatch(text):
            raise SettingsError(f"{source}: {name}={raw!r} is not an integer; fix: give a whole number in ASCII digits")
        if len(text.lstrip("+-")) > INT_MAX_DIGITS:
            raise SettingsError(
                f"{source}: {name}={text[:24]}... has more than {INT_MAX_DIGITS} digits; fix: give a whole number "
                f"of at most {INT_MAX_DIGITS} digits"
            )
        return int(text)
    if spec.kind == "float":
        text = str(raw).strip()
        if isinstance(raw, bool) or not _FLOAT_TEXT.fullmatch(text):
            raise SettingsError(
                f"{source}: {name}={raw!r} is not a number; fix: give a number in ASCII digits such as 1e-6"
            )
        number = float(text)
        if number in (float("inf"), float("-inf")):
            raise SettingsError(f"{source}: {name}={raw!r} is not a finite number; fix: give a number such as 1e-6")
        return text  # kept as written, so the rendered launch shows the user's spelling
    if spec.kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise SettingsError(f"{source}: {name}={raw!r} is not a boolean; fix: use true or false")
    if spec.kind == "list":
        items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
        if any(isinstance(i, list | tuple | dict) or i is None for i in items):
            raise SettingsError(f"{source}: {name}={raw!r} holds a non-text item; fix: give a list of plain values")
        out = [str(i).strip() for i in items if str(i).strip()]
        if any(_CONTROL.search(i) for i in out):
            raise SettingsError(f"{source}: {name}={raw!r} contains a control character; fix: give plain values")
        return out
    value = str(raw).strip()
    if _CONTROL.search(value):
        raise SettingsError(f"{source}: {name}={value!r} contains a control character; fix: give a plain {spec.kind}")
    if spec.choices and value not in spec.choices:
        raise SettingsError(f"{source}: {name}={value!r} is not one of {', '.join(spec.choices)}; fix: use one of them")
    return value


def layer_from_mapping(data: Mapping[str, Any], source: str, warnings: list[str]) -> Layer:
    layer = Layer(source)
    for key, raw in data.items():
        if key == ENV_SECTION:
            if not isinstance(raw, Mapping):
                raise SettingsError(f"{source}: '{ENV_SECTION}' must map variable names to values; fix: NAME: value")
            layer.env.update(env_entry(k, v, f"{source} ({ENV_SECTION})") for k, v in raw.items())
            continue
        if key == SECRET_FILES_SECTION:
            if not isinstance(raw, Mapping):
                raise SettingsError(
                    f"{source}: '{SECRET_FILES_SECTION}' must map variable names to file paths; fix: NAME: /path"
                )
            layer.secret_files.update(secret_file_entry(k, v, source) for k, v in raw.items())
            continue
        name = canonical_key(str(key), source, warnings)
        layer.values[name] = coerce(name, raw, source)
    return layer


def read_site_yaml(path: Path) -> Any:
    """A site file's plain YAML data, or one SettingsError naming the file, what is wrong and the fix."""
    where = f"site file {path}"
    try:
        if not path.is_file():
            raise SettingsError(f"{where} does not exist; fix: pass an existing --site file (or VERL_RECIPE_SITE)")
        size = path.stat().st_size
        if size > SITE_FILE_MAX_BYTES:
            raise SettingsError(f"{where} is {size} bytes; fix: a site file is SETTING: value lines, under 1 MiB")
        raw = path.read_bytes()
    except OSError as exc:
        raise SettingsError(f"{where} cannot be read ({exc.strerror}); fix: pass a readable --site file") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{where}: byte {exc.start} is not UTF-8; fix: save the file as UTF-8") from None
    try:
        # The parser is iterative; only the composer recurses. Depth and aliases are checked on the events first.
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise SettingsError(f"{where}: uses a YAML alias (*name); fix: write the value out")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > SITE_FILE_MAX_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else "?"
                    raise SettingsError(
                        f"{where}: line {line} nests deeper than {SITE_FILE_MAX_DEPTH} levels; fix: a site file "
                        f"holds SETTING: value, {ENV_SECTION}:, {SECRET_FILES_SECTION}: and {RECIPES_SECTION}: only"
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SettingsError(
            f"{where}: not plain YAML ({at}{problem}); fix: write SETTING: value lines, with no tags (!!python/...)"
        ) from None


def layers_from_site_file(path: Path, warnings: list[str], recipe: str | None = None) -> list[Layer]:
    data = read_site_yaml(path) or {}
    if not isinstance(data, dict):
        raise SettingsError(f"site file {path}: expected a mapping of SETTING: value; fix: write SETTING: value lines")
    return site_layers(data, f"site file {path}", warnings, recipe)


def site_layers(data: dict[str, Any], source: str, warnings: list[str], recipe: str | None) -> list[Layer]:
    """A site's settings for every recipe, then its `recipes: {NAME: {...}}` section for this one on top (its own
    layer, so the run record says which part of the site file a value came from)."""
    data = dict(data)
    sections = data.pop(RECIPES_SECTION, None) or {}
    if not isinstance(sections, dict) or not all(isinstance(v, dict) for v in sections.values()):
        raise SettingsError(
            f"{source}: '{RECIPES_SECTION}' must map recipe names to SETTING: value mappings; fix: "
            f"{RECIPES_SECTION}: {{RECIPE: {{SETTING: value}}}}"
        )
    layers = [layer_from_mapping(data, source, warnings)]
    if recipe is not None and recipe in sections:
        layers.append(layer_from_mapping(sections[recipe], f"{source} ({RECIPES_SECTION}.{recipe})", warnings))
    return layers


def layer_from_environ(environ: Mapping[str, str], env_keys: set[str], warnings: list[str]) -> Layer:
    """Canonical names and upstream aliases found in the process environment, plus launch-env overrides."""
    layer = Layer("environment")
    for name in BY_NAME:
        if name in environ:
            layer.values[name] = coerce(name, environ[name], "environment")
    for alias, canon in ALIASES.items():
        if alias in environ and canon not in environ:
            warnings.append(f"warning: environment: '{alias}' is upstream's spelling; use '{canon}'")
            layer.values[canon] = coerce(canon, environ[alias], "environment")
    for key in env_keys:
        if key in environ:
            layer.env[key] = environ[key]
    return layer


def layer_from_sets(pairs: list[str], warnings: list[str]) -> Layer:
    layer = Layer("--set")
    for pair in pairs:
        if "=" not in pair:
            raise SettingsError(f"--set {pair[:80]!r}: expected KEY=VALUE; fix: e.g. --set TP=4")
        key, raw = pair.split("=", 1)
        key = key.strip()
        if key.startswith(ENV_SECTION + "."):
            var, value = env_entry(key[len(ENV_SECTION) + 1 :], raw, f"--set {key}")
            layer.env[var] = value
            continue
        name = canonical_key(key, f"--set {key}", warnings)
        layer.values[name] = coerce(name, raw, f"--set {key}")
    return layer


def merge(layers: list[Layer], warnings: list[str]) -> Resolved:
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    env: dict[str, str] = {}
    env_origin: dict[str, str] = {}
    secrets: dict[str, str] = {}
    secret_origin: dict[str, str] = {}
    for layer in layers:
        for k, v in layer.values.items():
            values[k] = v
            origin[k] = layer.source
        for k, v in layer.env.items():
            env[k] = v
            env_origin[k] = layer.source
        for k, v in layer.secret_files.items():
            secrets[k] = v
            secret_origin[k] = layer.source
    for k in set(env) & set(secrets):
        raise SettingsError(
            f"{env_origin[k]}: {k} is both a launch-environment value and a secret file ({secret_origin[k]}); "
            f"fix: keep it in {SECRET_FILES_SECTION} only"
        )
    return Resolved(values, origin, env, env_origin, warnings, secrets, secret_origin)


def default_site_file(environ: Mapping[str, str] = os.environ) -> Path | None:
    raw = environ.get("VERL_RECIPE_SITE")
    return Path(raw) if raw else None
