"""Validate a rendered launch: every check that can be made before a device is touched, all problems at once.

The checks live in checks/, one module per concern; this module folds extra Hydra overrides back into the
settings, runs the checks in order, then Hydra's composition and verl's own start-up checks. Rules: megatron-core
0.16.0 (M*), verl 0.8.0 config and runtime asserts (V*), rollout (R*); docs/rules.md lists each id with the
upstream file and lines that enforce it. Each problem names the setting and value, what is wrong, and a fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import checks, secretfiles
from .checks import hccl, memory_rules, policy, resume, secrets, storage, weightsync
from .checks.context import Context
from .checks.paths import check_paths as check_paths
from .checks.problem import Problem
from .hydra_syntax import bare_key, list_text, override_key, unquoted
from .layers import coerce
from .memory import Estimate, Knobs, estimate
from .models import ModelArch
from .recipes import Recipe
from .render import DEVICE_HYDRA, MM_CACHE, Launch, rendered_settings
from .settings import BY_NAME
from .settingtypes import DEVICE_NAME, EXPERIMENT_DIR, ZERO_IS_NULL, SettingsError

HYDRA_NULL = ("null", "none", "~")


def problem_of(exc: SettingsError) -> Problem:
    """A settings error (SUBJECT: WHAT; fix: FIX) as one problem among the others."""
    head, _, fix = str(exc).partition("; fix: ")
    subject, _, what = head.partition(": ")
    return Problem(subject, what or head, fix or "see the settings table in docs/settings.md")


def driven_keys(recipe: Recipe) -> dict[str, str]:
    """Every Hydra key (without +) a setting writes, whatever its form -> the setting."""
    specs = [*rendered_settings(recipe.engine), MM_CACHE]
    return {bare_key(key): spec.name for spec in specs for key in spec.hydra_keys()}


def read_back(name: str, raw: str, key: str) -> Any:
    """An extra override's value as the value of the setting it overrides."""
    spec = BY_NAME[name]
    text = list_text(raw) if spec.kind == "list" else unquoted(raw)
    if spec.form == ZERO_IS_NULL and text.lower() in HYDRA_NULL:
        return 0
    if spec.form == DEVICE_NAME:
        device = {hydra: dev for dev, hydra in DEVICE_HYDRA.items()}.get(text)
        if device is None:
            raise SettingsError(
                f"extra override {key}={text}: verl-recipe launches {', '.join(DEVICE_HYDRA.values())} only; "
                f"fix: set {name} ({', '.join(DEVICE_HYDRA)}) and drop the override"
            )
        text = device
    return coerce(name, text, f"extra override {key}")


def apply_extra(launch: Launch, values: dict[str, Any], recipe: Recipe) -> tuple[list[str], list[Problem]]:
    """Extra Hydra overrides win: fold every one that drives a setting back into the values that are checked, so
    no override undoes a rule. Deleting such a key, or a secret in the workers' environment, is refused."""
    notes: list[str] = []
    problems: list[Problem] = []
    driven = driven_keys(recipe)
    for arg in launch.extra:
        key, _, raw = arg.partition("=")
        bare = bare_key(key)
        found = secrets.secret_names(arg)
        if found:  # named by the key or inside a mapping or list value, at any depth (checks/secrets.py)
            names = ", ".join(found)
            problems.append(
                Problem(
                    f"extra override {key}",
                    f"puts {names}, a secret by its name, on the driver's command line and into the run record",
                    f"name {names} in the site file's secret_files (docs/cluster.md, secrets) and drop the override",
                )
            )
            continue
        bad = secrets.non_text_env_value(arg)
        if bad is not None:
            problems.append(
                Problem(
                    f"extra override {key}",
                    f"Hydra reads {bad} as {secrets.kind_of(bad)} and Ray takes only strings in runtime_env "
                    "env_vars (the job would fail at submission)",
                    f"quote the value: {key}='{bad}'",
                )
            )
            continue
        if bare.startswith("~"):
            deleted = driven.get(bare_key(bare[1:]))
            if deleted:
                problems.append(
                    Problem(
                        f"extra override '{arg}'",
                        f"deletes a key {deleted} sets: verl needs it, and no check could run without it",
                        f"set {deleted} instead (--set {deleted}=VALUE) and drop the override",
                    )
                )
            continue
        name = driven.get(bare)
        if name is None:
            continue
        try:
            values[name] = read_back(name, raw, key)
        except SettingsError as exc:
            problems.append(problem_of(exc))
            continue
        what = " (the whole directory: project and experiment included)" if BY_NAME[name].form == EXPERIMENT_DIR else ""
        notes.append(f"note: extra override '{arg}' sets {name}{what}")
    return notes, problems


@dataclass
class Validation:
    """What validate found: the problems, the notes to print, and the memory plan it checked (the one the run
    record keeps; None on the CPU stand-ins or when the layout is refused before the plan)."""

    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    memory: dict[str, Any] | None = None


def folded_values(recipe: Recipe, launch: Launch, values: Mapping[str, Any]) -> dict[str, Any]:
    """The settings with every extra override that drives one folded in (the values a launch really runs with)."""
    folded = dict(values)
    apply_extra(launch, folded, recipe)
    return folded


def rendered_memory(recipe: Recipe, launch: Launch, values: Mapping[str, Any]) -> dict[str, Any] | None:
    """`render --json`'s memory plan: over the folded values, as validate computes it, with the recipe's
    architecture (render reads no checkpoint); None on the CPU stand-ins or where the settings give no layout."""
    folded = folded_values(recipe, launch, values)
    if folded["DEVICE"] == "cpu":
        return None  # no dies: the simulated run's memory is the host's, watched by the run (perf/cpu_memory_used_gb)
    try:
        knobs = Knobs.from_launch(launch.overrides, launch.extra, launch.env)
        return estimate(recipe.name, recipe.engine, recipe.model, folded, knobs).to_dict()
    except (ArithmeticError, ValueError, TypeError, KeyError):
        return None


def memory_plan(recipe: Recipe, model: ModelArch, values: Mapping[str, Any], knobs: Knobs) -> Estimate:
    return estimate(recipe.name, recipe.engine, model, values, knobs)


def validate(
    recipe: Recipe,
    values: dict[str, Any],
    launch: Launch,
    *,
    environ: Mapping[str, str],
    env_overrides: Mapping[str, str],
    path_checks: bool,
    compose: bool,
    secret_files: Mapping[str, str] | None = None,
    no_saves: str = "",
) -> Validation:
    """Every check, over the settings with the extra overrides folded in (apply_extra reads back every key a
    setting drives); the memory plan is estimated once, here, and is the one the record keeps. `no_saves`: why this
    launch writes no checkpoint (checks/storage.py no_saves), '' for a training launch."""
    secret_files = dict(secret_files or {})
    values = dict(values)
    notes, extra_problems = apply_extra(launch, values, recipe)
    path_problems: list[Problem] = []
    model = recipe.model
    if path_checks:
        try:
            path_problems, model = check_paths(values, recipe.model)
        except OSError as exc:  # a path the file system refuses outright (policy names which and why)
            path_problems = [Problem("path settings", f"cannot be checked ({exc.strerror})", "fix the paths named")]
        path_problems += [problem_of(SettingsError(line)) for line in secretfiles.problems(secret_files)]
        # the checkpoint RESUME_MODE=auto would resume, against this launch (before anything starts)
        resume_problems, resume_notes = resume.check(recipe.name, recipe.engine, values)
        path_problems += resume_problems
        notes += resume_notes
        # what the kept saves need at CKPT_DIR, against its free space
        storage_problems, storage_notes = storage.check(model, recipe.engine, values, no_saves)
        path_problems += storage_problems
        notes += storage_notes
    knobs = Knobs.from_launch(launch.overrides, launch.extra, {**launch.env, **env_overrides})
    ctx = Context(recipe, values, model, knobs)
    layout_ok = checks.layout(ctx)
    policy.check(ctx, environ, env_overrides, tuple(secret_files))
    hccl.check(ctx)  # the HCCL timeouts' order (CANN's HCCL guide)
    weightsync.check(ctx)  # the weight-sync bucket where verl's rollout cannot use IPC
    problems = extra_problems + ctx.problems + path_problems
    memory: dict[str, Any] | None = None
    if layout_ok and values["DEVICE"] == "cpu":
        notes.append("note: DEVICE=cpu (the simulated cluster's CPU stand-ins): no dies, no memory plan")
    elif layout_ok:
        est = memory_plan(recipe, model, values, knobs)
        memory = est.to_dict()
        memory_found, memory_notes = memory_rules.check(recipe, values, est)
        problems += memory_found
        notes += memory_notes
    if compose:
        from .hydra_check import composition_errors

        # An override refused for a secret stays out of Hydra, whose syntax errors quote the text they read.
        flagged = {arg for arg in launch.extra if secrets.secret_names(arg)}
        cfg, errors = composition_errors([arg for arg in launch.hydra_args if arg not in flagged])
        problems += [Problem("verl config", what, fix) for what, fix in errors]
        if cfg is not None and not problems:
            # verl's own start-up checks, only on a launch that passed ours (no line is reported twice)
            from omegaconf import OmegaConf

            from .verl_check import run_verl_checks

            culprits = {key: f"setting {name}" for key, name in driven_keys(recipe).items()}
            culprits |= {override_key(arg): f"extra override '{arg}'" for arg in launch.extra}
            refused, note = run_verl_checks(OmegaConf.to_yaml(cfg), culprits=culprits)
            problems += [Problem("verl config", what, fix) for what, fix in refused]
            notes.append(note)
    return Validation(problems, notes, memory)
