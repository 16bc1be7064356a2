"""What a launch setting is: its domain (type, range, engines), how it is rendered into Hydra (its form), and
SettingsError, the one shape of a settings problem (SUBJECT: WHAT; fix: FIX)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .a3facts import DIES_PER_NODE


class SettingsError(ValueError):
    """One problem with a setting, phrased as: the key and value, what is wrong, the fix."""


ENGINES = ("megatron", "fsdp")
# A bound, not a measured limit: 64 times the largest recipe's 16 nodes, so that every layout search and check of
# a request stays instant (plan, validate); a cluster beyond it is not one this project has been sized for.
MAX_NODES = 1024
# Upper bounds of the numeric settings that have none of their own. Far beyond any real run, and small enough that
# every product the checks and the memory plan make of them stays a finite float (1e308 GiB or 1e30 tokens would
# not: the plan's byte counts overflow to inf).
MAX_WORLD = MAX_NODES * DIES_PER_NODE  # dies in the largest cluster: no parallel group is larger
MAX_COUNT = 1 << 20  # prompts, responses or sequences in a step or a micro batch
MAX_TOKENS = 1 << 30  # tokens of a sequence or of a die's budget (models.py bounds max_position_embeddings so)
MAX_STEPS = 10**9  # steps or epochs: 30 years at a second a step
MAX_GIB = 1 << 16  # 64 TiB: more than any host's RAM


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
    hi_why: str = ""  # why the upper bound exists, shown instead of `why` when a value is above it

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
        if engine not in self.engines:
            return None
        if not math.isfinite(value):  # nan compares False with every bound: it would pass them all
            return f"is not a finite number: must be {self.range_text(engine)}"
        if value in self.also:
            return None
        lo, lo_open = self.bounds(engine)
        if lo is not None and (value < lo or (lo_open and value == lo)):
            return f"must be {self.range_text(engine)}"
        if self.hi is not None and value > self.hi:
            return f"must be {self.range_text(engine)}"
        return None

    def reason(self, value: float) -> str:
        """Why the bound that value breaks exists ("" when nothing says)."""
        if self.hi_why and self.hi is not None and value > self.hi:
            return self.hi_why
        return self.why


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


BEYOND_WORLD = f"no parallel group is larger than verl-recipe's largest cluster ({MAX_NODES} x {DIES_PER_NODE} dies)"
BEYOND_COUNT = "verl-recipe's bound on a batch (settingtypes.MAX_COUNT), far beyond any GRPO step"
BEYOND_TOKENS = "verl-recipe's bound on tokens (settingtypes.MAX_TOKENS), the one models.py puts on a context"
BEYOND_STEPS = "verl-recipe's bound on steps (settingtypes.MAX_STEPS): 30 years at a second a step"
SIZE = Domain(lo=1, hi=MAX_WORLD, hi_why=BEYOND_WORLD)
MEGATRON_SIZE = Domain(lo=1, hi=MAX_WORLD, engines=("megatron",), hi_why=BEYOND_WORLD)
FSDP_GROUP = Domain(lo=1, hi=MAX_WORLD, engines=("fsdp",), hi_why=BEYOND_WORLD)
COUNT = Domain(lo=1, hi=MAX_COUNT, hi_why=BEYOND_COUNT)
TOKENS = Domain(lo=1, hi=MAX_TOKENS, hi_why=BEYOND_TOKENS)
MEMORY_PLAN_ONLY = "read by the memory plan (memory.py) only"
HEALTH_ONLY = "read by the launcher's health rules (health.py) only"
RESTART_ONLY = "read by the train command's restart policy (run/restart.py) only"
ALERT_ONLY = "read by the launcher's alert delivery (watch/notify.py) only"
