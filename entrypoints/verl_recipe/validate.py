"""Every check that can be made before a device is touched. All problems are reported at once.

Rules: megatron-core 0.16.0 (M*), verl 0.8.0 config and runtime asserts (V*), rollout (R*); docs/rules.md lists
each id with the upstream file and lines that enforce it. Each problem names the setting and value, what is wrong,
and a fix.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .memory import ARR, Knobs
from .models import ModelArch, ModelConfigError, arch_from_config, read_config_json
from .recipes import Recipe
from .render import Launch, mm_cache_rule_active
from .settings import BY_NAME, SETTINGS, coerce

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
AGENT_LOOP_WORKERS = 8  # verl's default rollout.agent.num_workers: train_batch_size x n is chunked over them
# Numeric settings a recipe may leave unset (the memory plan then uses the device's default / skips the host).
OPTIONAL_NUMBERS = ("DEVICE_MEM_GIB", "HOST_MEM_GIB")
# Whole-number settings the layout arithmetic does not use: a bad one does not stop the layout checks.
NOT_IN_LAYOUT = ("SAVE_FREQ", "TOTAL_EPOCHS", "TEST_FREQ", "MM_PROCESSOR_CACHE_GB")
PARQUET_MAGIC = b"PAR1"  # a Parquet file starts and ends with it (Apache Parquet format specification)
WEIGHT_GLOBS = ("*.safetensors", "*.bin", "*.safetensors.index.json")


@dataclass(frozen=True)
class Problem:
    subject: str
    what: str
    fix: str

    def __str__(self) -> str:
        return f"error: {self.subject}: {self.what}; fix: {self.fix}"


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _fmt(xs: list[int]) -> str:
    return "{" + ",".join(str(x) for x in xs) + "}"


class Checker:
    def __init__(self, recipe: Recipe, values: dict[str, Any], model: ModelArch, knobs: Knobs | None = None) -> None:
        self.recipe = recipe
        self.v = values
        self.model = model
        self.knobs = knobs
        self.problems: list[Problem] = []

    def add(self, subject: str, what: str, fix: str) -> None:
        self.problems.append(Problem(subject, what, fix))

    def s(self, *names: str) -> str:
        return " ".join(f"{n}={self.v.get(n)}" for n in names)

    # ---- numbers -------------------------------------------------------------------------------------------
    def positive(self) -> bool:
        """Every numeric setting against its domain (settings.py, the one place for ranges)."""
        ok = True
        engine = self.recipe.engine
        for spec in SETTINGS:
            dom = spec.domain
            if dom is None or spec.kind not in ("int", "float") or engine not in dom.engines:
                continue
            value = self.v.get(spec.name)
            if value is None and spec.name in OPTIONAL_NUMBERS:
                continue
            number: float | None
            if spec.kind == "int":
                number = value if isinstance(value, int) and not isinstance(value, bool) else None
            else:
                try:
                    number = float(str(value))
                except ValueError:
                    number = None
            wrong = "is not a number" if number is None else dom.violation(number, engine)
            if wrong is None:
                continue
            why = f" ({dom.why})" if dom.why else ""
            self.add(
                f"{spec.name}={value}",
                f"{wrong} on {engine}{why}",
                f"set {spec.name} {dom.range_text(engine)}",
            )
            if spec.kind == "int" and spec.name not in NOT_IN_LAYOUT:
                ok = False
        return ok

    def lengths(self) -> None:
        """Prompt + response must fit the model's positions; a dynamic token budget must hold one sequence."""
        v, m = self.v, self.model
        seq = int(v["MAX_PROMPT_LENGTH"]) + int(v["MAX_RESPONSE_LENGTH"])
        if seq > m.max_position_embeddings:
            self.add(
                self.s("MAX_PROMPT_LENGTH", "MAX_RESPONSE_LENGTH"),
                f"prompt + response = {seq} tokens exceed the checkpoint's max_position_embeddings "
                f"{m.max_position_embeddings}",
                f"keep MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH <= {m.max_position_embeddings}",
            )
        knobs = self.knobs
        if knobs is None:
            return
        split = int(v["CP"] or 1) if self.recipe.engine == "megatron" else int(v["SP_SIZE"] or 1)
        actor_budget = f"{ARR}.actor.ppo_max_token_len_per_gpu"
        pairs = (
            (f"{ARR}.actor.use_dynamic_bsz", actor_budget, "the actor update"),
            (f"{ARR}.rollout.log_prob_use_dynamic_bsz", f"{ARR}.rollout.log_prob_max_token_len_per_gpu", "log-prob"),
            (f"{ARR}.ref.log_prob_use_dynamic_bsz", f"{ARR}.ref.log_prob_max_token_len_per_gpu", "reference log-prob"),
        )
        for flag, key, what in pairs:
            if not knobs.flag(flag):
                continue
            budget = knobs.num(key, knobs.num(actor_budget, 16384))
            if budget * split < seq:
                name = "PPO_MAX_TOKEN_LEN_PER_GPU" if self.recipe.engine == "megatron" else key
                self.add(
                    f"{name}={budget:g}",
                    f"with dynamic batching, {what} packs at most {budget:g} tokens per device"
                    + (f" (x {split} sequence shards)" if split > 1 else "")
                    + f", less than one full sequence of {seq} (prompt + response); verl asserts on it",
                    f"raise it to at least {math.ceil(seq / split)}",
                )

    @property
    def world(self) -> int:
        return int(self.v["NNODES"]) * int(self.v["NDEVICES_PER_NODE"])

    # ---- Megatron ------------------------------------------------------------------------------------------
    def megatron(self) -> int:
        v, m, w = self.v, self.model, self.world
        tp, pp, cp, ep, etp, vpp = v["TP"], v["PP"], v["CP"], v["EP"], v["ETP"], v["VPP"]
        tp_ok = [
            t
            for t in divisors(m.num_attention_heads)
            if (m.num_kv_heads % t == 0 or t % m.num_kv_heads == 0)
            and (not m.has_gdn or (m.linear_num_key_heads % t == 0 and m.linear_num_value_heads % t == 0))
        ]
        if tp not in tp_ok:
            self.add(
                f"TP={tp}",
                f"{m.name} has {m.num_attention_heads} attention heads, {m.num_kv_heads} KV groups and "
                f"{m.linear_num_key_heads}/{m.linear_num_value_heads} Gated DeltaNet heads; TP must split them "
                "(megatron-core M4-M6)",
                f"use TP in {_fmt(tp_ok)}",
            )
        if m.has_gdn and cp != 1:
            self.add(
                f"CP={cp}",
                "Gated DeltaNet does not support context parallelism in megatron-core 0.16.0 (M7)",
                "set CP=1",
            )
        if w % (tp * pp * cp):
            self.add(
                self.s("TP", "PP", "CP"),
                f"TP x PP x CP = {tp * pp * cp} does not divide the world of {w} devices "
                f"(NNODES={v['NNODES']} x NDEVICES_PER_NODE={v['NDEVICES_PER_NODE']}) (M1)",
                f"choose TP x PP x CP among the divisors of {w}",
            )
        if w % (etp * ep * pp):
            self.add(
                self.s("ETP", "EP", "PP"),
                f"ETP x EP x PP = {etp * ep * pp} does not divide the world of {w} (M2)",
                f"choose EP so that ETP x EP x PP divides {w}",
            )
        if m.num_experts % ep:
            self.add(
                f"EP={ep}",
                f"{m.name} has {m.num_experts} experts, not divisible by EP (M9)",
                f"use EP in {_fmt([d for d in divisors(m.num_experts) if w % (d * etp * pp) == 0][:12])}",
            )
        if m.moe_ffn_hidden_size % etp:
            self.add(
                f"ETP={etp}",
                f"expert FFN width {m.moe_ffn_hidden_size} is not divisible by ETP (M17)",
                "use a power of two ETP",
            )
        if m.num_layers % pp:
            self.add(
                f"PP={pp}",
                f"{m.name} has {m.num_layers} layers, not divisible by PP (M12)",
                f"use PP in {_fmt(divisors(m.num_layers))}",
            )
        elif vpp:
            per_stage = m.num_layers // pp
            if pp == 1:
                self.add(f"VPP={vpp}", "virtual pipeline needs PP > 1 (M15)", "set VPP=0 or PP > 1")
            elif per_stage % vpp:
                self.add(
                    f"VPP={vpp}",
                    f"{per_stage} layers per pipeline stage (layers {m.num_layers} / PP {pp}) are "
                    "not divisible by VPP (M15)",
                    f"use VPP in {_fmt([d for d in divisors(per_stage) if d > 1])}",
                )
        dp = w // (tp * pp * cp) if w % (tp * pp * cp) == 0 else 0
        return dp

    # ---- FSDP ----------------------------------------------------------------------------------------------
    def fsdp(self) -> int:
        v, m, w = self.v, self.model, self.world
        sp, fs = v["SP_SIZE"], v["FSDP_SIZE"]
        if m.num_attention_heads % sp or w % sp:
            self.add(
                f"SP_SIZE={sp}",
                f"Ulysses SP must divide the {m.num_attention_heads} attention heads and the world of {w} (V6)",
                f"use SP_SIZE in {_fmt([d for d in divisors(m.num_attention_heads) if w % d == 0])}",
            )
            return 0
        # verl shards over the whole world when fsdp_size is -1 or >= the world (create_device_mesh).
        if 0 < fs < w and w % fs:
            self.add(
                f"FSDP_SIZE={fs}",
                f"does not divide the world of {w} devices (V6)",
                f"use -1 (or any size >= {w}) or one of {_fmt(divisors(w))}",
            )
        return w // sp

    # ---- batches (verl 0.8.0 validate_config, train_mini_batch, balance_batch, agent loop) ----------------
    def batches(self, dp: int) -> None:
        v = self.v
        tbs, mini, micro, n = (
            v["TRAIN_BATCH_SIZE"],
            v["PPO_MINI_BATCH_SIZE"],
            v["PPO_MICRO_BATCH_SIZE_PER_GPU"],
            v["ROLLOUT_N"],
        )
        w = self.world
        if tbs < mini:
            self.add(
                self.s("TRAIN_BATCH_SIZE", "PPO_MINI_BATCH_SIZE"),
                "the mini batch is larger than the batch (V1)",
                "make PPO_MINI_BATCH_SIZE <= TRAIN_BATCH_SIZE",
            )
        minimal = dp * micro if self.recipe.engine == "megatron" else w
        unit = "data-parallel size" if self.recipe.engine == "megatron" else "world size (verl's FSDP minimum)"
        if (tbs * n) % minimal:
            self.add(
                self.s("TRAIN_BATCH_SIZE", "ROLLOUT_N"),
                f"TRAIN_BATCH_SIZE x ROLLOUT_N = {tbs * n} is not divisible by the {unit} x micro batch = "
                f"{minimal} (DP={dp} at NNODES={v['NNODES']}); verl 0.8.0 stops after start-up or a rollout (V2)",
                f"make TRAIN_BATCH_SIZE a multiple of {minimal // _gcd(minimal, n)}",
            )
        if (mini * n) % dp:
            self.add(
                self.s("PPO_MINI_BATCH_SIZE", "ROLLOUT_N"),
                f"PPO_MINI_BATCH_SIZE x ROLLOUT_N = {mini * n} is not divisible by the data-parallel size {dp}; "
                "verl fails at the first actor update, after a full rollout (V3)",
                f"make PPO_MINI_BATCH_SIZE a multiple of {dp // _gcd(dp, n)}",
            )
        elif ((mini * n) // dp) % micro:
            self.add(
                self.s("PPO_MINI_BATCH_SIZE", "PPO_MICRO_BATCH_SIZE_PER_GPU"),
                f"the per-device mini batch {(mini * n) // dp} is not divisible by the micro batch (V4)",
                "use PPO_MICRO_BATCH_SIZE_PER_GPU=1 or a divisor of it",
            )
        elif self.recipe.engine == "megatron" and v["VPP"] and v["PP"] > 1:
            micro_batches = (mini * n) // dp // micro
            if micro_batches < v["PP"] or micro_batches % v["PP"]:
                self.add(
                    self.s("VPP", "PP"),
                    f"the interleaved schedule needs the {micro_batches} micro batches per "
                    f"step to be a multiple of PP={v['PP']} (M16)",
                    "set VPP=0 or raise PPO_MINI_BATCH_SIZE",
                )
        if (tbs * n) % AGENT_LOOP_WORKERS:
            self.add(
                self.s("TRAIN_BATCH_SIZE", "ROLLOUT_N"),
                f"TRAIN_BATCH_SIZE x ROLLOUT_N = {tbs * n} is not "
                f"divisible by verl's {AGENT_LOOP_WORKERS} agent-loop workers (V5)",
                "make the product a multiple of 8",
            )

    # ---- rollout (vLLM) ------------------------------------------------------------------------------------
    def rollout(self) -> None:
        v, m, w = self.v, self.model, self.world
        gtp, gdp, gep, ndev = v["GEN_TP"], v["GEN_DP"], v["GEN_EP"], v["NDEVICES_PER_NODE"]
        allowed = [
            t
            for t in divisors(m.num_attention_heads)
            if t <= m.num_experts
            and (m.num_kv_heads % t == 0 or t % m.num_kv_heads == 0)
            and (not m.has_gdn or (m.linear_num_key_heads % t == 0 and m.linear_num_value_heads % t == 0))
        ]
        if gtp not in allowed:
            self.add(
                f"GEN_TP={gtp}",
                f"vLLM cannot split {m.name}'s heads over {gtp} ranks (vLLM qwen3_next)",
                f"use GEN_TP in {_fmt(allowed)}",
            )
        replica = gtp * gdp
        if gep > 1 and gep != replica:
            self.add(
                self.s("GEN_EP", "GEN_TP", "GEN_DP"),
                f"verl requires GEN_EP == GEN_TP x GEN_DP = {replica} when GEN_EP > 1 (R4)",
                f"set GEN_EP={replica} or GEN_EP=1",
            )
        if w % replica:
            self.add(
                self.s("GEN_TP", "GEN_DP"),
                f"a rollout replica of {replica} devices does not divide the world of {w} (R2)",
                f"choose GEN_TP x GEN_DP among the divisors of {w}",
            )
            return
        per_node = min(ndev, replica)
        if replica % per_node:
            self.add(
                self.s("GEN_TP", "GEN_DP"),
                f"a replica of {replica} devices spanning nodes must fill whole {ndev}-device nodes (R6)",
                f"make GEN_TP x GEN_DP a multiple of {ndev} or a divisor of it",
            )
        if gdp > 1 and (ndev % gtp or replica % ndev):
            self.add(
                self.s("GEN_TP", "GEN_DP"),
                f"with GEN_DP > 1 vLLM needs GEN_TP to divide the {ndev} devices of a "
                f"node and GEN_TP x GEN_DP to be a multiple of {ndev} (R7)",
                "adjust GEN_DP",
            )

    # ---- settings that fix upstream defects ---------------------------------------------------------------
    def policy(self, environ: Mapping[str, str], env_overrides: Mapping[str, str]) -> None:
        v = self.v
        for name in ("CKPT_DIR", "LOG_DIR", "MODEL_PATH"):
            value = str(v.get(name) or "")
            if not value.startswith("/"):
                what = (
                    (
                        "must be absolute on shared storage: the trainer may run on any node and would not find "
                        "the checkpoint tracker after a restart"
                    )
                    if name != "MODEL_PATH"
                    else "must be an absolute local path: nothing is downloaded at launch (a hub id needs network)"
                )
                self.add(f"{name}={value}", what, f"set {name} to an absolute path under the shared storage mount")
        for name in ("TRAIN_FILES", "VAL_FILES"):
            for f in v.get(name) or []:
                if not f.startswith("/"):
                    self.add(f"{name}={f}", "must be an absolute path on shared storage", f"use an absolute {name}")
            if not v.get(name):
                self.add(f"{name}=", "is empty", f"set {name} to the parquet file(s)")
        for name in ("PROJECT_NAME", "EXPERIMENT_NAME"):
            value = str(v.get(name) or "")
            if not value or "/" in value or value.strip() != value:
                self.add(
                    f"{name}={value!r}",
                    "must be a non-empty name without '/' or surrounding spaces",
                    f"set {name} to a plain name",
                )
        env = {**environ, **env_overrides}
        for logger in v["LOGGER"]:
            if logger not in SUPPORTED_LOGGERS:
                self.add(
                    f"LOGGER={','.join(v['LOGGER'])}",
                    f"'{logger}' is not a verl 0.8.0 tracker",
                    f"use some of {', '.join(SUPPORTED_LOGGERS)}",
                )
            elif logger in TRACKER_NEEDS:
                keys, fix = TRACKER_NEEDS[logger]
                if not any(env.get(k) for k in keys):
                    self.add(
                        f"LOGGER={','.join(v['LOGGER'])}",
                        f"'{logger}' is chosen but {keys[0]} is not set, so it "
                        "would fail or hang on an air-gapped cluster",
                        f"{fix}, or drop {logger} from LOGGER",
                    )
        mm = v["MM_PROCESSOR_CACHE_GB"]
        if (
            isinstance(mm, int)
            and mm > 0
            and v["DEVICE"] == "npu"
            and mm_cache_rule_active()
            and not v["FORCE_MM_CACHE"]
        ):
            self.add(
                f"MM_PROCESSOR_CACHE_GB={mm}",
                "the pinned vLLM clears its receiver-side multimodal cache on "
                "sleep/wake and then asserts on a re-used hash (vllm-project/vllm#42995, fixed by #43001, "
                "not in the pinned vLLM)",
                "keep MM_PROCESSOR_CACHE_GB=0, or set FORCE_MM_CACHE=true to accept the crash risk",
            )


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def check_paths(values: dict[str, Any], expected: ModelArch) -> tuple[list[Problem], ModelArch]:
    """Paths exist; MODEL_PATH's config.json (when present) gives the real architecture."""
    problems: list[Problem] = []
    model = expected
    mp = Path(str(values["MODEL_PATH"]))
    if not mp.is_dir():
        problems.append(
            Problem(
                f"MODEL_PATH={mp}",
                "is not a directory",
                "place the Hugging Face checkpoint on shared "
                "storage (make prepare-data) or pass --skip-path-checks to render only",
            )
        )
    else:
        cfg = mp / "config.json"
        if not cfg.is_file():
            problems.append(
                Problem(
                    f"MODEL_PATH={mp}",
                    "has no config.json",
                    "point MODEL_PATH at the checkpoint directory that holds config.json",
                )
            )
        else:
            try:
                model, diffs = arch_from_config(expected, read_config_json(cfg))
                if diffs:
                    problems.append(
                        Problem(
                            f"MODEL_PATH={mp}",
                            f"config.json does not describe {expected.name}: " + ", ".join(diffs[:4]),
                            "point MODEL_PATH at the model this recipe trains, or use the recipe for this model",
                        )
                    )
            except ModelConfigError as exc:
                problems.append(Problem(f"MODEL_PATH={mp}", str(exc), "re-copy config.json from the checkpoint"))
        if not any(any(mp.glob(g)) for g in WEIGHT_GLOBS):
            problems.append(
                Problem(
                    f"MODEL_PATH={mp}", "holds no weights (*.safetensors or *.bin)", "finish copying the checkpoint"
                )
            )
    for name in ("TRAIN_FILES", "VAL_FILES"):
        for f in values.get(name) or []:
            if f.startswith("/") and not Path(f).is_file():
                problems.append(Problem(f"{name}={f}", "does not exist", "run make prepare-data, or fix the path"))
            elif f.startswith("/") and not is_parquet(Path(f)):
                problems.append(
                    Problem(
                        f"{name}={f}",
                        "is not a Parquet file (no PAR1 magic at its start and end); verl 0.8.0 reads its data "
                        "with datasets' parquet loader",
                        "convert the data to Parquet (make prepare-data), or point at the .parquet file",
                    )
                )
    for name in ("CKPT_DIR", "LOG_DIR"):
        p = Path(str(values[name]))
        if not p.is_absolute():
            continue
        probe = p
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
            problems.append(
                Problem(
                    f"{name}={p}",
                    f"is not writable (checked {probe})",
                    "mount the shared storage read-write, or choose a writable path",
                )
            )
    return problems, model


def is_parquet(path: Path) -> bool:
    """Parquet magic at both ends, or the simulated cluster's placeholder (assets.py), which nothing reads."""
    from .assets import PLACEHOLDER

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


def apply_extra(launch: Launch, values: dict[str, Any], key_to_setting: dict[str, str]) -> list[str]:
    """Extra Hydra overrides win: fold the ones that drive a setting back into the values that are checked."""
    notes: list[str] = []
    for arg in launch.extra:
        key, _, raw = arg.partition("=")
        name = key_to_setting.get(key.lstrip("+"))
        if name is None:
            continue
        kind = BY_NAME[name].kind
        text = raw.strip().strip("'\"")
        if kind == "list":
            text = text.strip("[]").replace("'", "").replace('"', "")
        values[name] = coerce(name, text, f"extra override {key}")
        notes.append(f"note: extra override '{arg}' sets {name}")
    return notes


def validate(
    recipe: Recipe,
    values: dict[str, Any],
    launch: Launch,
    key_to_setting: dict[str, str],
    *,
    environ: Mapping[str, str],
    env_overrides: Mapping[str, str],
    path_checks: bool,
    compose: bool,
) -> tuple[list[Problem], list[str]]:
    values = dict(values)
    notes = apply_extra(launch, values, key_to_setting)
    problems: list[Problem] = []
    model = recipe.model
    if path_checks:
        path_problems, model = check_paths(values, recipe.model)
        problems += path_problems
    knobs = Knobs.from_launch(launch.overrides, launch.extra, {**launch.env, **env_overrides})
    checker = Checker(recipe, values, model, knobs)
    layout_ok = False
    if checker.positive():
        dp = checker.megatron() if recipe.engine == "megatron" else checker.fsdp()
        if dp:
            checker.batches(dp)
        checker.rollout()
        checker.lengths()
        layout_ok = not checker.problems
    checker.policy(environ, env_overrides)
    problems = checker.problems + problems
    if layout_ok:
        from .memory import estimate, summary
        from .memory import problems as memory_problems

        est = estimate(recipe.name, recipe.engine, model, values, knobs)
        found, warnings = memory_problems(est, recipe.name, int(values["NNODES"]))
        if values.get("MEMORY_CHECK") == "warn":
            warnings += [
                f"warning: {Problem(*p)} (MEMORY_CHECK=warn)".replace("warning: error: ", "warning: ") for p in found
            ]
        else:
            problems += [Problem(*p) for p in found]
        notes += [*warnings, summary(est)]
    if compose:
        from .hydra_check import composition_errors

        cfg, errors = composition_errors(launch.hydra_args)
        problems += [Problem("verl config", what, fix) for what, fix in errors]
        if cfg is not None and not problems:
            # verl's own start-up checks, only on a launch that passed ours (no line is reported twice)
            from omegaconf import OmegaConf

            from .verl_check import run_verl_checks

            refused, note = run_verl_checks(OmegaConf.to_yaml(cfg))
            problems += [Problem("verl config", what, fix) for what, fix in refused]
            notes.append(note)
    return problems, notes
