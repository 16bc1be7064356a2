"""README's runbook as typed, on the simulated real-site cluster (tests/e2e/conftest.py brings it up with steps 1 to
5; this module types the rest). Every marked line either ran, with its placeholders filled, or was skipped for the
reason tests/runbook.py gives; what each typed step must leave behind is checked here."""

from __future__ import annotations

import json

import pytest

from tests import runbook
from tests.e2e.runbook_sim import RunbookOnSim, failed
from tests.e2e.test_train_rehearsal import all_joined, on_host

pytestmark = pytest.mark.docker

EXPERIMENTS = "/mnt/shared/runs/verl_grpo_qwen3_5"


def typed_lines(book: RunbookOnSim, steps: range) -> list[str]:
    return [t.command.line for t in book.typed if t.command.step in steps]


def test_steps_1_to_5_brought_the_site_up_as_typed(e2e_site: RunbookOnSim) -> None:
    book, c = e2e_site, e2e_site.cluster
    # every line of steps 1-5 either ran or was skipped with its rule's reason, none twice
    readme = [cmd.line for cmd in runbook.commands() if cmd.step <= 5]
    skipped = [cmd.line for cmd, why in book.skipped if cmd.step <= 5 and why]
    assert sorted(typed_lines(book, range(1, 6)) + skipped) == sorted(readme)
    assert {cmd.step for cmd, _ in book.skipped} >= {2, 3}, "the build host's and Hugging Face's steps"
    assert not failed(book.typed)
    # ssh-keyscan's keys are the ones the hosts hold (what an owner compares with each host's console)
    scanned = {line.split()[0]: line.split()[2] for line in book.known_hosts.read_text().splitlines() if line}
    console = {}
    for line in (c.inventory / "known_hosts").read_text().splitlines():
        names, kind, key = line.split()[:3]
        if kind == "ssh-ed25519":
            console.update({n: key for n in names.split(",")})
    assert {c.ip(h) for h in c.hosts} == set(scanned)
    assert all(scanned[c.ip(h)] == console[c.ip(h)] for h in c.hosts), (scanned, console)
    # make inventory wrote the site's hosts.yml where README says, from what the hosts reported
    hosts_yml = (c.inventory / "hosts.yml").read_text()
    assert c.inventory.parent.name == "inventory" and c.inventory.name == c.name
    assert all(ip in hosts_yml for h in c.hosts for ip in c.info["hosts"][c.hosts.index(h)]["npu_ips"])
    # the site's edit reached every host: the 397B layout for 3 hosts in site.yaml
    site = on_host(c, "a3-02", "cat /opt/verl-recipe/site.yaml").stdout
    assert "qwen3.5-397b" in site and "NNODES: 3" in site, site


def test_steps_6_to_9_as_typed(e2e_site: RunbookOnSim) -> None:
    book, c = e2e_site, e2e_site.cluster
    p = all_joined(c)  # a module before this one may have left a node restarting
    assert p.returncode == 0, p.stdout[-1500:] + p.stderr[-1500:]
    done = book.run(range(6, 11))
    assert not failed(done), failed(done)
    by_step: dict[int, list] = {}
    for t in done:
        by_step.setdefault(t.command.step, []).append(t)
    # 6: the doctor on every host, as root
    assert sorted(t.host for t in by_step[6]) == c.hosts
    # 7: the 397B rehearsal from the control node, through the operator, with the site's 3-host layout
    rehearse = by_step[7][0]
    assert "sudo -n /usr/local/sbin/verl-train train-397b --rehearse" in rehearse.out, rehearse.out[:2000]
    report = json.loads(on_host(c, "a3-01", f"cat {EXPERIMENTS}/qwen3.5-397b/rehearsals/3-nodes.json").stdout)
    assert report["summary"]["nnodes"] == 3, report["summary"]
    # 8: the ladder's first rung (make smoke), 2 steps of the 35B FSDP recipe under an experiment name of its own
    (rung,) = by_step[8]
    assert "make smoke RECIPE=qwen3.5-35b-fsdp" in rung.line
    assert "--set EXPERIMENT_NAME=smoke-qwen3.5-35b-fsdp --set TOTAL_TRAINING_STEPS=2" in rung.out, rung.out[:2000]
    runs = on_host(c, "a3-01", f"ls -1d {EXPERIMENTS}/smoke-qwen3.5-35b-fsdp/runs/*/").stdout.split()
    assert runs, rung.out[-3000:]
    steps = on_host(c, "a3-01", f"cat {runs[-1].rstrip('/')}/metrics.jsonl").stdout.splitlines()
    assert [json.loads(s)["step"] for s in steps if s.strip()] == [1, 2]
    # what did not run says why: the upper rungs and 397B training need NPUs
    reasons = {cmd.line: why for cmd, why in book.skipped if cmd.step >= 6}
    assert len(reasons) == 4 and all("NPU" in why for why in reasons.values()), reasons
