"""`SimCluster`: the one driver of a simulated A3 cluster for the tests and the bench.

It brings a cluster up and down and switches faults the way a user does (`make sim-up|sim-fault|sim-down`), reaches
the hosts over SSH with host key checking (simctl's own command line), and runs deploy.yml against the inventory
sim-up wrote. Test-only clusters go through `running_cluster`, which fails when anything of them is left behind.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from simkit.paths import ANSIBLE_DIR, SIMCTL, simctl
from simkit.playbook import playbook
from simkit.procs import checked, make, run


class SimCluster:
    """A simulated cluster under its own name (SIM_NAME), on a free subnet, with its inventory in `inventory`
    (default ansible/inventory/NAME, where `make sim-up` writes it). `work` is a scratch folder for vars files."""

    def __init__(self, name: str, nodes: int, inventory: Path | None = None, work: Path | None = None) -> None:
        self.name, self.nodes = name, nodes
        self.inventory = inventory or ANSIBLE_DIR / "inventory" / name
        self._work = work
        self.info: dict[str, Any] = {}  # cluster.json of the running cluster (names, addresses, NPU addresses)

    @property
    def work(self) -> Path:
        """The scratch folder; a new temporary one, made when first needed, unless one was given."""
        if self._work is None:
            self._work = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        return self._work

    @property
    def hosts(self) -> list[str]:
        return [f"a3-{i:02d}" for i in range(1, self.nodes + 1)]

    @property
    def hosts_file(self) -> Path:
        return self.inventory / "hosts.yml"

    # ---- life cycle, faults (the Makefile's targets, as typed) ----

    def make(self, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
        return make(*args, f"SIM_NAME={self.name}", f"SIM_INVENTORY={self.inventory}", timeout=timeout)

    def up(self, link: str = "", profile: str = "", read_inventory: bool = True) -> float:
        """`make sim-up` (which builds the host image first when it changed); returns its seconds. A profile
        (real-site) leaves hosts.yml to `make inventory`, which reads it from the hosts as a site does: here, unless
        read_inventory is False (the caller types README's runbook, tests/e2e/runbook_sim.py)."""
        t0 = time.monotonic()
        link_var = [f"SIM_LINK={link}"] if link else []
        profile_vars = [f"SIM_PROFILE={profile}", "SIM_HOSTS_FILE=none"] if profile else []
        up = checked(
            self.make("sim-up", f"NODES={self.nodes}", "SIM_SUBNET=auto", *link_var, *profile_vars),
            f"sim-up {self.name}",
        )
        self.info = json.loads((self.inventory / "cluster.json").read_text())
        if profile:
            if read_inventory:
                self.inventory_from_hosts()
            assert "hosts.yml not written: make inventory" in up.stdout, up.stdout[-2000:]
        return time.monotonic() - t0

    def inventory_from_hosts(self) -> subprocess.CompletedProcess[str]:
        """`make inventory` as the README's runbook types it, into this cluster's inventory folder."""
        p = make(
            "inventory",
            f"SITE={self.name}",
            "HOSTS=" + " ".join(self.ip(h) for h in self.hosts),
            f"SSH_KEY={self.inventory / 'id_ed25519'}",
            f"KNOWN_HOSTS={self.inventory / 'known_hosts'}",
            f"INVENTORY_OUT={self.inventory}",
            timeout=600,
        )
        return checked(p, "make inventory")

    def down(self) -> subprocess.CompletedProcess[str]:
        return self.make("sim-down")

    def fault(self, host: str, fault: str) -> None:
        checked(self.make("sim-fault", f"HOST={host}", f"FAULT={fault}"), f"sim-fault {host} {fault}")

    def clear(self) -> None:
        for h in self.hosts:
            self.fault(h, "clear")

    def simctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """simctl.py itself (status, link, a fault whose refusal a test reads)."""
        env = dict(os.environ, SIM_NAME=self.name, SIM_INVENTORY=str(self.inventory))
        p = run([sys.executable, str(SIMCTL), *args], env=env)
        if check:
            checked(p, f"simctl {' '.join(args)}")
        return p

    def seed(self) -> None:
        """The site's placeholder model and data on the shared storage, as `make demo` does."""
        checked(self.make("sim-seed"), "make sim-seed")

    # ---- what sim-up wrote ----

    def ip(self, host: str) -> str:
        return next(str(h["cluster_ip"]) for h in self.info["hosts"] if h["name"] == host)

    def hostvars(self) -> dict[str, Any]:
        data = yaml.safe_load(self.hosts_file.read_text())
        hosts: dict[str, Any] = data["all"]["children"]["a3_nodes"]["hosts"]
        return hosts

    def site_vars(self) -> dict[str, Any]:
        data: dict[str, Any] = yaml.safe_load((self.inventory / "group_vars" / "all" / "sim.yml").read_text())
        return data

    # ---- SSH, with the cluster's key and host key checking on ----

    def ssh_argv(self, host: str, known_hosts: Path | None = None) -> list[str]:
        return list(simctl.ssh_cmd(self.inventory, self.ip(host), known_hosts))

    def ssh(
        self, host: str, *words: str, stdin: str = "", timeout: float = 300, known_hosts: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """One command on `host`, each word quoted (ssh hands the remote shell one string)."""
        argv = [*self.ssh_argv(host, known_hosts), shlex.join(words)]
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)

    def shell(self, host: str, line: str, timeout: float = 900, data: bytes | None = None) -> Any:
        """A shell command line on `host`; with `data`, that is its standard input and the result is in bytes."""
        argv = [*self.ssh_argv(host), line]
        if data is not None:
            return subprocess.run(argv, input=data, capture_output=True, timeout=timeout, check=False)
        return run(argv, timeout=timeout)

    def output(self, host: str, line: str) -> str:
        """Standard output of a shell command line on `host` that must succeed."""
        p = self.shell(host, line, timeout=300)
        assert p.returncode == 0, f"{host}: {line}: {p.stderr}"
        return str(p.stdout)

    def popen(self, host: str, line: str) -> subprocess.Popen[str]:
        argv = [*self.ssh_argv(host), line]
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def on_all(self, line: str) -> list[subprocess.CompletedProcess[str]]:
        with concurrent.futures.ThreadPoolExecutor(len(self.hosts)) as ex:
            return list(ex.map(lambda h: self.shell(h, line), self.hosts))

    def probe(self, host: str, script: str) -> dict[str, Any]:
        """Run a Python script on `host` over SSH (argv: peers' NPU addresses as JSON, the control node's clock)."""
        peers = {h["name"]: h["npu_ips"] for h in self.info["hosts"] if h["name"] != host}
        script = "import os; os.environ['VERL_SIM_PING_TIMEOUT'] = '1.0'\n" + script
        p = self.ssh(host, "python3", "-", json.dumps(peers), str(time.time()), stdin=script, timeout=180)
        if p.returncode == 255:  # ssh itself failed: the host does not answer
            return {"reachable": False}
        assert p.returncode == 0, p.stderr
        out: dict[str, Any] = json.loads(p.stdout)
        for k in out:
            if k.startswith("ping:"):  # the summary line; the per-packet lines carry round-trip times
                out[k] = [line for line in out[k].splitlines() if "packets transmitted" in line]
        return out

    def probe_all(self, script: str) -> dict[str, dict[str, Any]]:
        with concurrent.futures.ThreadPoolExecutor(len(self.hosts)) as pool:
            return dict(zip(self.hosts, pool.map(lambda h: self.probe(h, script), self.hosts), strict=True))

    # ---- the site and deploy.yml ----

    def prepare_site(self, tarball: Path) -> Path:
        """What a site provides before deploy.yml: model and data on the shared storage, the image tarball.
        Returns the extra-vars file naming the tarball."""
        site = self.site_vars()
        files = {
            **{f"{path}/config.json": '{"model_type": "qwen3_5_moe"}' for path in site["site_models"].values()},
            **{f"{path}/model-00001-of-00001.safetensors": "weights" for path in site["site_models"].values()},
            f"{site['site_data_path']}/train.parquet": "train",
            f"{site['site_data_path']}/test.parquet": "test",
        }
        script = " && ".join(
            f"mkdir -p {shlex.quote(str(Path(p).parent))} && printf %s {shlex.quote(v)} > {shlex.quote(p)}"
            for p, v in files.items()
        )
        self.output(self.hosts[0], f"sudo sh -c {shlex.quote(script)}")
        # deploy.yml copies the repository's compose.yaml and compose.sim.yaml (site_simulated) as they are.
        path = self.work / f"{self.name}-vars.yml"
        path.write_text(yaml.safe_dump({"site_image_tarball": str(tarball)}))
        return path

    def playbook(self, *args: str, timeout: float = 3600, fresh_ssh: bool = False) -> subprocess.CompletedProcess[str]:
        """deploy.yml on this cluster's inventory. fresh_ssh: new SSH connections (no master left by an earlier run)."""
        env = {"ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.work / f"cp-{time.monotonic_ns()}")} if fresh_ssh else {}
        return playbook(self.inventory, *args, timeout=timeout, extra_env=env)

    def deploy(self, extra: Path, *args: str, fresh_ssh: bool = False) -> subprocess.CompletedProcess[str]:
        """deploy.yml with the extra-vars file of `prepare_site`."""
        return self.playbook("-e", f"@{extra}", *args, timeout=1800, fresh_ssh=fresh_ssh)

    def make_deploy(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`make deploy INVENTORY=...`, the README's way (its .env, its token, its summary)."""
        return make("deploy", f"INVENTORY={self.inventory}", *args)

    def state(self) -> dict[str, str]:
        """Everything deploy.yml may change on each host, as text (compared before and after a run)."""
        probe = (
            "sudo sh -c 'for f in /etc/security/limits.d/90-verl-recipe.conf /etc/sysctl.d/90-verl-recipe.conf "
            '/etc/docker/daemon.json /opt/verl-recipe/node.env; do echo "== $f"; cat $f 2>/dev/null; done; '
            "ls -la /opt/verl-recipe /var/lib/verl-recipe/image-stage 2>&1 | grep -v total; "
            "docker ps -a --format {{.Names}} 2>&1; docker images -q 2>&1'"
        )
        return {h: str(self.shell(h, probe, timeout=300).stdout) for h in self.hosts}


def leftovers(name: str) -> list[str]:
    """Containers, networks and volumes of cluster `name` (by label and by name) still on this machine."""
    out = []
    for kind in ("container", "network", "volume"):
        out += simctl.labelled(kind, name)
    names = checked(run(["docker", "ps", "-a", "--filter", f"name=^{name}-", "--format", "{{.Names}}"]), "docker ps")
    return out + names.stdout.split()


@contextlib.contextmanager
def running_cluster(
    name: str, nodes: int, workdir: Path, link: str = "", profile: str = "", site_inventory: bool = False
) -> Iterator[SimCluster]:
    """A cluster under a test-only name, its inventory in `workdir`, removed on exit even after a failure;
    nothing of it may be left. site_inventory: the inventory where a site's goes (ansible/inventory/NAME, so README's
    `INVENTORY=inventory/<site>` names it) and hosts.yml left to the caller's `make inventory`."""
    c = SimCluster(name, nodes, None if site_inventory else workdir / name, workdir)
    try:
        c.up(link, profile, read_inventory=not site_inventory)
        yield c
    finally:
        c.down()
        left = leftovers(name)
        assert left == [], f"objects of {name} left behind: {left}"
        assert not c.inventory.exists()


@contextlib.contextmanager
def deployed_cluster(
    name: str, nodes: int, workdir: Path, profile: str = ""
) -> Iterator[tuple[SimCluster, subprocess.CompletedProcess[str]]]:
    """`running_cluster` after the README's quickstart: the image tarball, the site's placeholder model and data,
    `make deploy`, which must succeed. Yields the cluster and deploy's output."""
    checked(make("image-sim-tar"), "make image-sim-tar")
    with running_cluster(name, nodes, workdir, profile=profile) as c:
        c.seed()
        res = c.make_deploy()
        assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
        yield c, res
