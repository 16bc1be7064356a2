"""README is a page a site starts from: at most 150 lines, and every command of its runbook (the code blocks marked
`<!-- runbook -->`) names a make target and make variables that exist, and has one rule saying how the end-to-end
runbook test runs it on the simulated site or why it cannot, so the page cannot drift from the Makefile or the tests."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests import runbook
from tests.runbook import README, REPO


def runbook_lines() -> list[str]:
    return [c.line for c in runbook.commands()]


def make_database() -> str:
    """make's own view of every target and variable (`make -pn`), without running anything."""
    p = subprocess.run(["make", "-pnq", "-C", str(REPO)], capture_output=True, text=True, check=False, timeout=120)
    return p.stdout


def test_readme_is_short_and_has_a_runbook() -> None:
    assert len(README.read_text().splitlines()) <= 150
    lines = runbook_lines()
    for step in ("make venv", "make inventory", "make preflight", "make deploy", "make train"):
        assert any(line.startswith(step) for line in lines), f"the runbook has no `{step}`"


def test_every_runbook_make_command_names_a_real_target_and_real_variables() -> None:
    db = make_database()
    targets = set(re.findall(r"^([a-zA-Z][\w-]*):", db, re.M))
    variables = set(re.findall(r"^([A-Z][A-Z0-9_]*) [:?]?=", db, re.M))
    seen = 0
    commands = [c.strip() for line in runbook_lines() for c in line.split("&&")]
    for line in commands:
        if not line.startswith("make "):
            continue
        # placeholders (<Ascend index>, <site>) are one word
        words = re.findall(r'(?:[^\s"]+|"[^"]*")+', re.sub(r"<[^>]*>", "X", line[len("make ") :]))
        for word in words:
            if "=" in word:
                name = word.split("=", 1)[0]
                assert name in variables, f"README runbook: `{line}` sets {name}, which no makefile reads"
            elif not word.startswith("-"):
                assert word in targets, f"README runbook: `{line}` names target {word}, which does not exist"
                seen += 1
    assert seen >= 6


def test_every_runbook_line_has_one_rule_and_every_rule_a_line() -> None:
    lines = runbook_lines()
    used = {runbook.rule_for(line) for line in lines}  # raises for a line with no rule or several
    assert set(runbook.RULES) == used, f"rules no README line uses: {set(runbook.RULES) - used}"
    for rule in runbook.RULES:
        assert (rule.how == runbook.NOT_HERE) == bool(rule.why), f"{rule.pattern}: NOT_HERE and only it says why"


def test_steps_and_where_they_run_are_read_with_each_line() -> None:
    cmds = runbook.commands()
    assert [c.step for c in cmds] == sorted(c.step for c in cmds), "README order"
    by_line = {c.line: c for c in cmds}
    assert by_line["make venv"].step == 1 and by_line["make venv"].where == ("build host", "control node")
    doctor = next(c for c in cmds if "doctor" in c.line)
    assert doctor.where == ("control node",) and runbook.rule_for(doctor.line).how == runbook.HERE
    # after `make use`, no line names an inventory: the site is remembered
    use = next(c for c in cmds if c.line.startswith("make use "))
    assert not [c.line for c in cmds if c.step > use.step and "INVENTORY=" in c.line]


def test_a_new_or_changed_line_without_a_rule_is_named() -> None:
    text = README.read_text().replace("make preflight\n", "make preflight-all\n", 1)
    changed = [c.line for c in runbook.commands(text) if "preflight-all" in c.line]
    assert changed
    with pytest.raises(LookupError, match="preflight-all"):
        runbook.rule_for(changed[0])


def test_make_help_lists_what_a_site_types_and_keeps_the_contributors_targets_apart() -> None:
    def listed(target: str) -> set[str]:
        p = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), target], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        return {line.split()[0] for line in p.stdout.splitlines() if line.startswith("  ") and "(" not in line[:4]}

    user, dev = listed("help"), listed("help-dev")
    typed = {c.split()[1] for line in runbook_lines() for c in line.split("&&") if c.strip().startswith("make ")}
    assert typed <= user, f"README's targets missing from make help: {typed - user}"
    assert not user & dev, user & dev
    assert {"test-unit", "lint", "golden", "sim-up", "bench", "lock-npu"} <= dev
