"""The operators' way to start training (ansible/roles/operator, scripts/train_on_head.py): one root command,
verl-train, that runs only the compose project's train-* services with the caller's arguments as words."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import jinja2
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "ansible" / "roles" / "operator"


def _render(name: str, **values: str) -> str:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["quote"] = shlex.quote  # ansible's quote filter
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    return env.from_string((ROLE / "templates" / name).read_text()).render(
        ansible_managed="managed", **defaults, **values
    )


@pytest.fixture
def wrapper(tmp_path: Path) -> tuple[Path, Path]:
    """The rendered wrapper over a fake docker that lists the project's services and records what it is asked."""
    install = tmp_path / "install dir"
    install.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fake = bin_dir / "docker"
    fake.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" config --services "*)\n'
        '  [ "$2 $3" = "--profile *" ] || exit 0\n'
        '  printf "ray-head\\nray-worker\\ntrain-397b\\ntrain-35b-fsdp\\ndoctor\\n"; exit 0;;\n'
        "esac\n"
        f'pwd > {shlex.quote(str(calls))}; for a in "$@"; do echo "[$a]"; done >> {shlex.quote(str(calls))}\n'
    )
    fake.chmod(0o755)
    script = _render("verl-train.j2", site_install_dir=str(install))
    # The wrapper fixes PATH to the system's folders; here the fake docker goes in front of them.
    script = script.replace("PATH=/usr/local/sbin", f"PATH={bin_dir}:/usr/local/sbin", 1)
    path = tmp_path / "verl-train"
    path.write_text(script)
    path.chmod(0o755)
    return path, calls


def test_the_wrapper_runs_a_train_service_with_each_argument_as_one_word(wrapper: tuple[Path, Path]) -> None:
    path, calls = wrapper
    p = subprocess.run([str(path), "train-397b", "--rehearse", "--", "a.b='x y'; rm -rf /"], capture_output=True)
    assert p.returncode == 0, p.stderr
    lines = calls.read_text().splitlines()
    assert lines[0].endswith("install dir")
    assert lines[1:] == [
        "[compose]",
        "[run]",
        "[--rm]",
        "[train-397b]",
        "[--rehearse]",
        "[--]",
        "[a.b='x y'; rm -rf /]",
    ]


def test_the_wrapper_detaches_a_run_and_reaches_the_runs_verbs(wrapper: tuple[Path, Path]) -> None:
    path, calls = wrapper
    p = subprocess.run([str(path), "--detach", "train-35b-fsdp", "--set", "X=1"], capture_output=True)
    assert p.returncode == 0, p.stderr
    assert calls.read_text().splitlines()[1:] == ["[compose]", "[run]", "[--rm]", "[-d]", "[train-35b-fsdp]", "[--set]",
                                                  "[X=1]"]  # fmt: skip
    p = subprocess.run(
        [str(path), "runs", "stop", "long; sh"], capture_output=True, env={**os.environ, "SUDO_USER": "alice"}
    )
    assert p.returncode == 0, p.stderr
    by = f"[VERL_RECIPE_BY=alice@{os.uname().nodename}]"
    assert calls.read_text().splitlines()[1:] == ["[compose]", "[run]", "[--rm]", "[-e]", by, "[runs]", "[stop]",
                                                  "[long; sh]"]  # fmt: skip


@pytest.mark.parametrize(
    "argv", [["ray-head"], ["doctor", "sh"], ["--entrypoint=sh"], [], ["--detach"], ["--detach", "runs"]]
)
def test_the_wrapper_refuses_anything_but_a_train_service(wrapper: tuple[Path, Path], argv: list[str]) -> None:
    path, calls = wrapper
    p = subprocess.run([str(path), *argv], capture_output=True, text=True)
    assert p.returncode == 2 and not calls.exists(), p
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "fix: name one of: train-397b train-35b-fsdp" in lines[0], lines


@pytest.mark.skipif(shutil.which("visudo") is None, reason="visudo is not installed")
def test_the_sudoers_rule_parses_and_names_only_the_wrapper(tmp_path: Path) -> None:
    rule = tmp_path / "verl-train"
    rule.write_text(_render("sudoers.j2"))
    assert subprocess.run(["visudo", "-cf", str(rule)], capture_output=True).returncode == 0
    grants = [x for x in rule.read_text().splitlines() if x.startswith("%")]
    assert grants == ["%verl-train ALL=(root) NOPASSWD: /usr/local/sbin/verl-train"]


def _train(tmp_path: Path, head: Mapping[str, object], *extra: str) -> subprocess.CompletedProcess[str]:
    hosts = {"all": {"children": {"a3_nodes": {"hosts": {"a3-01": head}}, "ray_head": {"hosts": {"a3-01": None}}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(hosts))
    argv = [sys.executable, str(REPO / "scripts" / "train_on_head.py"), "--recipe", "qwen3.5-397b"]
    argv += ["--inventory", str(tmp_path), "--print-only", *extra, "--", "--rehearse", "--", "trainer.x=1"]
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, env=env)


def test_make_train_logs_in_as_an_operator_and_runs_the_wrapper(tmp_path: Path) -> None:
    head = {"ansible_host": "10.0.0.1", "ansible_user": "deploy", "site_operators": ["alice", "bob"]}
    p = _train(tmp_path, head)
    assert p.returncode == 0, p.stderr
    assert p.stdout.rstrip().endswith(
        "-- alice@10.0.0.1 'sudo -n /usr/local/sbin/verl-train train-397b --rehearse -- trainer.x=1'"
    ), p.stdout
    assert "bob@" in _train(tmp_path, head, "--operator", "bob").stdout
    bad = _train(tmp_path, head, "--operator=-oProxyCommand=x")
    assert bad.returncode == 2 and bad.stdout == "" and "OPERATOR='-oProxyCommand=x' is not a plain" in bad.stderr


def test_make_train_detached_and_the_runs_verbs_go_through_the_wrapper(tmp_path: Path) -> None:
    head = {"ansible_host": "10.0.0.1", "ansible_user": "deploy", "site_operators": ["alice"]}
    p = _train(tmp_path, head, "--detach")
    assert p.stdout.rstrip().endswith(
        "'sudo -n /usr/local/sbin/verl-train --detach train-397b --rehearse -- trainer.x=1'"
    )
    argv = [sys.executable, str(REPO / "scripts" / "train_on_head.py"), "--inventory", str(tmp_path), "--print-only"]
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}"}
    p = subprocess.run([*argv, "--verb", "stop", "--run", "long"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.rstrip().endswith("'sudo -n /usr/local/sbin/verl-train runs stop long'"), p.stdout
    p = subprocess.run([*argv, "--verb", "attach"], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "attach needs RUN=" in p.stderr
    # export and eval take make's ARGS after the run; the other verbs take none
    for verb in ("eval", "export", "stop"):
        cmd = [*argv, "--verb", verb, "--run", "long", "--", "--step", "4"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        tail = f"runs {verb} long --step 4'" if verb != "stop" else "runs stop long'"
        assert p.returncode == 0 and p.stdout.rstrip().endswith(tail), (verb, p.stdout, p.stderr)


def test_make_train_refuses_an_inventory_without_operators_instead_of_the_deploy_account(tmp_path: Path) -> None:
    """The deploy account has no docker group: falling back to it fails on the head, later and less clearly."""
    p = _train(tmp_path, {"ansible_host": "10.0.0.1", "ansible_user": "deploy"})
    assert p.returncode == 2 and p.stdout == "", p.stdout
    (line,) = p.stderr.strip().splitlines()
    assert "names no site_operators" in line and "fix: site_operators: [<head account>]" in line, line
    # an OPERATOR given on the command line is enough
    assert "carol@10.0.0.1" in _train(tmp_path, {"ansible_host": "10.0.0.1"}, "--operator", "carol").stdout


def test_make_train_offers_the_operators_own_key_never_the_deploy_accounts(tmp_path: Path) -> None:
    deploy_key, own = tmp_path / "deploy_key", tmp_path / "alice_key"
    deploy_key.write_text("private\n")
    head: dict[str, object] = {
        "ansible_host": "10.0.0.1",
        "ansible_user": "deploy",
        "ansible_ssh_private_key_file": str(deploy_key),
        "site_operators": ["alice", "bob"],
        "site_operator_keys": {"alice": f"{own}.pub", "bob": str(tmp_path / "bob_key.pub")},
    }
    # no private key beside the public one here: ssh's own keys, and never the deploy account's
    p = _train(tmp_path, head)
    assert p.returncode == 0, p.stderr
    assert str(deploy_key) not in p.stdout and " -i " not in p.stdout, p.stdout
    # the private key beside alice's public key: offered alone
    own.write_text("private\n")
    p = _train(tmp_path, head)
    assert f" -i {own} -o IdentitiesOnly=yes " in p.stdout, p.stdout
    # bob has none here: ssh's own; OPERATOR_KEY wins over both, and one that does not exist is refused
    assert " -i " not in _train(tmp_path, head, "--operator", "bob").stdout
    assert f" -i {deploy_key} " in _train(tmp_path, head, "--operator-key", str(deploy_key)).stdout
    bad = _train(tmp_path, head, "--operator-key", str(tmp_path / "nope"))
    assert bad.returncode == 2 and "OPERATOR_KEY=" in bad.stderr and "does not exist" in bad.stderr
