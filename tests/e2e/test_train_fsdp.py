"""verl's own GRPO trainer on the simulated cluster, as a user runs it: `make train` from the control node as the
inventory's operator (verl-train on the head of the shared real-site 3-host cluster, tests/e2e/conftest.py), with
the simulated site's tiny layout (DEVICE=cpu: the CPU stand-ins of verl-recipe:sim) and the model path from the
inventory's site_models. Proven here: the job on the cluster's Ray with its token, FSDP2 ranks on two hosts (gloo
across the cluster network), data from shared storage, the reward, weight sync to the stand-in rollout, a
checkpoint on shared storage each step, the run record with verl's metrics and the Hydra override typed after `--`;
then a host lost mid-run (exit 3, named) and the same command (`docker compose run` as root on the head) resuming
from the latest checkpoint without counting a step twice, then saying `complete` and refusing another layout over
that checkpoint; a detached run (`make train DETACH=1`) that outlives its SSH session, `make runs`, `make stop`
and the same command resuming, followed to its end by `make attach`."""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import time
from collections.abc import Callable

import pytest

from simkit.cluster import SimCluster
from simkit.paths import REPO, simctl
from tests.e2e.test_train_rehearsal import COMPOSE, all_joined, on_host

pytestmark = pytest.mark.docker

EXPERIMENTS = "/mnt/shared/runs/verl_grpo_qwen3_5"
CHECKPOINTS = "/mnt/shared/checkpoints/verl_grpo_qwen3_5"
TRAIN = f"{COMPOSE} run --rm train-35b-fsdp"
LOST_STEPS = 5
# RESTARTS=0: the manual path (a person runs the same command again); the restart policy is tested below.
LOST = f"--set EXPERIMENT_NAME=e2e-lost-node --set TOTAL_TRAINING_STEPS={LOST_STEPS} --set RESTARTS=0"
RUN_TIMEOUT_S = 1500


@pytest.fixture(scope="module")
def cluster(e2e_cluster: tuple[SimCluster, subprocess.CompletedProcess[str]]) -> SimCluster:
    c = e2e_cluster[0]
    p = all_joined(c)  # a module before this one may have left a node restarting
    assert p.returncode == 0, f"the cluster did not come back whole: {p.stdout[-1500:]}{p.stderr[-1500:]}"
    return c


def runs(c: SimCluster, experiment: str) -> list[str]:
    p = on_host(c, "a3-01", f"ls -1d {EXPERIMENTS}/{experiment}/runs/*/ 2>/dev/null")
    return [line.rstrip("/") for line in p.stdout.split()]


def read_json(c: SimCluster, path: str) -> dict:
    p = on_host(c, "a3-01", f"cat {path}")
    assert p.returncode == 0, f"{path}: {p.stderr}"
    return json.loads(p.stdout)


def metrics(c: SimCluster, run_dir: str) -> list[dict]:
    p = on_host(c, "a3-01", f"cat {run_dir}/metrics.jsonl 2>/dev/null")
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def worker_hosts(c: SimCluster, run_dir: str) -> set[str]:
    """Hosts (other than the head) whose Ray workers printed into verl's log: Ray prefixes their lines with ip=."""
    log = on_host(c, "a3-01", f"grep -ao 'WorkerDict pid=[0-9]*, ip=[0-9.]*' {run_dir}/train.log | sort -u").stdout
    ips = set(re.findall(r"ip=([0-9.]+)", log))
    return {h for h in c.hosts if c.ip(h) in ips}


# Where a run could leave a secret: the run records and node logs on shared storage, Ray's session logs on each
# host, and every container's configuration (environment, command line, mounts). The pattern comes on stdin, so the
# secret is on no command line here either.
LEAK_PLACES = (
    "f=$(mktemp) && cat > $f && grep -rlaF -f $f /mnt/shared/runs /var/lib/verl-recipe/ray; "
    "ids=$(docker ps -aq); [ -z \"$ids\" ] || docker inspect $ids | grep -qaF -f $f && echo 'in docker inspect'; "
    "rm -f $f"
)


def leaks(c: SimCluster, secret: str) -> dict[str, str]:
    found = {}
    for h in c.hosts:
        p = c.shell(h, f"sudo sh -c {shlex.quote(LEAK_PLACES)}", data=f"{secret}\n".encode())
        out = p.stdout.decode(errors="replace").strip()
        if out:
            found[h] = out
    return found


# An extra Hydra override after ARGS' own `--` (verl's default value: the run is the same, the record shows it).
OVERRIDE = "trainer.log_val_generations=0"


def test_make_train_35b_fsdp_as_the_operator_trains_on_two_hosts(cluster: SimCluster) -> None:
    """The runbook's command from the control node: `make train` logs in to the head as the inventory's operator
    (not the deploy account, which has no docker group here) and runs verl-train with a Hydra override."""
    c = cluster
    p = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO), "train", "RECIPE=qwen3.5-35b-fsdp",
         f"INVENTORY={c.inventory}", f"ARGS=-- {OVERRIDE}"],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-5000:]
    assert f"{simctl.OPERATOR_USER}@" in out, out[:2000]
    assert f"sudo -n /usr/local/sbin/verl-train train-35b-fsdp -- {OVERRIDE}" in out, out[:2000]
    assert "CPU STAND-INS" in out, "the run says what is not real in it"
    run_dir = runs(c, "qwen3.5-35b-fsdp")[-1]
    outcome = read_json(c, f"{run_dir}/outcome.json")
    assert outcome["exit_code"] == 0
    settings = read_json(c, f"{run_dir}/settings.json")
    assert "STAND-INS" in settings["standin"]
    # the model path from the inventory's site_models (away from the recipe's default), and the override
    model = c.site_vars()["site_models"]["qwen3.5-35b-fsdp"]
    assert settings["settings"]["MODEL_PATH"]["value"] == model, settings["settings"]["MODEL_PATH"]
    assert OVERRIDE in on_host(c, "a3-01", f"cat {run_dir}/command.sh").stdout
    # the least memory of the hosts (the real-site profile gives them different amounts), measured by the preflight
    least = min(int(h["mem_gib"]) for h in c.info["hosts"])
    assert settings["settings"]["HOST_MEM_GIB"]["value"] in (least, str(least)), settings["settings"]["HOST_MEM_GIB"]
    assert settings["settings"]["DEVICE"] == {
        "value": "cpu",
        "from": "site file /etc/verl-recipe/site.yaml (recipes.qwen3.5-35b-fsdp)",
    }, "the layout comes from the site"
    steps = metrics(c, run_dir)
    assert [s["step"] for s in steps] == [1, 2, 3], "3 steps by default, each in verl's own metric stream"
    for s in steps:
        d = s["data"]
        assert math.isfinite(d["actor/grad_norm"]) and d["actor/grad_norm"] > 0, "the policy really moved"
        assert d["critic/rewards/mean"] > 0, "the reward ran and scored"
        assert d["critic/advantages/max"] > 0, "GRPO advantages are not all zero"
        assert d["response_length/mean"] > 0
    log = on_host(c, "a3-01", f"cat {run_dir}/train.log").stdout
    assert "[STAND-IN] rollout server" in log and "weights synced from the trainer for step 3" in log
    assert worker_hosts(c, run_dir), "an FSDP rank ran on a second host (a gloo collective across hosts)"
    page = on_host(c, "a3-01", f"cat {run_dir}/run.html").stdout
    assert "<svg" in page and "STAND-IN" in page.upper(), "the run page, drawn from this run's own record"
    ckpt = on_host(c, "a3-02", f"ls {CHECKPOINTS}/qwen3.5-35b-fsdp/ {CHECKPOINTS}/qwen3.5-35b-fsdp/global_step_3/actor")
    # CKPT_KEEP=2 (recipes/_base.yaml): a save every step, the newest two kept, the first pruned
    saved = sorted(w for w in ckpt.stdout.split() if w.startswith("global_step_"))
    assert saved == ["global_step_2", "global_step_3"], ckpt.stdout + ckpt.stderr
    assert "model_world_size_2_rank_1.pt" in ckpt.stdout, "both ranks saved their shard on shared storage"
    # The simulated site's planted secret file reached verl's workers as $NAME, and nothing of the run holds it.
    assert f"secret files in its environment: {simctl.PLANTED_SECRET}" in log
    secret = simctl.planted_secret_file(c.inventory).read_text().strip()
    assert len(secret) > 20 and leaks(c, secret) == {}, "the secret's content is in a record, log or container"
    assert leaks(c, "weights synced from the trainer"), "the leak search finds what is there"
    assert any("in docker inspect" in v for v in leaks(c, "RAY_AUTH_TOKEN_PATH").values()), "containers searched too"


def power_off_at_first_step(c: SimCluster, experiment: str, before: set[str], alive: Callable[[], bool]) -> str:
    """At the new run's first step with a rank on a second host, that host is powered off: its name."""
    end = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < end and alive():
        found = [r for r in runs(c, experiment) if r not in before]
        hosts = worker_hosts(c, found[-1]) if found and metrics(c, found[-1]) else set()
        if hosts:
            victim = sorted(hosts)[0]
            c.simctl("fault", victim, "down")
            return victim
        time.sleep(5)
    pytest.fail("the run reached its first step with a rank on a second host")


def train_losing_a_host(
    c: SimCluster,
    args: str,
    experiment: str,
    back_after_s: float | None = None,
    timeout: int = RUN_TIMEOUT_S,
    spare_too: bool = False,
) -> tuple[int, str, str, list[str]]:
    """`docker compose run train-35b-fsdp ARGS` as root on the head (the deploy account has no docker group on this
    site); at the new run's first step with a rank on a second host, that host is powered off (`spare_too`: every
    host but the head, so that no spare is left), and on again after `back_after_s` (None: at the end). The exit
    code, the output, the host and the run folders the command wrote."""
    before = set(runs(c, experiment))
    proc = c.popen("a3-01", "sudo -n sh -c " + shlex.quote(f"cd /opt/verl-recipe && {TRAIN} {args}"))
    victim, out = "", ""
    others = [h for h in c.hosts if h != "a3-01"]
    try:
        victim = power_off_at_first_step(c, experiment, before, lambda: proc.poll() is None)
        if spare_too:
            for h in others:
                if h != victim:
                    c.simctl("fault", h, "down")
        if back_after_s is not None:
            time.sleep(back_after_s)
            c.simctl("fault", victim, "clear")
        rc = proc.wait(timeout=timeout)
        out = proc.stdout.read() if proc.stdout else ""
    finally:
        if proc.poll() is None:
            proc.kill()
        for h in others if spare_too else [victim] if victim else []:
            c.simctl("fault", h, "clear")
    return rc, out, victim, [r for r in runs(c, experiment) if r not in before]


def test_make_export_writes_a_checked_folder_whose_logits_are_the_trained_actors(cluster: SimCluster) -> None:
    """README's after-training step on the run above: `make export` from the control node (the head's `runs`
    service, verl's own FSDP merger), then the folder loaded by transformers gives the trained actor's logits (its
    rank files put together independently, tests/e2e/export_logits.py) and not the base model's."""
    c = cluster
    p = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO), "export", "RUN=qwen3.5-35b-fsdp", f"INVENTORY={c.inventory}"],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=600,
    )  # fmt: skip
    out = p.stdout + p.stderr
    export = f"{CHECKPOINTS}/qwen3.5-35b-fsdp/export/global_step_3"
    assert p.returncode == 0 and f"exported: {export}" in out, out[-4000:]
    assert "needs transformers >= 5" in out, "the folder says which transformers can load it"
    manifest = read_json(c, f"{export}/verl_recipe_export.json")
    assert manifest["source"]["step"] == 3 and manifest["source"]["engine"] == "fsdp", manifest["source"]
    model = c.site_vars()["site_models"]["qwen3.5-35b-fsdp"]
    assert manifest["base_model"]["path"] == model and "tokenizer_config.json" in manifest["from_base_model"]
    script = f"{CHECKPOINTS}/export_logits.py"
    put = c.shell("a3-01", f"sudo sh -c 'cat > {script}'", data=(REPO / "tests/e2e/export_logits.py").read_bytes())
    assert put.returncode == 0, put.stderr
    actor = f"{CHECKPOINTS}/qwen3.5-35b-fsdp/global_step_3/actor"
    p = on_host(c, "a3-01", f"{COMPOSE} run --rm --entrypoint python runs {script} {actor} {export} {model}")
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["missing"] == [] and got["unexpected"] == [], got
    # bf16 weights on both sides (the export is bf16; the actor's fp32 shards rounded the same way)
    assert got["export_vs_actor"] <= 1e-4 * max(1.0, got["scale"]), got
    assert got["export_vs_base"] > 1e-3, "three steps of GRPO moved the logits away from the base model's"
    # the same command again: the folder is there, nothing is overwritten
    p = on_host(c, "a3-01", f"{COMPOSE} run --rm runs export qwen3.5-35b-fsdp")
    assert p.returncode == 2 and f"--out {export}: exists already" in p.stderr, (p.stdout + p.stderr)[-2000:]


def test_make_eval_scores_the_save_and_the_base_with_verls_own_validation(cluster: SimCluster) -> None:
    """README's eval step on the run above: `make eval` from the control node runs verl's validation twice on the
    cluster (the base model, then the save of step 3, resume_path) with the run's own launch; the save's numbers are
    the ones the training logged when it validated at that step, and the result is on the run page."""
    c = cluster
    p = make_on_site(c, "eval", "RUN=qwen3.5-35b-fsdp", timeout=RUN_TIMEOUT_S)
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "95% CI" in out, out[-5000:]
    run_dir = runs(c, "qwen3.5-35b-fsdp")[-1]
    found = on_host(c, "a3-01", f"ls -1 {run_dir}/eval/*/eval.json").stdout.split()
    assert len(found) == 1, found
    result = read_json(c, found[0])
    assert result["trained"]["step"] == 3 and result["trained"]["save"].endswith("global_step_3"), result["trained"]
    rows = [r for r in result["verl"] if r["base"] is not None and r["trained"] is not None]
    assert rows, result["verl"]
    # verl validated the model at the last step (step 3) in training: the trained model's numbers are those
    logged = next(m for m in metrics(c, run_dir) if m["step"] == 3)
    for r in rows:
        key = f"val-core/{r['data_source']}/{r['metric']}"
        assert math.isclose(r["trained"], logged["data"][key], abs_tol=1e-9), (key, r, logged["data"].get(key))
    every = next(d for d in result["samples"] if d["data_source"] == "all")
    assert every["n_base"] == every["n_trained"] > 0 and every["paired"], every
    assert every["low"] is not None and every["low"] <= every["difference"] <= every["high"], every
    page = on_host(c, "a3-01", f"cat {run_dir}/run.html").stdout
    assert 'id="eval"' in page and "global_step_3" in page


# The manual path (RESTARTS=0) and the wait that runs out: `make test-scenarios`; CI keeps the restart on a spare.
@pytest.mark.scenario
def test_lost_host_mid_run_then_the_same_command_resumes(cluster: SimCluster) -> None:
    c = cluster
    before = set(runs(c, "e2e-lost-node"))
    rc, out, victim, written = train_losing_a_host(c, LOST, "e2e-lost-node", timeout=300)
    assert rc == 3, out[-4000:]
    assert victim in out and "lost" in out, "the head names the lost host"
    first = written[0]
    lost = read_json(c, f"{first}/lost_nodes.json")
    assert [x["host"] for x in lost] == [victim]
    assert read_json(c, f"{first}/outcome.json")["exit_code"] == 3
    done = max(s["step"] for s in metrics(c, first))
    assert all_joined(c).returncode == 0, "the host came back and its node rejoined"

    p = on_host(c, "a3-01", f"{TRAIN} {LOST}", timeout=RUN_TIMEOUT_S)
    assert p.returncode == 0, (p.stdout + p.stderr)[-5000:]
    second = [r for r in runs(c, "e2e-lost-node") if r not in before][-1]
    resumed = read_json(c, f"{second}/settings.json")["resumed_from_step"]
    # verl 0.8.0 saves a step's checkpoint before it logs the step (verl/trainer/ppo/ray_trainer.py, fit():
    # _save_checkpoint, then logger.log), so a host lost between the two leaves one checkpoint past the last line
    assert isinstance(resumed, int) and 1 <= resumed <= done + 1, f"resumed from {resumed}, first run logged {done}"
    assert f"global_step_{resumed}" in on_host(c, "a3-01", f"grep -a 'Resuming from' {second}/train.log").stdout
    steps = [s["step"] for s in metrics(c, second)]
    assert steps == list(range(resumed + 1, LOST_STEPS + 1)), f"no step counted twice: {steps}"
    verdict = read_json(c, f"{second}/outcome.json")["steps"]
    assert verdict["verdict"] == "complete" and verdict["missing"] == verdict["twice"] == [], verdict
    assert verdict["attempts"] == [first.rsplit("/", 1)[1], second.rsplit("/", 1)[1]], verdict
    assert verdict["redone"] == list(range(resumed + 1, done + 1)), verdict

    # The same command once more: the run is complete, nothing trains (verl alone would train step 6 of 5).
    p = on_host(c, "a3-01", f"{TRAIN} {LOST}", timeout=RUN_TIMEOUT_S)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert f"global_step_{LOST_STEPS} is step {LOST_STEPS} of TOTAL_TRAINING_STEPS={LOST_STEPS}" in out, out[-3000:]
    assert runs(c, "e2e-lost-node")[-1] == second, "no run was started"
    # Another layout over this checkpoint (one host: world size 1 against the checkpoint's 2) is refused before
    # anything starts, in one line naming the checkpoint, what differs and the fix; verl alone would load the model,
    # then fail on model_world_size_1_rank_0.pt.
    p = on_host(c, "a3-01", f"{TRAIN} {LOST} --set NNODES=1", timeout=RUN_TIMEOUT_S)
    out = p.stdout + p.stderr
    assert p.returncode == 2, out[-3000:]
    line = next((x for x in out.splitlines() if f"global_step_{LOST_STEPS}: was written with" in x), "")
    assert "world_size=2" in line and "this launch has world_size=1" in line and "EXPERIMENT_NAME" in line, out[-3000:]
    assert runs(c, "e2e-lost-node")[-1] == second, "no run was started"


DETACHED = "e2e-detached"
# Enough steps (about 2 s each on the stand-ins) for `make runs` and `make stop` to find it still running.
DETACHED_STEPS = 40
# The stand-ins' data gives 8 steps an epoch: TOTAL_EPOCHS lets the run reach DETACHED_STEPS.
DETACHED_ARGS = f"--set EXPERIMENT_NAME={DETACHED} --set TOTAL_TRAINING_STEPS={DETACHED_STEPS} --set TOTAL_EPOCHS=10"


def make_on_site(c: SimCluster, *args: str, timeout: int = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO), *args, f"INVENTORY={c.inventory}"],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=timeout,
    )  # fmt: skip


# `make test-scenarios`: CI keeps DETACH=1, `make attach` and `make runs` in the spare-host test below.
@pytest.mark.scenario
def test_a_detached_run_outlives_its_session_stops_cleanly_and_resumes(cluster: SimCluster) -> None:
    """`make train DETACH=1` returns at once (its SSH session is over) and the run goes on; `make runs` shows it,
    `make stop` stops it and records who and where; the same command, detached again, resumes from that checkpoint
    and `make attach` follows it to its end, every step once."""
    c = cluster
    p = make_on_site(c, "train", "RECIPE=qwen3.5-35b-fsdp", "DETACH=1", f"ARGS={DETACHED_ARGS}", timeout=300)
    assert p.returncode == 0 and "detached:" in p.stderr, (p.stdout + p.stderr)[-3000:]
    end = time.monotonic() + RUN_TIMEOUT_S
    first = ""
    while time.monotonic() < end and not first:
        found = runs(c, DETACHED)
        if found and len(metrics(c, found[0])) >= 2:
            first = found[0]
        time.sleep(5)
    assert first, "the detached run reached its second step after the session that started it ended"
    listed = make_on_site(c, "runs", timeout=300)
    assert listed.returncode == 0, listed.stderr[-3000:]
    row = next((x for x in listed.stdout.splitlines() if x.startswith(f"{DETACHED}/")), "")
    assert " running " in row and f"/{DETACHED_STEPS}" in row, listed.stdout[-3000:]

    stopped = make_on_site(c, "stop", f"RUN={DETACHED}", timeout=600)
    assert stopped.returncode == 0, (stopped.stdout + stopped.stderr)[-3000:]
    outcome = read_json(c, f"{first}/outcome.json")
    assert outcome["exit_code"] == 7, outcome
    who = outcome["stopped"]
    assert who["by"].startswith(f"{simctl.OPERATOR_USER}@"), who
    at = who["at_step"]
    assert at >= 2 and who["last_checkpoint"], who
    assert f"last complete checkpoint: {who['last_checkpoint']}" in stopped.stdout

    p = make_on_site(c, "train", "RECIPE=qwen3.5-35b-fsdp", "DETACH=1", f"ARGS={DETACHED_ARGS}", timeout=300)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    end = time.monotonic() + 300
    while time.monotonic() < end and len(runs(c, DETACHED)) < 2:
        time.sleep(2)  # the detached container waits for the cluster, then writes its run folder
    assert len(runs(c, DETACHED)) == 2, "the second detached run started"
    followed = make_on_site(c, "attach", f"RUN={DETACHED}")
    assert followed.returncode == 0, (followed.stdout + followed.stderr)[-3000:]
    last = f"progress: step {DETACHED_STEPS}/{DETACHED_STEPS}"
    assert last in followed.stdout and "finished (exit 0)" in followed.stdout, followed.stdout[-3000:]
    second = runs(c, DETACHED)[-1]
    resumed = read_json(c, f"{second}/settings.json")["resumed_from_step"]
    assert who["last_checkpoint"] and who["last_checkpoint"].endswith(f"global_step_{resumed}"), (who, resumed)
    verdict = read_json(c, f"{second}/outcome.json")["steps"]
    assert verdict["verdict"] == "complete" and len(verdict["attempts"]) == 2, verdict


RECOVER = "e2e-recover"


@pytest.mark.scenario
def test_with_no_spare_left_the_restart_wait_ends_the_run_naming_the_hosts(cluster: SimCluster) -> None:
    """RESTARTS (default 3): every host but the head powered off mid-run (NNODES=2 of 3: no spare left), kept away
    past RESTART_WAIT: the wait ends the run, names the hosts, and the record says it is not restarting."""
    c = cluster
    args = f"--set EXPERIMENT_NAME={RECOVER} --set TOTAL_TRAINING_STEPS=5 --set RESTART_WAIT=30"
    rc, out, victim, attempts = train_losing_a_host(c, args, RECOVER, timeout=600, spare_too=True)
    assert rc == 3, out[-4000:]
    assert "restart 1 of 3: lost node" in out and "waiting up to 30 s" in out, out[-4000:]
    assert victim in out.split("waiting up to 30 s", 1)[1], "the wait names the host that did not come back"
    outcome = read_json(c, f"{attempts[-1]}/outcome.json")
    assert outcome["restart"]["restarting"] is False and "restart wait ended" in outcome["restart"]["why"], outcome
    assert len(attempts) == 1, attempts
    assert all_joined(c).returncode == 0


SPARE = "e2e-spare"
BACK_AFTER_S = 45


def test_a_detached_run_restarts_at_once_on_the_spare_and_the_host_back_later_changes_nothing(
    cluster: SimCluster,
) -> None:
    """NNODES=2 on 3 hosts: the host lost mid-run of a detached run (`make train DETACH=1`) is left out and the run
    starts again at once on the healthy two, before the host is back (45 s, longer than Ray's own death timeout);
    the host's return does not disturb the new attempt; `make attach` follows it to its end, every step once, and
    `make runs` says restarted and finished, never recovering or gone."""
    c = cluster
    args = f"--set EXPERIMENT_NAME={SPARE} --set TOTAL_TRAINING_STEPS=6"
    before = set(runs(c, SPARE))
    p = make_on_site(c, "train", "RECIPE=qwen3.5-35b-fsdp", "DETACH=1", f"ARGS={args}", timeout=300)
    assert p.returncode == 0 and "detached:" in p.stderr, (p.stdout + p.stderr)[-3000:]
    victim = ""
    try:
        victim = power_off_at_first_step(c, SPARE, before, lambda: True)
        down_at = time.monotonic()
        while time.monotonic() < down_at + BACK_AFTER_S and len(set(runs(c, SPARE)) - before) < 2:
            time.sleep(2)
        time.sleep(max(0.0, down_at + BACK_AFTER_S - time.monotonic()))
    finally:
        if victim:
            c.simctl("fault", victim, "clear")
    while time.monotonic() < down_at + RUN_TIMEOUT_S and len(set(runs(c, SPARE)) - before) < 2:
        time.sleep(2)
    restarted_s = time.monotonic() - down_at  # to the next attempt's folder (2 s polls)
    followed = make_on_site(c, "attach", f"RUN={SPARE}")
    attempts = sorted(set(runs(c, SPARE)) - before)
    said = on_host(c, "a3-01", f"tail -n 40 {attempts[-1]}/supervisor.log {attempts[-1]}/train.log").stdout
    assert followed.returncode == 0 and "finished (exit 0)" in followed.stdout, followed.stdout[-2000:] + said[-6000:]
    assert len(attempts) == 2, attempts
    first = read_json(c, f"{attempts[0]}/outcome.json")
    assert first["exit_code"] == 3 and first["restart"]["restarting"] is True, first
    second = read_json(c, f"{attempts[1]}/settings.json")
    if restarted_s < BACK_AFTER_S:  # started while the host was off: on the spare, the host named as left out
        assert second["left_out"] == [f"{victim} ({c.ip(victim)})"], second.get("left_out")
    assert second["restart_of"] == attempts[0].rsplit("/", 1)[1]
    assert len(second["nodes"]) >= 2, second["nodes"]
    verdict = read_json(c, f"{attempts[1]}/outcome.json")["steps"]
    assert verdict["verdict"] == "complete" and verdict["missing"] == verdict["twice"] == [], verdict
    listed = make_on_site(c, "runs", timeout=300)
    rows = {x.split()[0]: x.split()[1] for x in listed.stdout.splitlines() if x.startswith(f"{SPARE}/")}
    names = [f"{SPARE}/{a.rsplit('/', 1)[1]}" for a in attempts]
    assert [rows.get(n) for n in names] == ["restarted", "finished"], listed.stdout[-3000:]
    # CKPT_KEEP (2) across both attempts: a save every step, the first attempt's older ones pruned too
    kept = on_host(c, "a3-01", f"ls -1 {CHECKPOINTS}/{SPARE} | grep -c '^global_step_'").stdout.strip()
    assert kept == "2", f"{kept} saves kept in {CHECKPOINTS}/{SPARE}, CKPT_KEEP is 2"
    print(f"host lost -> next attempt on the spare: {restarted_s:.0f} s")


HEAD_LOST = "e2e-head-lost"


@pytest.mark.scenario
def test_the_head_power_cycled_mid_run_is_gone_in_runs_and_the_same_command_resumes(cluster: SimCluster) -> None:
    """The supervisor lives on the head (docs/cluster.md, the outage table): the head powered off mid-run of a
    detached run and on again. Nothing can act for the run, so `make runs` says `gone` once its heartbeat is stale
    (90 s), with the command that resumes; that command resumes from the newest save and ends complete."""
    c = cluster
    args = f"--set EXPERIMENT_NAME={HEAD_LOST} --set TOTAL_TRAINING_STEPS=6"
    before = set(runs(c, HEAD_LOST))
    p = make_on_site(c, "train", "RECIPE=qwen3.5-35b-fsdp", "DETACH=1", f"ARGS={args}", timeout=300)
    assert p.returncode == 0 and "detached:" in p.stderr, (p.stdout + p.stderr)[-3000:]
    end, first = time.monotonic() + RUN_TIMEOUT_S, ""
    while time.monotonic() < end and not first:
        found = [r for r in runs(c, HEAD_LOST) if r not in before]
        first = found[-1] if found and len(metrics(c, found[-1])) >= 2 else ""
        time.sleep(3)
    assert first, "the detached run reached its second step"
    power_cycle_at = time.monotonic()
    c.simctl("fault", "a3-01", "down")
    time.sleep(5)
    c.simctl("fault", "a3-01", "clear")
    assert all_joined(c).returncode == 0, "the head came back and every node joined it again"
    row, name = "", f"{HEAD_LOST}/{first.rsplit('/', 1)[1]} "
    while time.monotonic() < power_cycle_at + 600 and " gone " not in row:
        listed = make_on_site(c, "runs", timeout=300)
        row = next((x for x in listed.stdout.splitlines() if x.startswith(name)), "")
        time.sleep(10)
    assert " gone " in row and "resume:" in row and f"EXPERIMENT_NAME={HEAD_LOST}" in row, row
    p = make_on_site(c, "train", "RECIPE=qwen3.5-35b-fsdp", f"ARGS={args}")
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    second = runs(c, HEAD_LOST)[-1]
    assert second != first and read_json(c, f"{second}/settings.json")["resumed_from_step"] >= 1
    verdict = read_json(c, f"{second}/outcome.json")["steps"]
    assert verdict["verdict"] == "complete" and verdict["missing"] == verdict["twice"] == [], verdict


SMALL = "/mnt/shared/e2e-small-ckpt"


def test_a_ckpt_dir_too_small_for_the_kept_saves_is_refused_before_verl_starts(cluster: SimCluster) -> None:
    """A 64 MB filesystem at CKPT_DIR (the stand-in's saves, with their tokenizer and state, are counted at about
    64 MB each; CKPT_KEEP=2 plus the one being written): validate refuses the launch in one line with the figures
    and nothing is started or written."""
    c = cluster
    mount = on_host(c, "a3-01", f"mkdir -p {SMALL} && mount -t tmpfs -o size=64m tmpfs {SMALL}")
    assert mount.returncode == 0, mount.stderr
    try:
        args = f"--set EXPERIMENT_NAME=e2e-small --set CKPT_DIR={SMALL} --set TOTAL_TRAINING_STEPS=3"
        p = on_host(c, "a3-01", f"{TRAIN} {args}", timeout=RUN_TIMEOUT_S)
        out = p.stdout + p.stderr
        assert p.returncode == 2, out[-3000:]
        line = next((x for x in out.splitlines() if x.startswith(f"error: CKPT_DIR={SMALL}: ")), "")
        assert "free at" in line and "CKPT_KEEP=2" in line and "fix: " in line, out[-3000:]
        assert runs(c, "e2e-small") == [], "nothing was started"
        assert on_host(c, "a3-01", f"ls -A {SMALL}").stdout.strip() == "", "nothing was written there"
    finally:
        on_host(c, "a3-01", f"umount {SMALL} && rmdir {SMALL}")


BROKEN_DATA = "/mnt/shared/data/e2e-broken/train.parquet"


def test_a_deterministic_failure_is_not_retried(cluster: SimCluster) -> None:
    """A training file that passes validate (parquet's magic bytes at both ends) but whose body is damaged: verl's
    dataset loader fails the same way every time, so the restart policy (RESTARTS default 3) does not start it
    again, and says why in the output and outcome.json; one attempt, no second run folder."""
    c = cluster
    experiment = "e2e-deterministic"
    made = on_host(
        c, "a3-01",
        f"mkdir -p {BROKEN_DATA.rsplit('/', 1)[0]} && "
        f"{{ printf PAR1; head -c 4096 /dev/urandom; printf PAR1; }} > {BROKEN_DATA} && chmod 644 {BROKEN_DATA}",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    before = set(runs(c, experiment))
    p = on_host(
        c, "a3-01",
        f"{TRAIN} --set EXPERIMENT_NAME={experiment} --set TOTAL_TRAINING_STEPS=2 --set TRAIN_FILES={BROKEN_DATA}",
        timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode not in (0, 3), out[-4000:]
    assert "not restarted:" in out and "is not transient" in out, out[-4000:]
    assert "restart 1 of" not in out, "a deterministic failure is never started again"
    written = [r for r in runs(c, experiment) if r not in before]
    assert len(written) == 1, f"one attempt only: {written}"
    outcome = read_json(c, f"{written[0]}/outcome.json")
    assert outcome["restart"]["restarting"] is False and "not transient" in outcome["restart"]["why"], outcome
