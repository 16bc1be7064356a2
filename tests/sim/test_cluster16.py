"""16 simulated hosts (the size of a 397B site): all reachable over SSH with host key checking, the NPU network a
full mesh, a fault on one host seen by all fifteen peers. Slow: `make test-sim-16`, not part of `make test`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from simkit.cluster import SimCluster, running_cluster

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Each host pings die 0 of every peer, from its own die 0 one peer after another (hccn_tool refuses a second call
# on a die that is busy, as the real tool does); prints {peer: received packets}.
MESH = r"""
import json, subprocess, sys
peers = json.loads(sys.argv[1])
def ping(ip):
    out = subprocess.run(["hccn_tool", "-i", "0", "-ping", "-g", "address", ip], capture_output=True, text=True).stdout
    return int(out.splitlines()[-1].split(", ")[1].split()[0])
got = {peer: ping(ips[0]) for peer, ips in peers.items()}
print(json.dumps({"hostname": open("/etc/hostname").read().strip(), **got}))
"""


@pytest.fixture(scope="module")
def cluster16(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with running_cluster(f"vrsim16t{os.getpid()}", 16, tmp_path_factory.mktemp("inventory")) as c:
        yield c


def test_sixteen_hosts_full_npu_mesh(cluster16: SimCluster) -> None:
    names = [f"a3-{i:02d}" for i in range(1, 17)]
    seen = cluster16.probe_all(MESH)
    for h in names:
        assert seen[h] == {"hostname": h, **{p: 3 for p in names if p != h}}


def test_link_down_on_one_host_is_seen_by_all_peers(cluster16: SimCluster, tmp_path: Path) -> None:
    cluster16.simctl("fault", "a3-16", "link-down:0")
    try:
        seen = cluster16.probe_all(MESH)
    finally:
        cluster16.simctl("fault", "a3-16", "clear")
    for h in (f"a3-{i:02d}" for i in range(1, 16)):
        assert seen[h]["a3-16"] == 0 and all(v == 3 for k, v in seen[h].items() if k not in ("a3-16", "hostname"))
    # a3-16's own die 0 is down, so none of its pings leave
    assert all(v == 0 for k, v in seen["a3-16"].items() if k != "hostname")
