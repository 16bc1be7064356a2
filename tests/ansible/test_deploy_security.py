"""The deploy's security fixes, in-process: the image fan-out's one-time tokens, values that reach a root shell or an
ssh command line, and the simulated host's sudo rule (issue 27)."""

from __future__ import annotations

import hashlib
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from verl_recipe import inventory as val

from simkit.paths import ANSIBLE_DIR
from tests.ansible.helpers import load_plugin

REPO = ANSIBLE_DIR.parent
HELPER = ANSIBLE_DIR / "roles" / "image_dist" / "files" / "serve_once.py"
serve_once = load_plugin("roles/image_dist/files/serve_once.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def token_file(path: Path, token: str) -> Path:
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def get(url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@pytest.fixture
def sender(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A fan-out server on loopback serving a 3 MiB file to the holder of one token (its own process, as on a host)."""
    data = os.urandom(3 << 20)
    (tmp_path / "image.tar").write_bytes(data)
    token = "t" * 43
    port = free_port()
    tf = token_file(tmp_path / "token-send", token)
    argv = [sys.executable, str(HELPER), "serve", "--bind", "127.0.0.1", "--port", str(port)]
    argv += ["--file", str(tmp_path / "image.tar"), "--token-file", str(tf), "--timeout", "60"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/image.tar"
    for _ in range(100):  # until it listens
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            threading.Event().wait(0.05)
    yield {"proc": proc, "url": url, "token": token, "sha": hashlib.sha256(data).hexdigest(), "dir": tmp_path}
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_strangers_get_nothing_and_use_up_nothing(sender: dict[str, Any]) -> None:
    url, token = sender["url"], sender["token"]
    assert get(url, None) == 403  # anyone on the cluster network
    assert get(url, "x" * 43) == 403  # a guessed token
    assert get(url.replace("image.tar", "etc/passwd"), token) == 404
    assert sender["proc"].poll() is None  # none of them counted as the one transfer
    dest = sender["dir"] / "got.tar"
    tf = token_file(sender["dir"] / "token-receive", token)
    rc = serve_once.main(
        ["fetch", "--url", url, "--token-file", str(tf), "--dest", str(dest), "--sha256", sender["sha"]]
    )
    assert rc == 0 and hashlib.sha256(dest.read_bytes()).hexdigest() == sender["sha"]
    out, _ = sender["proc"].communicate(timeout=30)
    assert sender["proc"].returncode == 0
    assert "2 request(s) without the token refused" in out  # the 404 came with the token
    assert not (sender["dir"] / "got.tar.part").exists()


def test_the_token_is_good_for_one_transfer_only(sender: dict[str, Any]) -> None:
    url, token = sender["url"], sender["token"]
    assert get(url, token) == 200
    sender["proc"].wait(timeout=30)
    assert sender["proc"].returncode == 0  # served once, then gone: a replay finds no server


def test_a_wrong_checksum_or_token_fails_the_receiver_with_one_line(sender: dict[str, Any], capsys: Any) -> None:
    url = sender["url"]
    dest = sender["dir"] / "got.tar"
    bad = token_file(sender["dir"] / "bad", "y" * 43)
    assert serve_once.main(["fetch", "--url", url, "--token-file", str(bad), "--dest", str(dest), "--sha256", "0"]) == 1
    assert "the sender refused this host's token" in capsys.readouterr().err
    good = token_file(sender["dir"] / "good", sender["token"])
    assert (
        serve_once.main(["fetch", "--url", url, "--token-file", str(good), "--dest", str(dest), "--sha256", "0"]) == 1
    )
    err = capsys.readouterr().err
    assert f"sha256 {sender['sha']}, expected 0" in err and not dest.exists()


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    tf = token_file(tmp_path / "t", "z" * 43)
    tf.chmod(0o644)
    with pytest.raises(SystemExit, match="readable by others"):
        serve_once.read_token(str(tf))


def test_the_tokens_never_reach_a_command_line_and_nothing_stages_in_var_tmp() -> None:
    tasks = ANSIBLE_DIR / "roles" / "image_dist" / "tasks"
    for path in tasks.glob("*.yml"):
        for task in yaml.safe_load(path.read_text()) or []:
            for inner in task.get("block", [task]):
                text = yaml.safe_dump(inner)
                if "image_dist_token" in text:  # only the tasks that make or write it, each with no_log
                    assert inner.get("no_log") is True, (path.name, inner.get("name"))
                    assert "argv" not in text and "ansible.builtin.command" not in inner, inner.get("name")
    defaults = yaml.safe_load((ANSIBLE_DIR / "roles" / "image_dist" / "defaults" / "main.yml").read_text())
    assert not defaults["image_dist_stage_dir"].startswith(("/tmp", "/var/tmp"))
    fanout = (tasks / "fanout_round.yml").read_text()
    assert fanout.count("--token-file") == 2 and "get_url" not in fanout


def test_governor_reaches_the_shell_as_data_only() -> None:
    text = (ANSIBLE_DIR / "roles" / "os_tuning" / "tasks" / "governor.yml").read_text()
    for task in yaml.safe_load(text):
        script = task["ansible.builtin.shell"]
        assert "os_tuning_cpu_governor" not in script  # never pasted into the script
        assert task["environment"]["VERL_GOVERNOR"] == "{{ os_tuning_cpu_governor }}"
    control = {"ansible_version": "2.19.0", "ansible_min": "2.19", "ansible_max": "2.20", "required_files": []}
    assert not [e for e in val.check_site({"os_tuning_cpu_governor": "schedutil"}, control) if "governor" in e]
    errors = [e for e in val.check_site({"os_tuning_cpu_governor": "performance; reboot"}, control) if "governor" in e]
    assert errors == [
        "inventory: os_tuning_cpu_governor='performance; reboot' is not a CPU frequency governor name; fix: one of the "
        "names in /sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors, e.g. performance"
    ]


def _train_on_head(
    tmp_path: Path, ansible_host: str, extra: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    hosts = {
        "all": {
            "children": {
                "a3_nodes": {
                    "hosts": {
                        "a3-01": {"ansible_host": ansible_host, "ansible_user": "deploy", "site_operators": ["alice"]}
                    }
                },
                "ray_head": {"hosts": {"a3-01": None}},
            }
        }
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(hosts))
    argv = [sys.executable, str(REPO / "scripts" / "train_on_head.py"), "--recipe", "qwen3.5-397b"]
    argv += ["--inventory", str(tmp_path), "--print-only", "--", "--rehearse", *(extra or [])]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_train_on_head_never_lets_the_host_become_an_ssh_option(tmp_path: Path) -> None:
    ok = _train_on_head(tmp_path, "10.0.0.1")
    assert ok.returncode == 0, ok.stderr
    assert " -- alice@10.0.0.1 'sudo -n " in ok.stdout  # options end before the destination
    bad = _train_on_head(tmp_path, "-oProxyCommand=touch /tmp/x")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        f"error: INVENTORY={tmp_path}: a3-01: ansible_host='-oProxyCommand=touch /tmp/x' is not a plain host or "
        "user name; fix: correct it"
    ]


def test_simulated_deploy_account_may_become_root_only() -> None:
    """The sudo rule docs/deploy.md gives a site, as the simulated host carries it."""
    rule = (REPO / "docker" / "sim-host" / "rootfs" / "etc" / "sudoers.d" / "deploy").read_text()
    lines = [x for x in rule.splitlines() if x and not x.startswith("#")]
    assert "deploy ALL=(root) NOPASSWD:NOSETENV: ALL" in lines
    assert not [x for x in lines if re.search(r"\(ALL", x)]  # no other target user or group
    assert any(x.startswith("Defaults:deploy env_reset, secure_path=") for x in lines)
    docs = (REPO / "docs" / "deploy.md").read_text()
    assert "deploy ALL=(root) NOPASSWD:NOSETENV: ALL" in docs  # what the site is told is what the simulation uses


def test_make_train_passes_hydra_overrides_after_the_second_separator(tmp_path: Path) -> None:
    """`make train ARGS="--rehearse -- trainer.x=y"`: make's own `--` is dropped, the one inside ARGS reaches the
    head, so verl-recipe there reads trainer.x=y as an extra Hydra override (it once arrived as an unknown
    argument)."""
    ok = _train_on_head(tmp_path, "10.0.0.1", extra=["--", "trainer.val_before_train=false"])
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.rstrip().endswith("train-397b --rehearse -- trainer.val_before_train=false'"), ok.stdout
    dry = subprocess.run(
        ["make", "-n", "train", "RECIPE=qwen3.5-397b", f"INVENTORY={tmp_path}", "ARGS=--rehearse -- a.b=1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "-- --rehearse -- a.b=1" in dry.stdout, dry.stdout
