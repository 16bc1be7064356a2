"""deploy.yml on 1 and 16 simulated hosts (`make test-ansible-16`): first run, re-run with changed=0, and the
cheap preflight alone; the timings go to build/ansible-timings.json for docs/deploy.md."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from simkit.cluster import SimCluster
from simkit.images import save_sim_image
from simkit.paths import REPO
from simkit.playbook import changed_tasks, recap, role_times

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TIMINGS = REPO / "build" / "ansible-timings.json"


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("ans-scale") / "verl-recipe-sim.tar"
    save_sim_image(path)
    yield path


@pytest.mark.parametrize("nodes", [1, 16])
def test_first_run_and_rerun(nodes: int, tarball: Path, tmp_path: Path) -> None:
    sim = SimCluster(f"ans{os.getpid()}-{nodes}", nodes, work=tmp_path)  # per process: runs may overlap
    try:
        sim.up()
        extra = sim.prepare_site(tarball)
        t0 = time.monotonic()
        first = sim.deploy(extra)
        t1 = time.monotonic()
        assert first.returncode == 0, (first.stdout + first.stderr)[-6000:]
        joined = re.findall(r"^\s+- a3-\d\d\s+\S+\s+joined\s+16\s+48\s+ok$", first.stdout, re.M)
        assert len(joined) == nodes, first.stdout[-3000:]
        second = sim.deploy(extra)
        t2 = time.monotonic()
        assert second.returncode == 0, (second.stdout + second.stderr)[-6000:]
        counts = recap(second.stdout)
        assert all(c["changed"] == 0 for c in counts.values()), changed_tasks(second.stdout)
        pre = sim.deploy(extra, "--tags", "preflight")
        t3 = time.monotonic()
        assert pre.returncode == 0 and f"preflight OK: {nodes} hosts" in pre.stdout
        record = {
            "hosts": nodes,
            "first_run_s": round(t1 - t0, 1),
            "rerun_s": round(t2 - t1, 1),
            "preflight_only_s": round(t3 - t2, 1),
            "first_run_roles_s": role_times(first.stdout),
            "rerun_roles_s": role_times(second.stdout),
        }
        data = json.loads(TIMINGS.read_text()) if TIMINGS.is_file() else {}
        data[str(nodes)] = record
        TIMINGS.parent.mkdir(parents=True, exist_ok=True)
        TIMINGS.write_text(json.dumps(data, indent=1) + "\n")
        print(json.dumps(record))
    finally:
        sim.down()
