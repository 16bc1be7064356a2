"""Our own rules: what verl runs as intended is accepted, what fails on the devices is refused, every numeric
setting has one domain, and docs/settings.md's settings table shows it."""

from __future__ import annotations

from pathlib import Path

import pytest
from verl_recipe.settings import BY_NAME, SETTINGS

from .fixtures import make_shared, set_args
from .helpers import run

S = "--skip-path-checks"

ACCEPTED = [
    ("qwen3.5-397b", ["TEST_FREQ=-1"]),  # verl's own default: never validate
    ("qwen3.5-397b", ["TEST_FREQ=0"]),
    ("qwen3.5-35b-fsdp", ["FSDP_SIZE=16"]),  # = the world: shard over it
    ("qwen3.5-35b-fsdp", ["FSDP_SIZE=64"]),  # > the world: verl shards over the whole world
    ("qwen3.5-35b-fsdp", ["TOTAL_EPOCHS=0"]),
    ("qwen3.5-397b", ["LR=0"]),
    ("qwen3.5-397b", ["LR=3e-7"]),
    ("qwen3.5-397b", ["GEN_MEM_UTIL=0.5"]),
    # alerts to a person (contracts/alerts.py): https anywhere, plain http only to this host
    ("qwen3.5-397b", ["ALERT_WEBHOOK=https://alerts.example.org/hook", "ALERT_WEBHOOK_TOKEN_FILE=/etc/t"]),
    ("qwen3.5-397b", ["ALERT_WEBHOOK=http://127.0.0.1:8080/hook", "ALERT_COMMAND=/usr/bin/logger,-t,verl"]),
    ("qwen3.5-397b", ["HEALTH_PHASE_K=5", "HEALTH_PHASE_N=5"]),
]


@pytest.mark.parametrize(("recipe", "sets"), ACCEPTED)
def test_accepted(capsys: pytest.CaptureFixture[str], recipe: str, sets: list[str]) -> None:
    res = run(capsys, "validate", recipe, S, *[a for s in sets for a in ("--set", s)])
    assert res.rc == 0, res.err
    assert "error:" not in res.err


REFUSED = [
    ("qwen3.5-397b", ["--set", "LR=abc"], "LR='abc' is not a number"),
    ("qwen3.5-397b", ["--set", "LR=-1e-6"], "LR=-1e-6: must be in [0, 1] on megatron (Megatron's LR scheduler"),
    ("qwen3.5-397b", ["--", "actor_rollout_ref.actor.optim.lr=-0.1"], "LR=-0.1: must be in [0, 1]"),
    ("qwen3.5-397b", ["--set", "GEN_MEM_UTIL=0"], "GEN_MEM_UTIL=0: must be in (0, 1]"),
    ("qwen3.5-397b", ["--set", "GEN_MEM_UTIL=1.2"], "GEN_MEM_UTIL=1.2: must be in (0, 1]"),
    ("qwen3.5-397b", ["--set", "GEN_MEM_UTIL=lots"], "GEN_MEM_UTIL='lots' is not a number"),
    (
        "qwen3.5-397b",
        ["--set", "TOTAL_EPOCHS=0"],
        "TOTAL_EPOCHS=0: must be in [1, 1000000000] on megatron (Megatron's LR scheduler asserts lr_decay_steps > 0",
    ),
    ("qwen3.5-35b-fsdp", ["--set", "TOTAL_EPOCHS=-1"], "TOTAL_EPOCHS=-1: must be in [0, 1000000000] on fsdp"),
    ("qwen3.5-397b", ["--set", "SAVE_FREQ=-1"], "SAVE_FREQ=-1 with RESTARTS=3: a run that saves no checkpoint cannot"),
    ("qwen3.5-397b", ["--set", "SAVE_FREQ=0"], "SAVE_FREQ=0: must be in [1, 1000000000] or -1 on megatron"),
    ("qwen3.5-35b-fsdp", ["--set", "FSDP_SIZE=0"], "FSDP_SIZE=0: must be in [1, 16384] or -1 on fsdp"),
    ("qwen3.5-35b-fsdp", ["--set", "FSDP_SIZE=-2"], "FSDP_SIZE=-2"),
    (
        "qwen3.5-397b",
        ["--set", "MAX_PROMPT_LENGTH=200000", "--set", "MAX_RESPONSE_LENGTH=70000"],
        "prompt + response = 270000 tokens exceed the checkpoint's max_position_embeddings 262144",
    ),
    (
        "qwen3.5-397b",
        ["--set", "PPO_MAX_TOKEN_LEN_PER_GPU=2048", "--", "actor_rollout_ref.actor.use_dynamic_bsz=true"],
        "PPO_MAX_TOKEN_LEN_PER_GPU=2048: with dynamic batching, the actor update packs at most 2048 tokens",
    ),
    (
        "qwen3.5-35b-fsdp",
        [
            "--",
            "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true",
            "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=1024",
        ],
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=1024: with dynamic batching, log-prob packs",
    ),
    (
        "qwen3.5-397b",
        ["--set", "HEALTH_PHASE_K=4", "--set", "HEALTH_PHASE_N=3"],
        "HEALTH_PHASE_K=4: is more than HEALTH_PHASE_N=3, so the phase rule could never fire",
    ),
    ("qwen3.5-397b", ["--set", "HEALTH_PHASE_N=0"], "HEALTH_PHASE_N=0: must be in [1, 1000]"),
    (
        "qwen3.5-397b",
        ["--set", "ALERT_WEBHOOK=http://alerts.example.org/hook"],
        "ALERT_WEBHOOK=http://alerts.example.org/hook: is plain http to another host",
    ),
    (
        "qwen3.5-397b",
        ["--set", "ALERT_WEBHOOK=https://bot:s3cr3t@alerts.example.org/hook"],
        "ALERT_WEBHOOK=https://alerts.example.org/hook: carries a user or password in the URL",
    ),
    (
        "qwen3.5-397b",
        ["--set", "ALERT_WEBHOOK=https://alerts.example.org/hook?team=ml&access_token=s3cr3t"],
        "ALERT_WEBHOOK=https://alerts.example.org/hook?team=...&access_token=...: carries a credential in its query",
    ),
    ("qwen3.5-397b", ["--set", "ALERT_WEBHOOK=ftp://alerts.example.org/x"], "ALERT_WEBHOOK=ftp://alerts.example.org"),
    (
        "qwen3.5-397b",
        ["--set", "ALERT_WEBHOOK=https://bot:pw@h.example:abc/x"],
        "ALERT_WEBHOOK=https://h.example:abc/x: is not a URL",
    ),
    (
        "qwen3.5-397b",
        ["--set", "ALERT_WEBHOOK_TOKEN_FILE=/etc/t"],
        "ALERT_WEBHOOK_TOKEN_FILE=/etc/t: names a token for a webhook, but ALERT_WEBHOOK is empty",
    ),
    (
        "qwen3.5-397b",
        ["--set", "ALERT_COMMAND=bin/page,--now"],
        "ALERT_COMMAND=bin/page,--now: runs bin/page, a relative path",
    ),
]


def test_a_refused_webhook_shows_no_credential(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "validate", "qwen3.5-397b", S, "--set", "ALERT_WEBHOOK=https://bot:s3cr3t@h.example/x?key=k3y")
    assert res.rc == 2 and "ALERT_WEBHOOK" in res.err
    assert "s3cr3t" not in res.err + res.out and "k3y" not in res.err + res.out


@pytest.mark.parametrize(("recipe", "args", "culprit"), REFUSED)
def test_refused_with_one_line(capsys: pytest.CaptureFixture[str], recipe: str, args: list[str], culprit: str) -> None:
    res = run(capsys, "validate", recipe, S, *args)
    assert res.rc == 2, res.err
    assert culprit in res.err
    assert res.out == ""
    line = next(line for line in res.err.splitlines() if culprit in line)
    assert line.startswith("error:") and ("fix:" in line or "is not a number" in line), line


@pytest.mark.verl_checks
def test_dynamic_budget_of_one_full_sequence_is_enough(capsys: pytest.CaptureFixture[str]) -> None:
    # 1024 + 2048 tokens: a budget of 3072 holds one sequence (dynamic batching on for the actor and the log-prob
    # pass alike, as verl requires: a launch verl itself accepts)
    res = run(
        capsys,
        "validate",
        "qwen3.5-397b",
        S,
        "--set",
        "PPO_MAX_TOKEN_LEN_PER_GPU=3072",
        "--",
        "actor_rollout_ref.actor.use_dynamic_bsz=true",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true",
    )
    assert res.rc == 0, res.err


def test_data_that_is_not_parquet_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    paths = make_shared(tmp_path)
    ok = run(capsys, "validate", "qwen3.5-397b", *set_args(paths))
    assert ok.rc == 0, ok.err
    Path(paths["TRAIN_FILES"]).write_text('{"prompt": "a json line, not parquet"}\n')
    res = run(capsys, "validate", "qwen3.5-397b", *set_args(paths))
    assert res.rc == 2
    assert f"error: TRAIN_FILES={paths['TRAIN_FILES']}: is not a Parquet file" in res.err


def test_simulated_placeholder_data_is_accepted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from verl_recipe.cluster.assets import PLACEHOLDER

    paths = make_shared(tmp_path)
    Path(paths["VAL_FILES"]).write_bytes(PLACEHOLDER)
    assert run(capsys, "validate", "qwen3.5-397b", *set_args(paths)).rc == 0


def test_longer_context_checkpoint_raises_the_length_limit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import json

    paths = make_shared(tmp_path)
    cfg = Path(paths["MODEL_PATH"]) / "config.json"
    data = json.loads(cfg.read_text())
    data["text_config"]["max_position_embeddings"] = 4096
    cfg.write_text(json.dumps(data))
    res = run(capsys, "validate", "qwen3.5-397b", *set_args(paths), "--set", "MAX_RESPONSE_LENGTH=4000")
    assert res.rc == 2
    assert "exceed the checkpoint's max_position_embeddings 4096" in res.err
    assert "does not describe" not in res.err  # a context length is not a different model


NUMERIC = [s.name for s in SETTINGS if s.kind in ("int", "float")]


def test_every_numeric_setting_has_a_domain() -> None:
    assert NUMERIC, "there are numeric settings"
    missing = [n for n in NUMERIC if BY_NAME[n].domain is None]
    assert missing == []


def test_docs_settings_table_shows_each_domain() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "settings.md").read_text()
    table = page.split("<!-- BEGIN generated:settings -->")[1].split("<!-- END generated:settings -->")[0]
    assert "| domain (checked by `validate`) |" in table
    for name in NUMERIC:
        spec = BY_NAME[name]
        assert spec.domain is not None
        row = next(line for line in table.splitlines() if line.startswith(f"| `{name}` |"))
        assert f"| {spec.domain.describe(spec.kind)} |" in row, row
    assert "| int in [0, 1000000000] (megatron: >= 1) |" in table  # TOTAL_EPOCHS
    assert "| float in (0, 1] |" in table  # GEN_MEM_UTIL
