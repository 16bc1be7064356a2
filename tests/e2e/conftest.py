"""One deployed 3-host simulated cluster for the end-to-end modules that do not interfere with each other (the
rehearsal, token-authenticated Ray, training on the CPU stand-ins): the README's quickstart runs once per test run
instead of once per module, on a simulated site that differs the way real sites do. The power-loss module reboots
hosts on purpose and keeps a cluster of its own."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from simkit.cluster import SimCluster, deployed_cluster


@pytest.fixture(scope="session")
def e2e_cluster(
    sim_image: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SimCluster, subprocess.CompletedProcess[str]]]:
    name = f"{os.environ.get('SIM_TEST_PREFIX', 'e2e')}{os.getpid() % 100000}"
    # The real-site profile (docs/simulated-cluster.md, "Site profiles"): NPU addresses with no pattern read by
    # `make inventory`, npu-smi only in /usr/local/sbin on a3-02, HDK versions and memory that differ between hosts,
    # and a deploy account without the docker group (training goes through the operator account and verl-train).
    with deployed_cluster(name, 3, tmp_path_factory.mktemp("e2e"), profile="real-site") as (c, deploy):
        # the cluster's own addresses: another simulated cluster on this machine moves it to another subnet
        assert f"a3-03  {c.ip('a3-03')}" in deploy.stdout and "joined  16   48   ok" in deploy.stdout
        yield c, deploy
