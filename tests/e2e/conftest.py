"""One deployed 3-host simulated cluster for the end-to-end modules that do not interfere with each other (the
rehearsal, token-authenticated Ray, training on the CPU stand-ins), on a simulated site that differs the way real
sites do. It is brought up by README's runbook itself, steps 1 to 5 typed as README types them (tests/e2e/
runbook_sim.py): the host keys, `make inventory` from what the hosts report, the site's edit, `make preflight`,
`make deploy`; tests/e2e/test_runbook.py types the steps after. The power-loss module reboots hosts on purpose and
keeps a cluster of its own."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from simkit.cluster import SimCluster, running_cluster
from simkit.paths import REPO
from simkit.procs import checked, make
from tests.e2e.runbook_sim import RunbookOnSim, failed


@pytest.fixture(scope="session")
def e2e_site(sim_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunbookOnSim]:
    name = f"{os.environ.get('SIM_TEST_PREFIX', 'e2e')}{os.getpid() % 100000}"
    work = tmp_path_factory.mktemp("e2e")
    # The real-site profile (docs/simulated-cluster.md, "Site profiles"): NPU addresses with no pattern read by
    # `make inventory`, npu-smi only in /usr/local/sbin on a3-01 (the head) and a3-03, HDK versions and memory that
    # differ between hosts, and a deploy account without the docker group (training goes through the operator
    # account and verl-train).
    checked(make("image-sim-tar"), "make image-sim-tar")
    with running_cluster(name, 3, work, profile="real-site", site_inventory=True) as c:
        c.seed()  # README step 3's stand-in: the model and data on the shared storage
        book = RunbookOnSim(c, work)
        try:
            done = book.run(range(1, 6))
            assert not failed(done), failed(done)
            yield book
        finally:
            # step 4's `make use` chose this cluster as the checkout's site: it goes with the cluster
            current = REPO / "ansible" / "inventory" / "current"
            if current.is_symlink() and current.resolve() == c.inventory.resolve():
                current.unlink()


@pytest.fixture(scope="session")
def e2e_cluster(e2e_site: RunbookOnSim) -> tuple[SimCluster, subprocess.CompletedProcess[str]]:
    c = e2e_site.cluster
    deploy = next(t.proc for t in e2e_site.typed if t.line.split()[:2] == ["make", "deploy"])
    # the cluster's own addresses: another simulated cluster on this machine moves it to another subnet
    assert f"a3-03  {c.ip('a3-03')}" in deploy.stdout and "joined  16   48   ok" in deploy.stdout
    return c, deploy
