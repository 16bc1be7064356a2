"""README's runbook as data: every command line of the code blocks marked `<!-- runbook -->`, with the step it
belongs to and where that step runs, and how each line is run on the simulated real-site cluster (or why it cannot
be). The unit tier checks that every line has exactly one rule here; tests/e2e runs the lines as README types them
(tests/e2e/runbook_sim.py), so the page and the path it describes cannot part."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

STEP_RE = re.compile(r"^(\d+)\. (.*)$")
BLOCK_RE = re.compile(r"<!-- runbook -->\n```bash\n(.*?)```", re.S)


@dataclass(frozen=True)
class Command:
    step: int
    where: tuple[str, ...]  # the step's bold tags: "build host", "control node", "every host", "head"
    line: str  # as README types it, without its trailing comment


def commands(text: str | None = None) -> list[Command]:
    """The runbook's command lines in README's order (continuation lines joined, comments dropped)."""
    text = README.read_text() if text is None else text
    out: list[Command] = []
    step, where = 0, ()
    pos = 0
    for block in BLOCK_RE.finditer(text):
        # the numbered step the block sits under: the last "N. **where**" line before it
        for line in text[pos : block.start()].splitlines():
            m = STEP_RE.match(line)
            if m:
                step, where = int(m.group(1)), tuple(re.findall(r"\*\*([^*]+)\*\*", m.group(2)))
        pos = block.end()
        for raw in block.group(1).replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", raw).strip()
            if line:
                out.append(Command(step, where, line))
    return out


# How each line runs on the simulated real-site cluster (tests/e2e/runbook_sim.py). HERE: as typed, placeholders
# filled; IN_A_COPY: as typed, by the network tier, in a copy of the repository on a machine without the CPU torch
# wheel folder (tests/image/test_lint_and_locks.py); NOT_HERE: the reason, and what the simulation does instead.
HERE, IN_A_COPY, NOT_HERE = "here", "in a copy", "not here"
IN_A_COPY_WHY = "typed by the network tier in a copy of the repository without the CPU torch wheel folder"


@dataclass(frozen=True)
class Rule:
    pattern: str  # a regular expression a whole README line must match
    how: str
    why: str = ""  # for NOT_HERE: why, and what stands in for it


BUILD_HOST = (
    "the build host's steps reach GitHub, gitcode, Ascend's pip index and the CANN registry and build for aarch64: "
    "the simulated cluster runs make image-sim-tar's image instead, and `make image-npu-rehearsal` replays the same "
    "Dockerfile over a stand-in base (docs/image.md)"
)
RULES: tuple[Rule, ...] = (
    Rule(r"make venv", HERE),
    Rule(r"make (sources|lock-npu-upstream-check|lock-npu-ascend|base-digest|image-npu)\b.*", NOT_HERE, BUILD_HOST),
    Rule(r"make locks", IN_A_COPY),
    Rule(r"docker save .*", NOT_HERE, BUILD_HOST),
    Rule(
        r"(for m in .*\.venv/bin/hf download|git clone .*verl\.git"
        r"|\.venv/bin/python build/verl/examples/data_preprocess/).*",
        NOT_HERE,
        "Hugging Face and GitHub are out of the tests' reach: `make sim-seed` writes a stand-in checkpoint and data "
        "where the simulated site's site_models and site_launch point",
    ),
    Rule(r"ssh-keyscan .* > /tmp/site-keys && ssh-keygen -lf /tmp/site-keys", HERE),
    Rule(r"cat /tmp/site-keys >> ~/\.ssh/known_hosts", HERE),
    Rule(r"make inventory .*", HERE),
    Rule(r"make use INVENTORY=inventory/<site>", HERE),
    Rule(r"\$EDITOR .*", HERE),
    Rule(r"make (preflight|deploy)", HERE),
    Rule(r"make doctor", HERE),
    Rule(r'make train RECIPE=qwen3\.5-397b ARGS="--rehearse"', HERE),
    Rule(r"make smoke RECIPE=qwen3\.5-35b-fsdp", HERE),
    Rule(
        r"make smoke RECIPE=qwen3\.5-(122b|397b)",
        NOT_HERE,
        "the upper rungs need 4 and 16 hosts and verl's Megatron trainer on NPUs; the CPU stand-ins run FSDP only",
    ),
    Rule(
        r'make train RECIPE=qwen3\.5-397b( DETACH=1)?( ARGS=".* -- .*")?',
        NOT_HERE,
        "397B trains on NPUs only; tests/e2e/test_train_fsdp.py runs the same make train forms (DETACH=1; --set and "
        "a Hydra override after --) with the 35B FSDP recipe",
    ),
    Rule(
        r"make export RUN=qwen3\.5-397b",
        NOT_HERE,
        "the 397B's save is Megatron's, written on NPUs only; tests/e2e/test_train_fsdp.py runs make export on the "
        "35B FSDP run and loads the folder",
    ),
    Rule(
        r"make eval RUN=qwen3\.5-397b",
        NOT_HERE,
        "the 397B validates with vLLM on NPUs only; tests/e2e/test_train_fsdp.py runs make eval on the 35B FSDP run "
        "(verl's validation with the CPU stand-in rollout)",
    ),
)


def rule_for(line: str) -> Rule:
    """The one rule a line matches; none or several is an error naming the line."""
    found = [r for r in RULES if re.fullmatch(r.pattern, line)]
    if len(found) != 1:
        raise LookupError(f"README runbook line {line!r} matches {len(found)} rules of tests/runbook.py RULES")
    return found[0]
