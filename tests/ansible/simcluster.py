"""A simulated cluster for the deploy.yml tests: `make sim-up`/`sim-fault`/`sim-down`, the site's preparation
(model and data on the shared storage, the image tarball), and SSH reads of the hosts' real state."""

from __future__ import annotations

import json
import shlex
import subprocess
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.ansible.helpers import ANSIBLE_DIR, REPO, playbook

IMAGE = "verl-recipe:sim"
MODEL_DIR = "/mnt/shared/models/Qwen3.5-35B-A3B"


def make(*args: str, timeout: int = 3600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)


def ensure_tarball(dest: Path) -> str:
    """`docker save` of the sim image (built first when this machine has none); returns its image ID."""
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, check=False).returncode != 0:
        res = make("image-sim")
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    subprocess.run(["docker", "save", IMAGE, "-o", str(dest)], check=True, capture_output=True)
    with tarfile.open(dest) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        config = json.load(member)[0]["Config"]
    return "sha256:" + Path(config).name.removesuffix(".json")


@dataclass
class SimCluster:
    name: str
    nodes: int
    work: Path

    @property
    def inventory(self) -> Path:
        return ANSIBLE_DIR / "inventory" / self.name / "hosts.yml"

    @property
    def hosts(self) -> list[str]:
        return [f"a3-{i:02d}" for i in range(1, self.nodes + 1)]

    def up(self) -> None:
        res = make("sim-up", f"NODES={self.nodes}", f"SIM_NAME={self.name}")
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]

    def down(self) -> None:
        make("sim-down", f"SIM_NAME={self.name}")

    def fault(self, host: str, fault: str) -> None:
        res = make("sim-fault", f"SIM_NAME={self.name}", f"HOST={host}", f"FAULT={fault}")
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]

    def clear(self) -> None:
        for h in self.hosts:
            self.fault(h, "clear")

    def ssh(self, host: str, command: str, check: bool = True) -> str:
        cfg = ANSIBLE_DIR / "inventory" / self.name / "ssh_config"
        res = subprocess.run(
            ["ssh", "-F", str(cfg), host, command], capture_output=True, text=True, timeout=300, check=False
        )
        if check:
            assert res.returncode == 0, f"{host}: {command}: {res.stderr}"
        return res.stdout

    def site_vars(self) -> dict[str, Any]:
        path = self.inventory.parent / "group_vars" / "all" / "sim.yml"
        data: dict[str, Any] = yaml.safe_load(path.read_text())
        return data

    def prepare_site(self, tarball: Path) -> Path:
        """What a site provides before deploy.yml: model and data on the shared storage, the image tarball."""
        site = self.site_vars()
        files = {
            f"{site['site_model_path']}/config.json": '{"model_type": "qwen3_5_moe"}',
            f"{site['site_model_path']}/model-00001-of-00001.safetensors": "weights",
            f"{site['site_data_path']}/train.parquet": "train",
            f"{site['site_data_path']}/test.parquet": "test",
        }
        script = " && ".join(
            f"mkdir -p {shlex.quote(str(Path(p).parent))} && printf %s {shlex.quote(v)} > {shlex.quote(p)}"
            for p, v in files.items()
        )
        self.ssh(self.hosts[0], f"sudo sh -c {shlex.quote(script)}")
        # deploy.yml copies the repository's compose.yaml and compose.sim.yaml (site_simulated) as they are.
        extra = {"site_image_tarball": str(tarball)}
        path = self.work / f"{self.name}-vars.yml"
        path.write_text(yaml.safe_dump(extra))
        return path

    def deploy(self, extra: Path, *args: str, fresh_ssh: bool = False) -> subprocess.CompletedProcess[str]:
        """fresh_ssh: new SSH connections (no persistent master left by an earlier run)."""
        env = {"ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.work / f"cp-{time.monotonic_ns()}")} if fresh_ssh else {}
        return playbook(self.inventory, "-e", f"@{extra}", *args, extra_env=env)

    def state(self) -> dict[str, str]:
        """Everything deploy.yml may change on each host, as text (compared before and after a run)."""
        probe = (
            "sudo sh -c 'for f in /etc/security/limits.d/90-verl-recipe.conf /etc/sysctl.d/90-verl-recipe.conf "
            '/etc/docker/daemon.json /opt/verl-recipe/node.env; do echo "== $f"; cat $f 2>/dev/null; done; '
            "ls -la /opt/verl-recipe /var/tmp/verl-recipe-image 2>&1 | grep -v total; "
            "docker ps -a --format {{.Names}} 2>&1; docker images -q 2>&1'"
        )
        return {h: self.ssh(h, probe, check=False) for h in self.hosts}
