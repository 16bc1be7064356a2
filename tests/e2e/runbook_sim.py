"""README's runbook typed on the simulated real-site cluster: each line of the marked blocks (tests/runbook.py reads
them from README, so nothing here copies them) is run as README types it, with its placeholders filled from the
cluster (`<site>`, the sample addresses) and the simulated site's own SSH key and known_hosts where README leaves them
to the user's `~/.ssh`. A line that cannot run here (the build host's, Hugging Face's) is skipped with its rule's
reason. `$EDITOR` is the site's edit of step 4: the layout `verl-recipe plan` would pick for this cluster's host
count, for the 397B rehearsal of step 7."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simkit.cluster import SimCluster
from tests import runbook
from tests.e2e.test_train_rehearsal import scale

SAMPLE_ADDRESSES = re.compile(r"10\.10\.0\.\d+(?: 10\.10\.0\.\d+)*(?: \.\.\.)?")
STEP_TIMEOUT_S = 1800


@dataclass
class Typed:
    command: runbook.Command
    line: str  # what ran: README's line with the placeholders filled
    host: str  # "" on the control node
    proc: subprocess.CompletedProcess[str]

    @property
    def out(self) -> str:
        return self.proc.stdout + self.proc.stderr


@dataclass
class RunbookOnSim:
    cluster: SimCluster
    work: Path
    typed: list[Typed] = field(default_factory=list)
    skipped: list[tuple[runbook.Command, str]] = field(default_factory=list)

    @property
    def known_hosts(self) -> Path:
        return self.work / "known_hosts"

    def fill(self, line: str) -> str:
        c = self.cluster
        line = line.replace("<site>", c.name).replace("~/.ssh/known_hosts", str(self.known_hosts))
        line = line.replace("/tmp/site-keys", str(self.work / "site-keys"))
        line = SAMPLE_ADDRESSES.sub(" ".join(c.ip(h) for h in c.hosts), line)
        if line.startswith("make inventory "):
            # README's defaults are the user's ~/.ssh key and known_hosts; the simulated site's are beside its inventory
            line += f" SSH_KEY={c.inventory / 'id_ed25519'} KNOWN_HOSTS={self.known_hosts}"
        return line

    def editor(self) -> str:
        """The step-4 edit as a command `$EDITOR FILE` runs: site.yml gets the simulated site's site_launch (its
        group_vars/all/sim.yml) plus the 397B layout for this many hosts."""
        sim = yaml.safe_load((self.cluster.inventory / "group_vars" / "all" / "sim.yml").read_text())
        launch: dict[str, Any] = dict(sim.get("site_launch") or {})
        layout = dict(w.split("=", 1) for w in scale("qwen3.5-397b", self.cluster.nodes).split() if w != "--set")
        launch.setdefault("recipes", {})["qwen3.5-397b"] = {k: int(v) if v.isdigit() else v for k, v in layout.items()}
        prepared = self.work / "site.yml.edited"
        prepared.write_text("# the site's edit (tests/e2e/runbook_sim.py)\n" + yaml.safe_dump({"site_launch": launch}))
        return f"cp {shlex.quote(str(prepared))}"

    def run(self, steps: range) -> list[Typed]:
        """Every runbook line of these steps in README's order; the typed ones are returned (and kept)."""
        done: list[Typed] = []
        for cmd in runbook.commands():
            if cmd.step not in steps:
                continue
            rule = runbook.rule_for(cmd.line)
            if rule.how != runbook.HERE:
                self.skipped.append((cmd, rule.why or runbook.IN_A_COPY_WHY))
                continue
            p = self.type(cmd)
            done.append(p)
            if p.proc.returncode != 0:
                break  # a runbook stops at the first failing step
        self.typed += done
        return done

    def type(self, cmd: runbook.Command) -> Typed:
        """One line on the control node, as typed (with the step-4 edit as $EDITOR)."""
        env_editor = self.editor() if "$EDITOR" in cmd.line else ""
        line = self.fill(cmd.line)
        p = subprocess.run(
                ["bash", "-c", line], cwd=runbook.REPO, capture_output=True, text=True, check=False,
                stdin=subprocess.DEVNULL, timeout=STEP_TIMEOUT_S,
                env={**os.environ, "EDITOR": env_editor},
            )  # fmt: skip
        return Typed(cmd, line, "", p)


def failed(done: list[Typed]) -> str:
    """One line per typed command that did not exit 0, with its output's tail; empty when all did."""
    return "\n".join(
        f"README step {t.command.step} `{t.line}`{' on ' + t.host if t.host else ''}: rc {t.proc.returncode}\n"
        f"{t.out[-3000:]}"
        for t in done
        if t.proc.returncode != 0
    )
