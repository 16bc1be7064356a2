"""`verl-recipe plan RECIPE --nodes N`: the layouts that pass every rule of `validate` and fit the memory plan.

Ranking (stated in the output): fewest pipeline stages, then the most headroom on the die. Each trainer layout
is paired with the first rollout layout that fits, trying the recipe's own rollout layout first and then those
that leave vLLM the most memory per die. Paths are not checked (plan runs anywhere); batch sizes, lengths and
every other setting stay as the recipe, site file, environment and --set give them.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from .checks import batch, domains, lengths, rollout, storage, trainer_layout
from .checks.arithmetic import divisors
from .checks.context import Context
from .exitcodes import EXIT_BAD_INPUT, EXIT_OK
from .memory import GIB, Estimate, Knobs, estimate, vllm_weight_bytes
from .memory import problems as memory_problems
from .problems import error, refuse
from .recipes import Recipe
from .render import render
from .resolve import Request, resolve
from .settingtypes import MAX_NODES

CRITERION = "fewest pipeline stages, then most headroom per die, then least host memory per node"
MAX_PP = 16
SEARCH_NODES_UP_TO = 64
# The search for the smallest cluster that fits stops after this many memory estimates (about 0.3 ms each): a
# site whose HOST_MEM_GIB no layout fits would otherwise wait a minute for every node count up to 64.
SEARCH_ESTIMATES = 12000


@dataclass
class Candidate:
    layout: dict[str, int]
    est: Estimate

    def row(self) -> dict[str, Any]:
        return {
            "layout": self.layout,
            "peak_phase": self.est.peak.phase,
            "peak_gib": round(self.est.peak.total / GIB, 1),
            "headroom_gib": round(self.est.headroom / GIB, 1),
            "host_per_node_gib": round(self.est.host_total / GIB, 1),
            "rollout_sequences_per_rank": int(self.est.rollout["sequences_per_rank"]),
        }


@dataclass
class PlanResult:
    recipe: str
    nodes: int
    fitting: list[Candidate] = field(default_factory=list)
    rejected_by_rules: int = 0
    rejected_by_memory: int = 0
    smallest_nodes: int | None = None
    host_checked: bool = False
    estimates: int = 0  # memory estimates this search made
    searched_up_to: int = 0  # the largest node count the smallest-cluster search tried in full
    search_stopped: bool = False  # it ran out of SEARCH_ESTIMATES before SEARCH_NODES_UP_TO
    refused: list[str] = field(default_factory=list)  # settings out of their domain: nothing was searched
    checkpoint: dict[str, Any] = field(default_factory=dict)  # what a save writes and the retention keeps

    def to_dict(self, top: int) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "nodes": self.nodes,
            "criterion": CRITERION,
            "count": len(self.fitting),
            "rejected": {"rules": self.rejected_by_rules, "memory": self.rejected_by_memory},
            "smallest_nodes_that_fit": self.smallest_nodes if not self.fitting else self.nodes,
            "host_memory_checked": self.host_checked,
            "layouts": [c.row() for c in self.fitting[:top]],
            "checkpoint": self.checkpoint,
        }


def _trainer_layouts(recipe: Recipe, world: int, ndev: int) -> list[dict[str, int]]:
    m = recipe.model
    if recipe.engine == "megatron":
        out = []
        for tp in divisors(m.num_attention_heads):
            if tp > ndev:
                continue
            for pp in divisors(m.num_layers):
                if pp > MAX_PP or world % (tp * pp):
                    continue
                for ep in divisors(m.num_experts):
                    if world % (ep * pp) == 0:
                        out.append({"TP": tp, "PP": pp, "CP": 1, "EP": ep, "ETP": 1, "VPP": 0})
        return out
    out = []
    for sp in divisors(m.num_attention_heads):
        if world % sp:
            continue
        for fs in [-1, *[d for d in divisors(world) if d < world]]:
            out.append({"FSDP_SIZE": fs, "SP_SIZE": sp})
    return out


def _rollout_layouts(recipe: Recipe, world: int, own: dict[str, int]) -> list[dict[str, int]]:
    m = recipe.model
    out = []
    for tp in divisors(m.num_attention_heads):
        if world % tp:
            continue
        for dp in divisors(world // tp):
            for ep in sorted({1, tp * dp}):
                out.append({"GEN_TP": tp, "GEN_DP": dp, "GEN_EP": ep})
    # the recipe's own rollout first, then the most memory left to vLLM, then the fewest dies per replica
    out.sort(
        key=lambda r: (
            r != own,
            vllm_weight_bytes(m, r["GEN_TP"], r["GEN_DP"]),
            r["GEN_TP"] * r["GEN_DP"],
            -r["GEN_EP"],
        )
    )
    return out


def _rules_ok(recipe: Recipe, values: dict[str, Any], knobs: Knobs, part: str) -> bool:
    ctx = Context(recipe, values, recipe.model, knobs)
    if not domains.check(ctx):
        return False
    if part == "rollout":
        rollout.check(ctx)
    else:
        dp = trainer_layout(ctx)
        if not dp:
            return False
        batch.check(ctx, dp)
        lengths.check(ctx)
    return not ctx.problems


def rank(c: Candidate) -> tuple[int, float, float]:
    """Fewest pipeline stages, then most headroom (to 0.1 GiB), then the least host memory per node."""
    return c.layout.get("PP", 1), -round(c.est.headroom / GIB, 1), c.est.host_total


def plan_for(
    recipe: Recipe,
    base: dict[str, Any],
    knobs: Knobs,
    nodes: int,
    *,
    first_only: bool = False,
    budget: int | None = None,
) -> PlanResult:
    values = {**base, "NNODES": nodes}
    world = nodes * int(values["NDEVICES_PER_NODE"])
    result = PlanResult(recipe.name, nodes, host_checked=bool(base.get("HOST_MEM_GIB")))
    own = {k: int(base[k]) for k in ("GEN_TP", "GEN_DP", "GEN_EP")}
    rollouts = [r for r in _rollout_layouts(recipe, world, own) if _rules_ok(recipe, {**values, **r}, knobs, "rollout")]
    # Host memory is the trainer's offloaded state plus vLLM's sleeping weights (memory.estimate): least with the
    # rollout that keeps the fewest weights per die. A trainer whose host memory misses HOST_MEM_GIB with that one
    # misses it with every rollout, and is rejected after one estimate instead of one per rollout.
    lightest = None
    if result.host_checked and rollouts:
        lightest = min(rollouts, key=lambda r: vllm_weight_bytes(recipe.model, r["GEN_TP"], r["GEN_DP"]))
    for trainer in _trainer_layouts(recipe, world, int(values["NDEVICES_PER_NODE"])):
        if not _rules_ok(recipe, {**values, **trainer}, knobs, "trainer"):
            result.rejected_by_rules += 1
            continue
        if lightest is not None:
            result.estimates += 1
            floor = estimate(recipe.name, recipe.engine, recipe.model, {**values, **trainer, **lightest}, knobs)
            if not floor.host_fits():
                result.rejected_by_memory += 1
                continue
        best = None
        for r in rollouts:
            if budget is not None and result.estimates >= budget:
                return result
            layout = {**trainer, **r}
            result.estimates += 1
            est = estimate(recipe.name, recipe.engine, recipe.model, {**values, **layout}, knobs)
            if not memory_problems(est, recipe.name, nodes)[0]:
                best = Candidate(layout, est)
                break
        if best is None:
            result.rejected_by_memory += 1
            continue
        result.fitting.append(best)
        if first_only:
            break
    result.fitting.sort(key=rank)
    return result


def plan(req: Request, nodes: int) -> PlanResult:
    recipe, resolved = resolve(Request(req.recipe, sets=[*req.sets, f"NNODES={nodes}"], extra=req.extra, site=req.site))
    launch = render(recipe, resolved, req.extra)
    knobs = Knobs.from_launch(launch.overrides, launch.extra, {**launch.env, **resolved.env_overrides})
    base = dict(resolved.values)
    # A setting out of its domain breaks every layout alike: said once, by name, before any search (an absurd
    # number would otherwise read as "no layout fits", or overflow the memory plan's arithmetic).
    ctx = Context(recipe, {**base, "NNODES": nodes}, recipe.model, knobs)
    domains.check(ctx)
    if ctx.problems:
        return PlanResult(recipe.name, nodes, refused=[str(p) for p in ctx.problems])
    result = plan_for(recipe, base, knobs, nodes)
    if int(base["SAVE_FREQ"]) > 0:
        sp = storage.plan(recipe.model, recipe.engine, base)
        result.checkpoint = {
            "bytes_per_save": round(sp.size.total),
            "params": sp.size.params,
            "keep": sp.keep,
            "saves_at_once": sp.peak,
            "line": sp.line(),
        }
    if not result.fitting:
        spent = 0
        result.searched_up_to = nodes
        for n in range(nodes + 1, SEARCH_NODES_UP_TO + 1):
            found = plan_for(recipe, base, knobs, n, first_only=True, budget=SEARCH_ESTIMATES - spent)
            spent += found.estimates
            if found.fitting:
                result.smallest_nodes = n
                break
            if spent >= SEARCH_ESTIMATES:
                result.search_stopped = True
                break
            result.searched_up_to = n
    return result


def table(result: PlanResult, top: int) -> str:
    lines = [f"plan for {result.recipe} on {result.nodes} nodes; ranked by {CRITERION}"]
    if not result.fitting:
        where = (
            f"the smallest cluster that fits is {result.smallest_nodes} nodes"
            if result.smallest_nodes
            else f"none fits up to {result.searched_up_to} nodes with these batch sizes and lengths"
            + (f" (the search stops after {SEARCH_ESTIMATES} layouts)" if result.search_stopped else "")
        )
        lines.append(
            f"no layout fits: {result.rejected_by_rules} trainer layouts break a rule, "
            f"{result.rejected_by_memory} exceed the memory plan; {where}"
        )
        return "\n".join(lines) + "\n"
    keys = list(result.fitting[0].layout)
    head = [*keys, "peak phase", "peak GiB", "headroom GiB", "host GiB/node", "seqs/rank"]
    rows = [
        [
            *(str(c.layout[k]) for k in keys),
            c.est.peak.phase,
            f"{c.est.peak.total / GIB:.1f}",
            f"{c.est.headroom / GIB:.1f}",
            f"{c.est.host_total / GIB:.0f}",
            str(int(c.est.rollout["sequences_per_rank"])),
        ]
        for c in result.fitting[:top]
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    shown = min(top, len(result.fitting))
    lines.append(
        f"{len(result.fitting)} layouts fit ({shown} shown); {result.rejected_by_rules} trainer layouts break a "
        f"rule, {result.rejected_by_memory} exceed the memory plan"
    )
    if not result.host_checked:
        lines.append("host memory per node is estimated, not checked: set HOST_MEM_GIB (site file) to check it")
    if result.checkpoint:
        lines.append(result.checkpoint["line"])
    best = result.fitting[0].layout
    lines.append("use: " + " ".join(f"--set {k}={v}" for k, v in {"NNODES": result.nodes, **best}.items()))
    return "\n".join(lines) + "\n"


def to_json(result: PlanResult, top: int) -> str:
    return json.dumps(result.to_dict(top), indent=2) + "\n"


def cmd_plan(req: Request, nodes: int, top: int, as_json: bool) -> int:
    """Exit 0 when a layout fits, 2 when none does (with the smallest cluster that fits, if any)."""
    if nodes < 1 or top < 1:
        error(f"--nodes={nodes} --top={top}: must be >= 1; fix: give positive numbers")
        return EXIT_BAD_INPUT
    if nodes > MAX_NODES:
        error(f"--nodes={nodes}: more than verl-recipe's bound of {MAX_NODES} nodes; fix: give at most {MAX_NODES}")
        return EXIT_BAD_INPUT
    result = plan(req, nodes)
    if result.refused:
        return refuse(result.refused, req.recipe)
    sys.stdout.write(to_json(result, top) if as_json else table(result, top))
    return EXIT_OK if result.fitting else EXIT_BAD_INPUT
