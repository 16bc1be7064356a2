"""verl 0.8.0's own start-up checks, in verl's order, wherever verl can be imported.

`verl.trainer.main_ppo` composes its Hydra config, then `auto_set_device`, `migrate_legacy_reward_impl`,
`OmegaConf.resolve` and `verl.utils.config.validate_config` (which builds the actor's `ActorConfig` and runs its
`validate`); each worker then builds its dataclasses in `verl/workers/engine_workers.py` `init_model`: the
reference's `ActorConfig`, the dynamic-batch asserts, `RolloutConfig` and the rollout world-size assert, the
`CheckpointEngineConfig`; `RolloutReplica.__init__` asserts that a replica fills whole nodes. The last three only
fail after the models have been loaded on every die, so they are run here before anything starts.

verl needs torch, ray and tensordict to be imported at all: the development venv (`make venv`), verl-recipe:sim and
the NPU image have them. The checks run in a child process (verl's imports take 3-4 s and print to stdout) with a
deadline; where verl cannot be imported, the caller prints why instead of silently skipping. The Hugging Face
model config (`HFModelConfig`, which reads the checkpoint's tokenizer) is not built here.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import linecache
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

VERL_NEEDS = ("torch", "ray", "tensordict", "numpy", "verl")
TIMEOUT_S = 120
# VERL_RECIPE_VERL_CHECKS=0 turns them off (said in the output): quick iterations on our own rules, and the test
# suite, whose tests of these checks turn them back on (tests/conftest.py, marker verl_checks).
SWITCH = "VERL_RECIPE_VERL_CHECKS"
ARR = "actor_rollout_ref"


def missing_modules() -> list[str]:
    return [m for m in VERL_NEEDS if importlib.util.find_spec(m) is None]


def run_verl_checks(
    config_yaml: str, timeout_s: float = TIMEOUT_S, *, culprits: Mapping[str, str] | None = None
) -> tuple[list[tuple[str, str]], str]:
    """(problems as (what, fix)), and one note saying what ran or why nothing did. `culprits`: a Hydra key
    (without +) -> what set it ("extra override 'k=v'", "setting TP"), to name the one a refusal is about.

    Checks that could not run are a problem, not a note: a launch they cannot judge does not pass. Only their
    switch and an environment without verl (said in the note) leave them out."""
    if os.environ.get(SWITCH) == "0":
        return [], f"note: verl's own start-up checks were not run: {SWITCH}=0 turns them off"
    missing = missing_modules()
    if missing:
        return [], (
            f"note: verl's own start-up checks were not run: verl 0.8.0 cannot be imported here "
            f"(missing {', '.join(missing)}); they run where verl imports with its dependencies "
            "(the development venv `make venv` builds, verl-recipe:sim and the NPU image)"
        )
    start = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "verl_recipe.verl_check"],
            input=config_yaml,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [could_not_run(f"they did not finish within {timeout_s:g} s")], "note: verl's checks timed out"
    took = time.monotonic() - start
    try:
        result = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return [could_not_run(f"exit {proc.returncode}: {tail[:300]}")], "note: verl's checks could not run"
    if not result.get("imported"):
        return [could_not_run(f"importing verl failed: {result.get('import_error')}")], "note: verl did not import"
    problems = [refusal(found, culprits or {}) for found in result.get("problems", [])]
    ran = ", ".join(result.get("steps", []))
    return problems, f"note: verl's own start-up checks ran in {took:.1f} s ({ran})"


FIXES = {
    "validate_config": "change the extra override it names; verl stops at start-up otherwise",
    "ref ActorConfig": "fix the reference's settings (actor_rollout_ref.ref.*) it names",
    "dynamic batching": "set use_dynamic_bsz the same on actor.use_dynamic_bsz and rollout.log_prob_use_dynamic_bsz",
    "RolloutConfig": "fix the rollout override it names; verl fails after loading the models otherwise",
    "rollout world size": "choose GEN_TP x GEN_DP x rollout pipeline size dividing the world",
    "CheckpointEngineConfig": "fix actor_rollout_ref.rollout.checkpoint_engine.*",
    "RolloutReplica": "make a rollout replica fill whole nodes or fit in one",
}


def fix_for(step: str) -> str:
    return FIXES.get(step, "change the override it names (verl 0.8.0 refuses it at start-up)")


def could_not_run(why: str) -> tuple[str, str]:
    return (
        f"verl 0.8.0's start-up checks could not run on this configuration ({why}), so it cannot pass",
        "fix what the line names (an extra override that deletes or breaks a key verl reads), or set "
        f"{SWITCH}=0 to skip verl's checks knowingly",
    )


def refusal(found: Any, culprits: Mapping[str, str]) -> tuple[str, str]:
    """One refusal as (what, fix): verl's message, where verl refused (file:line and the asserted condition), and
    the keys the condition read, with their values and what set them."""
    step = str(found.get("step", "?"))
    what = str(found.get("message", ""))
    if found.get("where"):
        cond = f" asserts `{found['condition']}`" if found.get("condition") else ""
        what += f" at {found['where']}{cond}"
    named = [(k, v, culprits.get(k)) for k, v in dict(found.get("values") or {}).items()]
    if not any(c for _, _, c in named):
        # none of the keys it read was set by a setting or override: name the user's overrides of the same leaf
        leaves = set(found.get("leaves") or [])
        named += [(k, None, c) for k, c in culprits.items() if c.startswith("extra") and k.rpartition(".")[2] in leaves]
    shown = [f"{k}={v!r}" + (f" from {c}" if c else "") if v is not None else f"{k} from {c}" for k, v, c in named]
    if shown:
        what += ", with " + "; ".join(shown)
    fix = fix_for(step)
    blamed = next((c for _, _, c in named if c), None)
    if blamed:
        verb = "change or drop" if blamed.startswith("extra") else "change"
        fix = f"{verb} {blamed} (verl 0.8.0 refuses it at start-up)"
    return f"verl 0.8.0 {step} refuses the configuration: {what}", fix


def innermost(exc: BaseException) -> BaseException:
    """The innermost cause: Hydra's instantiate wraps the dataclass's own error."""
    inner = exc
    for _ in range(10):
        nxt = inner.__cause__ or inner.__context__
        if nxt is None:
            break
        inner = nxt
    return inner


def first_line(exc: BaseException) -> str:
    """The innermost cause's first line."""
    inner = innermost(exc)
    text = str(inner).strip()
    return f"{type(inner).__name__}: {text.splitlines()[0]}" if text else type(inner).__name__


def _statement(filename: str, lineno: int) -> ast.stmt | None:
    """The statement that starts at this line (an assert may span a few lines)."""
    text = ""
    for n in range(lineno, lineno + 12):
        line = linecache.getline(filename, n)
        if not line:
            break
        text += line
        try:
            tree = ast.parse(text.strip())
        except SyntaxError:
            continue
        return tree.body[0] if tree.body else None
    return None


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def located(exc: BaseException, config: Any) -> dict[str, Any]:
    """verl's message, where in verl it was raised, the condition an assert tested, and the config keys that
    condition read (self.X of the dataclass Hydra was building, named by its "full_key", or cfg.a.b paths)."""
    from omegaconf import OmegaConf

    inner = innermost(exc)
    out: dict[str, Any] = {"message": first_line(exc)}
    frames = []
    tb = inner.__traceback__
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    mark = f"{os.sep}verl{os.sep}"
    verl_frames = [f for f in frames if mark in f[0]]
    if not verl_frames:
        return out
    filename, lineno = verl_frames[-1]
    out["where"] = f"{filename[filename.rindex(mark) + 1 :]}:{lineno}"
    stmt = _statement(filename, lineno)
    if not isinstance(stmt, ast.Assert):
        return out
    out["condition"] = ast.unparse(stmt.test)
    full_key = ""
    chain: BaseException | None = exc
    for _ in range(10):
        if chain is None:
            break
        m = re.search(r"full_key: (\S+)", str(chain))
        if m:
            full_key = m.group(1)
            break
        chain = chain.__cause__ or chain.__context__
    values: dict[str, Any] = {}
    leaves: set[str] = set()
    for node in ast.walk(stmt.test):
        dotted = _dotted(node) if isinstance(node, ast.Attribute) else None
        if not dotted:
            continue
        head, _, rest = dotted.partition(".")
        leaves.add(dotted.rpartition(".")[2])
        key = f"{full_key}.{rest}" if head == "self" and full_key else rest
        try:
            value = OmegaConf.select(config, key, default=None)
        except Exception:  # noqa: BLE001 - a name the config does not hold
            value = None
        if value is not None and not OmegaConf.is_config(value):
            values[key] = value
    out["values"] = values
    out["leaves"] = sorted(leaves)
    return out


def _child(config_yaml: str) -> dict[str, Any]:
    out: dict[str, Any] = {"imported": False, "problems": [], "steps": []}
    try:
        from omegaconf import OmegaConf, open_dict
        from verl.experimental.reward_loop import migrate_legacy_reward_impl
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.utils.device import auto_set_device
    except Exception as exc:  # noqa: BLE001 - any import failure means the checks cannot run here
        out["import_error"] = first_line(exc)
        return out
    out["imported"] = True
    problems: list[dict[str, Any]] = out["problems"]

    def step(name: str, fn: Any) -> Any:
        out["steps"].append(name)
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - verl raises AssertionError, ValueError, TypeError, ...
            try:
                problems.append({"step": name, **located(exc, state["config"])})
            except Exception:  # noqa: BLE001 - locating is best effort; the refusal itself must still be told
                problems.append({"step": name, "message": first_line(exc)})
            return None

    config: Any = OmegaConf.create(config_yaml)
    state = {"config": config}

    def checks() -> None:
        nonlocal config
        step("auto_set_device", lambda: auto_set_device(config))
        migrated = step("migrate_legacy_reward_impl", lambda: migrate_legacy_reward_impl(config))
        config = migrated if migrated is not None else config
        state["config"] = config
        if step("OmegaConf.resolve", lambda: OmegaConf.resolve(config) or True) is None:
            return
        use_ref = bool(need_reference_policy(config))
        step(
            "validate_config",
            lambda: validate_config(config=config, use_reference_policy=use_ref, use_critic=need_critic(config)),
        )
        cfg = config[ARR]

        def ref_config() -> None:
            ref = cfg.ref.copy()
            with open_dict(ref):  # what init_model does before building the reference's ActorConfig
                ref.ppo_mini_batch_size = cfg.actor.ppo_mini_batch_size
                ref.ppo_micro_batch_size = ref.pop("log_prob_micro_batch_size", None)
                ref.ppo_micro_batch_size_per_gpu = ref.pop("log_prob_micro_batch_size_per_gpu", None)
                ref.use_dynamic_bsz = ref.pop("log_prob_use_dynamic_bsz", False)
                ref.ppo_max_token_len_per_gpu = ref.pop("log_prob_max_token_len_per_gpu", None)
            omega_conf_to_dataclass(ref)

        if use_ref:
            step("ref ActorConfig", ref_config)

        def dynamic_batching() -> None:
            # engine_workers.py init_model, the actor's asserts (verl 0.8.0)
            if cfg.actor.use_dynamic_bsz != cfg.rollout.log_prob_use_dynamic_bsz:
                raise AssertionError(
                    f"actor.use_dynamic_bsz={cfg.actor.use_dynamic_bsz} but "
                    f"rollout.log_prob_use_dynamic_bsz={cfg.rollout.log_prob_use_dynamic_bsz}"
                )
            if cfg.actor.use_dynamic_bsz:
                assert cfg.rollout.log_prob_max_token_len_per_gpu is not None, "log_prob_max_token_len_per_gpu is None"
                assert cfg.actor.ppo_max_token_len_per_gpu is not None, "ppo_max_token_len_per_gpu is None"
            else:
                assert cfg.rollout.log_prob_micro_batch_size_per_gpu is not None, (
                    "log_prob_micro_batch_size_per_gpu is None"
                )
                assert cfg.actor.ppo_micro_batch_size_per_gpu is not None, "ppo_micro_batch_size_per_gpu is None"

        step("dynamic batching", dynamic_batching)
        rollout = step("RolloutConfig", lambda: omega_conf_to_dataclass(cfg.rollout))
        world = int(config.trainer.n_gpus_per_node) * int(config.trainer.nnodes)
        if rollout is not None:
            replica = (
                rollout.tensor_model_parallel_size * rollout.data_parallel_size * rollout.pipeline_model_parallel_size
            )

            def world_size() -> None:
                assert world % replica == 0, (
                    f"rollout world_size {world} is not divisible by infer_world_size {replica}"
                )

            def replica_nodes() -> None:
                per_node = min(int(config.trainer.n_gpus_per_node), replica)
                assert replica % per_node == 0, f"world_size {replica} must be divisible by gpus_per_node {per_node}"

            step("rollout world size", world_size)
            step("RolloutReplica", replica_nodes)
        step("CheckpointEngineConfig", lambda: omega_conf_to_dataclass(cfg.rollout.checkpoint_engine))

    try:
        checks()
    except Exception as exc:  # noqa: BLE001 - a key verl reads is missing or broken: nothing can judge it
        problems.append({"step": "start-up", "message": f"the checks stopped: {first_line(exc)}"})
    return out


def main() -> int:
    config_yaml = sys.stdin.read()
    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # verl prints notices; only the result goes to stdout
        result = _child(config_yaml)
    real_stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
