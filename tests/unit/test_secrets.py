"""Secrets: refused as launch-environment values; named as files by the site, and then in no record of a launch.

What reaches Ray's workers is tested here up to the hook Ray runs in each of them (secretfiles.worker_setup, with
the environment the job's runtime_env gives it); Ray running that hook on a cluster is the e2e tier's to check.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from verl_recipe import secretfiles
from verl_recipe.layers import secret_looking

from .fixtures import install_fake_verl, make_shared, set_args
from .helpers import run

PLANTED = "s3cr3t-planted-7f1c9e"  # nothing else in a launch looks like it
S = "--skip-path-checks"
RUNTIME_ENV = "+ray_kwargs.ray_init.runtime_env.env_vars."
FAKE_MAIN = """
import os, sys
print("fake verl started; argv has", len(sys.argv), "entries")
sys.exit(0)
"""


@pytest.mark.parametrize(
    "name",
    ["WANDB_API_KEY", "RAY_AUTH_TOKEN", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "OPENAI_APIKEY",
     "GOOGLE_APPLICATION_CREDENTIALS", "MYTOKEN", "swanlab_api_key"],
)  # fmt: skip
def test_secret_looking_names(name: str) -> None:
    assert secret_looking(name)


@pytest.mark.parametrize(
    "name",
    ["HCCL_BUFFSIZE", "TOKENIZERS_PARALLELISM", "RAY_AUTH_TOKEN_PATH", "WANDB_MODE", "MONKEY", "HOCKEY_TEAM",
     "VLLM_USE_V1", "PYTORCH_NPU_ALLOC_CONF", "SSH_KEY_FILE"],
)  # fmt: skip
def test_plain_names(name: str) -> None:
    assert not secret_looking(name)


def one_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("name", ["WANDB_API_KEY", "RAY_AUTH_TOKEN"])
def test_set_env_secret_is_refused_with_the_fix(capsys: pytest.CaptureFixture[str], name: str) -> None:
    for cmd in ("render", "validate"):
        res = run(capsys, cmd, "qwen3.5-35b", S, "--set", f"env.{name}={PLANTED}")
        assert res.rc == 2
        line = one_error(res.err)
        assert name in line and "secret_files" in line and "fix:" in line
        assert PLANTED not in res.out + res.err, "the refusal does not repeat the secret"


def test_site_env_secret_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(f"env:\n  WANDB_API_KEY: {PLANTED}\n")
    res = run(capsys, "validate", "qwen3.5-35b", S, "--site", str(site))
    assert res.rc == 2
    assert "WANDB_API_KEY" in one_error(res.err) and PLANTED not in res.err


def test_extra_override_secret_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "validate", "qwen3.5-35b", S, "--", f"{RUNTIME_ENV}WANDB_API_KEY={PLANTED}")
    assert res.rc == 2
    line = one_error(res.err)
    assert "WANDB_API_KEY" in line and "secret_files" in line


# Every form an extra override can reach the workers' environment with (Hydra's override grammar: a variable named by
# the key, a mapping at env_vars or any key above it, nested, keys quoted either way, a list): each is refused.
ENV_PATH = "ray_kwargs.ray_init.runtime_env.env_vars"
HIDDEN_FORMS = [
    (f"++{ENV_PATH}={{X_TOKEN: {PLANTED}}}", "X_TOKEN"),
    (f"+{ENV_PATH}={{HCCL_BUFFSIZE: '300', WANDB_API_KEY: '{PLANTED}'}}", "WANDB_API_KEY"),
    (f"++ray_kwargs.ray_init.runtime_env={{env_vars: {{HF_TOKEN: {PLANTED}}}}}", "HF_TOKEN"),
    (f'++ray_kwargs.ray_init={{runtime_env: {{env_vars: {{DB_PASSWORD: "{PLANTED}"}}}}}}', "DB_PASSWORD"),
    (f"++ray_kwargs={{ray_init: {{runtime_env: {{env_vars: {{MYTOKEN: {PLANTED}}}}}}}}}", "MYTOKEN"),
    (f"++{ENV_PATH}={{'X_TOKEN': {PLANTED}}}", "X_TOKEN"),
    (f'++{ENV_PATH}={{"OPENAI_APIKEY" : {PLANTED}}}', "OPENAI_APIKEY"),
    (f"++{ENV_PATH}=[X_TOKEN={PLANTED}]", "X_TOKEN"),
    (f"{ENV_PATH}.RAY_AUTH_TOKEN={PLANTED}", "RAY_AUTH_TOKEN"),
    (f"~{ENV_PATH}.HF_TOKEN={PLANTED}", "HF_TOKEN"),
]


@pytest.mark.parametrize(("arg", "name"), HIDDEN_FORMS)
def test_secret_in_any_override_form_is_refused(capsys: pytest.CaptureFixture[str], arg: str, name: str) -> None:
    res = run(capsys, "validate", "qwen3.5-35b", S, "--", arg)
    assert res.rc == 2
    line = next(line for line in res.err.splitlines() if "a secret by its name" in line)
    assert name in line and "secret_files" in line and "fix:" in line
    assert PLANTED not in res.out + res.err, "neither the refusal nor Hydra's syntax errors repeat the secret"


def test_secret_in_a_mapping_reaches_no_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's case: launch refuses before a run record, command.sh or the driver's argv is written."""
    install_fake_verl(tmp_path, monkeypatch, FAKE_MAIN)
    paths = make_shared(tmp_path / "shared")
    res = run(capsys, "launch", "qwen3.5-397b", *set_args(paths), "--", HIDDEN_FORMS[0][0])
    assert res.rc == 2 and "X_TOKEN" in res.err
    assert PLANTED not in res.out + res.err
    written = [p for p in (tmp_path / "shared").rglob("*") if p.is_file()]
    assert not [p for p in written if PLANTED in p.read_text(errors="replace")]
    assert not list((tmp_path / "shared").rglob("launch.json")) and not list((tmp_path / "shared").rglob("command.sh"))


@pytest.mark.parametrize(
    "arg",
    [
        f"++{ENV_PATH}={{HCCL_BUFFSIZE: '400', WANDB_MODE: offline}}",
        f"+{ENV_PATH}.RAY_AUTH_TOKEN_PATH=/run/secrets/ray_auth_token",
        "data.prompt_key=prompt",  # a verl key with KEY in its name, outside the workers' environment
        "++ray_kwargs.ray_init.num_cpus=8",
    ],
)
def test_plain_values_in_those_forms_pass(capsys: pytest.CaptureFixture[str], arg: str) -> None:
    res = run(capsys, "validate", "qwen3.5-35b", S, "--", arg)
    assert "a secret by its name" not in res.err, res.err


@pytest.mark.parametrize(("value", "shown"), [("null", "null"), ("[1]", "list"), ("{a: 1}", "dict"), ("true", "bool")])
def test_env_values_must_be_scalars(capsys: pytest.CaptureFixture[str], tmp_path: Path, value: str, shown: str) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(f"env:\n  HCCL_BUFFSIZE: {value}\n")
    res = run(capsys, "render", "qwen3.5-35b", S, "--site", str(site))
    assert res.rc == 2
    line = one_error(res.err)
    assert "HCCL_BUFFSIZE" in line and shown in line and "fix:" in line


def secret_site(tmp_path: Path, mode: int = 0o600, extra: str = "") -> tuple[Path, Path]:
    secret = tmp_path / "secrets" / "wandb_api_key"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text(PLANTED + "\n")
    secret.chmod(mode)
    site = tmp_path / "site.yaml"
    site.write_text(f"LOGGER: [console, file, wandb]\nsecret_files:\n  WANDB_API_KEY: {secret}\n{extra}")
    return site, secret


def test_secret_file_reaches_the_worker_hook_and_no_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_fake_verl(tmp_path, monkeypatch, FAKE_MAIN)
    paths = make_shared(tmp_path / "shared")
    site, secret = secret_site(tmp_path)
    args = ["qwen3.5-397b", "--site", str(site), *set_args(paths)]
    rendered = run(capsys, "render", *args, "--json")
    assert rendered.rc == 0, rendered.err
    doc = rendered.doc
    # The launch names the hook and where the secret is; the tracker check counts the secret file as present.
    assert f"{secretfiles.HOOK_KEY}={secretfiles.SETUP_HOOK}" in doc["argv"]
    assert doc["env"][secretfiles.SECRET_FILES_ENV] == f"WANDB_API_KEY={secret}"
    res = run(capsys, "launch", *args)
    assert res.rc == 0, res.err
    assert PLANTED not in res.out + res.err
    runs = list((Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-397b" / "runs").iterdir())
    assert len(runs) == 1
    # Every file the launch wrote (launch.json, settings.json, command.sh, train.log, exit_code, outcome.json, ...)
    written = [p for p in Path(paths["LOG_DIR"]).rglob("*") if p.is_file() and not p.is_symlink()]
    assert {"launch.json", "settings.json", "command.sh", "train.log"} <= {p.name for p in written}
    for path in written:
        assert PLANTED not in path.read_text(errors="replace"), f"{path} holds the secret"
    record = json.loads((runs[0] / "settings.json").read_text())
    assert record["secret_files"]["WANDB_API_KEY"]["path"] == str(secret)
    # On a worker: the hook reads the file into that worker's environment, from what the runtime_env carries.
    monkeypatch.setenv(secretfiles.SECRET_FILES_ENV, doc["env"][secretfiles.SECRET_FILES_ENV])
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    secretfiles.worker_setup()
    assert os.environ["WANDB_API_KEY"] == PLANTED


def test_secret_file_readable_by_others_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    paths = make_shared(tmp_path / "shared")
    site, secret = secret_site(tmp_path, mode=0o644)
    res = run(capsys, "validate", "qwen3.5-397b", "--site", str(site), *set_args(paths))
    assert res.rc == 2
    line = one_error(res.err)
    assert str(secret) in line and "0644" in line and "chmod 600" in line
    assert PLANTED not in res.err


def test_missing_secret_file_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    paths = make_shared(tmp_path / "shared")
    site, secret = secret_site(tmp_path)
    secret.unlink()
    res = run(capsys, "validate", "qwen3.5-397b", "--site", str(site), *set_args(paths))
    assert res.rc == 2
    assert "does not exist here" in one_error(res.err)


def test_a_name_both_env_value_and_secret_file_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    site, _ = secret_site(tmp_path)
    res = run(capsys, "render", "qwen3.5-35b", S, "--site", str(site), "--set", "env.WANDB_MODE=offline")
    assert res.rc == 0, "another variable beside a secret file is fine"
    site.write_text("secret_files:\n  HCCL_BUFFSIZE: /run/secrets/x\n")
    res = run(capsys, "render", "qwen3.5-35b", S, "--site", str(site), "--set", "env.HCCL_BUFFSIZE=300")
    assert res.rc == 2
    assert "HCCL_BUFFSIZE" in one_error(res.err)


@pytest.mark.parametrize("bad", ["relative/path", "/with space", "/a,b", 7])
def test_secret_file_entry_must_be_an_absolute_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, bad: object
) -> None:
    site = tmp_path / "site.yaml"
    site.write_text(f"secret_files:\n  WANDB_API_KEY: {json.dumps(bad)}\n")
    res = run(capsys, "render", "qwen3.5-35b", S, "--site", str(site))
    assert res.rc == 2
    assert "secret_files.WANDB_API_KEY" in one_error(res.err)


def test_worker_hook_error_names_the_file_not_the_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "two_lines"
    secret.write_text(f"{PLANTED}\nsecond\n")
    secret.chmod(0o600)
    monkeypatch.setenv(secretfiles.SECRET_FILES_ENV, f"WANDB_API_KEY={secret}")
    with pytest.raises(secretfiles.SecretFileError) as info:
        secretfiles.worker_setup()
    assert str(secret) in str(info.value) and PLANTED not in str(info.value)


@pytest.mark.parametrize(
    ("value", "kind"), [("300", "a number"), ("-1.5e3", "a number"), ("true", "a boolean"), ("NULL", "null")]
)
def test_an_env_var_hydra_would_not_hand_ray_as_a_string_is_refused(
    capsys: pytest.CaptureFixture[str], value: str, kind: str
) -> None:
    """Ray's runtime_env takes only strings in env_vars; Hydra reads an unquoted 300 as an int, and the job would
    fail at submission with Ray's TypeError (met on the simulated cluster). One line with the quoted fix."""
    res = run(capsys, "validate", "qwen3.5-35b", S, "--", f"{RUNTIME_ENV}MY_KNOB={value}")
    assert res.rc == 2
    line = one_error(res.err)
    assert f"reads {value} as {kind}" in line and f"MY_KNOB='{value}'" in line, line
    for fine in ("'300'", "abc", "300abc", '"true"'):
        assert run(capsys, "validate", "qwen3.5-35b", S, "--", f"{RUNTIME_ENV}MY_KNOB={fine}").rc == 0, fine
