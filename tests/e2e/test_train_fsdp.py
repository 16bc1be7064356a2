"""verl's own GRPO trainer on the simulated cluster, as a user runs it: `make train` from the control node as the
inventory's operator (verl-train on the head of the shared real-site 3-host cluster, tests/e2e/conftest.py), with
the simulated site's tiny layout (DEVICE=cpu: the CPU stand-ins of verl-recipe:sim) and the model path from the
inventory's site_models. Proven here: the job on the cluster's Ray with its token, FSDP2 ranks on two hosts (gloo
across the cluster network), data from shared storage, the reward, weight sync to the stand-in rollout, a
checkpoint on shared storage each step, the run record with verl's metrics and the Hydra override typed after `--`;
then a host lost mid-run (exit 3, named) and the same command (`docker compose run` as root on the head) resuming
from the latest checkpoint without counting a step twice."""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import time

import pytest

from simkit.cluster import SimCluster
from simkit.paths import REPO, simctl
from tests.e2e.test_train_rehearsal import COMPOSE, all_joined, on_host

pytestmark = pytest.mark.docker

EXPERIMENTS = "/mnt/shared/runs/verl_grpo_qwen3_5"
CHECKPOINTS = "/mnt/shared/checkpoints/verl_grpo_qwen3_5"
TRAIN = f"{COMPOSE} run --rm train-35b-fsdp"
LOST_STEPS = 5
LOST = f"--set EXPERIMENT_NAME=e2e-lost-node --set TOTAL_TRAINING_STEPS={LOST_STEPS}"
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
    assert all(f"global_step_{k}" in ckpt.stdout for k in (1, 2, 3)), ckpt.stdout + ckpt.stderr
    assert "model_world_size_2_rank_1.pt" in ckpt.stdout, "both ranks saved their shard on shared storage"
    # The simulated site's planted secret file reached verl's workers as $NAME, and nothing of the run holds it.
    assert f"secret files in its environment: {simctl.PLANTED_SECRET}" in log
    secret = simctl.planted_secret_file(c.inventory).read_text().strip()
    assert len(secret) > 20 and leaks(c, secret) == {}, "the secret's content is in a record, log or container"
    assert leaks(c, "weights synced from the trainer"), "the leak search finds what is there"
    assert any("in docker inspect" in v for v in leaks(c, "RAY_AUTH_TOKEN_PATH").values()), "containers searched too"


def test_lost_host_mid_run_then_the_same_command_resumes(cluster: SimCluster) -> None:
    c = cluster
    before = set(runs(c, "e2e-lost-node"))
    # as root on the head (the deploy account has no docker group on this site)
    proc = c.popen("a3-01", "sudo -n sh -c " + shlex.quote(f"cd /opt/verl-recipe && {TRAIN} {LOST}"))
    victim = ""
    try:
        end = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < end and proc.poll() is None:
            new = [r for r in runs(c, "e2e-lost-node") if r not in before]
            if new and metrics(c, new[0]):
                hosts = worker_hosts(c, new[0])
                if hosts:
                    victim = sorted(hosts)[0]
                    break
            time.sleep(5)
        assert victim, "the run reached its first step with a rank on a second host"
        c.simctl("fault", victim, "down")
        rc = proc.wait(timeout=300)
        out = proc.stdout.read() if proc.stdout else ""
    finally:
        if proc.poll() is None:
            proc.kill()
        if victim:
            c.simctl("fault", victim, "clear")
    assert rc == 3, out[-4000:]
    assert victim in out and "lost" in out, "the head names the lost host"
    first = [r for r in runs(c, "e2e-lost-node") if r not in before][0]
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
