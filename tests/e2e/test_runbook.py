"""README's runbook as typed, on the simulated real-site cluster (tests/e2e/conftest.py brings it up with steps 1 to
5; this module types the rest). Every marked line either ran, with its placeholders filled, or was skipped for the
reason tests/runbook.py gives; what each typed step must leave behind is checked here."""

from __future__ import annotations

import json
import re
from pathlib import Path

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
    # 6: doctor on every host at once from the control node (become), one table and its verdict
    (doctor,) = by_step[6]
    assert f"doctor: all {len(c.hosts)} hosts pass" in doctor.out, doctor.out[-3000:]
    assert all(f"{h} " in doctor.out for h in c.hosts), doctor.out[-3000:]
    # 7: the 397B rehearsal from the control node, through the operator, with the site's 3-host layout
    rehearse = by_step[7][0]
    assert "sudo -n /usr/local/sbin/verl-train train-397b --rehearse" in rehearse.out, rehearse.out[:2000]
    report = json.loads(on_host(c, "a3-01", f"cat {EXPERIMENTS}/qwen3.5-397b/rehearsals/3-nodes.json").stdout)
    assert report["summary"]["nnodes"] == 3, report["summary"]
    # 8: the ladder's first rung (make smoke), 2 steps of the 35B FSDP recipe as a fresh experiment; typed again
    # (a smoke after a fix), it trains again instead of finding the first one complete
    (rung,) = by_step[8]
    assert "make smoke RECIPE=qwen3.5-35b-fsdp" in rung.line
    again = book.type(rung.command)
    assert again.proc.returncode == 0, again.out[-3000:]
    assert "nothing to train" not in again.out, again.out[-2000:]
    for t in (rung, again):
        assert "--set TOTAL_TRAINING_STEPS=2 --set SAVE_FREQ=-1 --set RESTARTS=0" in t.out, t.out[:2000]
    smokes = on_host(c, "a3-01", f"ls -1d {EXPERIMENTS}/smoke-qwen3.5-35b-fsdp-*/runs/*/").stdout.split()
    assert len(smokes) == 2 and len({s.split("/")[-4] for s in smokes}) == 2, smokes
    for run in smokes:
        steps = on_host(c, "a3-01", f"cat {run.rstrip('/')}/metrics.jsonl").stdout.splitlines()
        assert [json.loads(s)["step"] for s in steps if s.strip()] == [1, 2], run
    # and no checkpoint: a smoke of the 397B would otherwise leave TBs nobody resumes
    ckpts = on_host(c, "a3-01", "find /mnt/shared/checkpoints -path '*smoke-qwen3.5-35b-fsdp-*'").stdout.split()
    assert not ckpts, ckpts
    # the remembered site: the follow-up verbs need no INVENTORY=
    runs_out = book.type(runbook.Command(10, ("control node",), "make runs"))
    assert runs_out.proc.returncode == 0 and "smoke-qwen3.5-35b-fsdp-" in runs_out.out, runs_out.out[-2000:]
    experiment = smokes[-1].split("/")[-4]
    attach = book.type(runbook.Command(10, ("control node",), f"make attach RUN={experiment}"))
    assert attach.proc.returncode == 0 and ": finished" in attach.out, attach.out[-2000:]
    # stop reaches the same head: a finished run is refused by name (exit 2), not looked for on the sample's head
    stop = book.type(runbook.Command(10, ("control node",), f"make stop RUN={experiment}"))
    assert stop.proc.returncode == 2, stop.out[-2000:]
    assert f"{experiment}" in stop.out and "not running; nothing to stop" in stop.out, stop.out[-2000:]
    logs = book.type(runbook.Command(10, ("control node",), f"make logs RUN={experiment}"))
    assert logs.proc.returncode == 0, logs.out[-3000:]
    bundle = re.search(r"bundle: (\S+\.tar\.gz)", logs.out)
    assert bundle and Path(bundle.group(1)).is_file() and experiment in bundle.group(1), logs.out[-2000:]
    # what did not run says why: the upper rungs and 397B training need NPUs
    reasons = {cmd.line: why for cmd, why in book.skipped if cmd.step >= 6}
    assert len(reasons) == 4 and all("NPU" in why for why in reasons.values()), reasons
