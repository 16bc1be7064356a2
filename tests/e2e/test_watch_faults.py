"""Faults injected into verl's real training on the simulated cluster, and what the watch and the readers make of
them (issue 36, left from issue 25): a memory leak at every weight sync (the stand-in adapter's
VERL_SIM_STANDIN_LEAK_MB, as the sleep/wake leak of vllm-ascend#9563 on a die) fires the memory-growth rule and
`compare` against a healthy baseline of the same recipe fails on peak memory; a reward function that returns NaN
(verl's own `reward.custom_reward_function`) makes the loss NaN and HEALTH_STOP=nan ends the run with exit 5; the
healthy run's log gives no diagnosis finding, read long after it ended. The shared real-site cluster of
tests/e2e/conftest.py, as root on the head (the deploy account there has no docker group)."""

from __future__ import annotations

import base64
import json
import shlex

import pytest
from verl_recipe.exitcodes import EXIT_REGRESSION

from simkit.cluster import SimCluster
from tests.e2e.test_train_fsdp import EXPERIMENTS, RUN_TIMEOUT_S, TRAIN, read_json, runs
from tests.e2e.test_train_rehearsal import COMPOSE, all_joined, on_host

pytestmark = pytest.mark.docker

STEPS = 5
LEAK_MB = 300  # per rank and weight sync: 2 ranks x 5 steps = 3 GB more host memory than the baseline
NAN_REWARD = "/mnt/shared/data/e2e-faults/nan_reward.py"
# A reward function in verl's custom-function form (verl/trainer/ppo/reward.py, get_custom_reward_fn):
# every sample scores NaN, so GRPO's advantages and the policy loss are NaN from the first update.
NAN_REWARD_CODE = (
    "def nan_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n    return float('nan')\n"
)


@pytest.fixture(scope="module")
def cluster(e2e_cluster: tuple[SimCluster, object]) -> SimCluster:
    c = e2e_cluster[0]
    p = all_joined(c)
    assert p.returncode == 0, f"the cluster did not come back whole: {p.stdout[-1500:]}{p.stderr[-1500:]}"
    return c


def train(c: SimCluster, experiment: str, *args: str) -> tuple[int, str, str]:
    before = set(runs(c, experiment))
    p = on_host(
        c, "a3-01", f"{TRAIN} --set EXPERIMENT_NAME={experiment} --set TOTAL_TRAINING_STEPS={STEPS} {' '.join(args)}",
        timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    written = [r for r in runs(c, experiment) if r not in before]
    assert len(written) == 1, f"one run folder: {written}; {(p.stdout + p.stderr)[-3000:]}"
    return p.returncode, p.stdout + p.stderr, written[0]


def in_head(c: SimCluster, command: str) -> tuple[int, str]:
    p = on_host(c, "a3-01", f"{COMPOSE} exec -T ray-head {command}")
    return p.returncode, p.stdout + p.stderr


HEALTHY = "qwen3.5-35b-fsdp"  # test_train_fsdp's `make train` run: the recipe's default experiment, 3 steps
BASE_STEPS = 3


def healthy_run(c: SimCluster) -> str | None:
    """The newest run of HEALTHY that ended with 0 and recorded where its node-log window ends."""
    for run_dir in reversed(runs(c, HEALTHY)):
        done = on_host(c, "a3-01", f"test -f {run_dir}/node_logs_at_end.json && cat {run_dir}/outcome.json")
        if done.returncode == 0 and json.loads(done.stdout).get("exit_code") == 0:
            return run_dir
    return None


@pytest.fixture(scope="module")
def baseline(cluster: SimCluster) -> str:
    # The healthy run test_train_fsdp trained (one training less in CI); diagnosed now, long after it ended, it reads
    # only its own window of the node logs, not the lost-host tests' node restarts since. Alone: a run of its own.
    found = healthy_run(cluster)
    if found is not None:
        return found
    rc, out, run_dir = train(cluster, HEALTHY)
    assert rc == 0, out[-4000:]
    return run_dir


def test_a_healthy_run_has_no_alert_and_no_diagnosis_finding(cluster: SimCluster, baseline: str) -> None:
    alerts = on_host(cluster, "a3-01", f"cat {baseline}/alerts.json 2>/dev/null || echo '[]'").stdout
    assert json.loads(alerts) == [], alerts
    rc, out = in_head(cluster, f"verl-recipe diagnose --json {baseline}")
    assert rc == 0, out[-2000:]
    assert json.loads(out[out.index("{") :])["findings"] == [], out[-2000:]


def test_a_memory_leak_fires_its_rule_and_compare_fails_on_peak_memory(cluster: SimCluster, baseline: str) -> None:
    c = cluster
    rc, out, run_dir = train(
        c, "e2e-faults-leak", "--set HEALTH_MEM_GROWTH_GB=0.5", "--set HEALTH_MEM_WINDOW=3",
        # Ray takes only strings in env_vars: Hydra's quotes make the value one, the shell's keep them
        "--", shlex.quote(f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_SIM_STANDIN_LEAK_MB='{LEAK_MB}'"),
    )  # fmt: skip
    assert rc == 0, "an alert only, the run goes on: " + out[-4000:]
    alerts = read_json(c, f"{run_dir}/alerts.json")
    assert any(a.get("rule") == "memory_growth" for a in alerts), alerts
    assert "memory_growth" in out, "the alert is printed as it fires"
    # The steps both runs have: by step 3 a rank holds at least 2 x LEAK_MB more (the default 1 GB rise is for 5-14);
    # 0.3 GB is still far above a healthy run's own spread (~0.01 GB in the golden metric streams).
    compared = f"--steps 1-{BASE_STEPS} --max-memory-rise-gb 0.3"
    rc, table = in_head(c, f"verl-recipe compare {run_dir} --baseline {baseline} {compared}")
    assert rc == EXIT_REGRESSION, table[-3000:]
    row = next((x for x in table.splitlines() if x.startswith("peak memory")), "")
    assert row.rstrip().endswith("FAIL"), table[-3000:]
    rc, same = in_head(c, f"verl-recipe compare {baseline} --baseline {baseline} {compared}")
    assert rc == 0, "a run against itself passes: " + same[-3000:]


# `make test-scenarios` (the rule and HEALTH_STOP are unit-tested: tests/unit/test_health.py).
@pytest.mark.scenario
def test_a_nan_loss_is_caught_and_health_stop_ends_the_run(cluster: SimCluster) -> None:
    c = cluster
    made = on_host(
        c, "a3-01",
        f"mkdir -p {NAN_REWARD.rsplit('/', 1)[0]} && "
        f"echo {base64.b64encode(NAN_REWARD_CODE.encode()).decode()} | base64 -d > {NAN_REWARD}",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    rc, out, run_dir = train(
        c, "e2e-faults-nan", "--set HEALTH_STOP=nan", "--",
        f"reward.custom_reward_function.path={NAN_REWARD}", "reward.custom_reward_function.name=nan_score",
    )  # fmt: skip
    assert rc == 5, out[-4000:]
    alerts = read_json(c, f"{run_dir}/alerts.json")
    nan = [a for a in alerts if a.get("rule") == "nan"]
    assert nan and nan[0].get("step") == 1, alerts
    outcome = read_json(c, f"{run_dir}/outcome.json")
    assert outcome["exit_code"] == 5, outcome
    assert f"{EXPERIMENTS}/e2e-faults-nan" in run_dir
