"""Evidence from every host on the shared real-site 3-host simulated cluster (tests/e2e/conftest.py): a short
training through `make train` as the operator, then `make logs RUN=...` from the control node (ansible/logs.yml: the
kernel log's tail, npu-smi and doctor on every host as root, then `verl-recipe bundle` in the head's `runs`
service). The archive that comes back holds every host's node log, npu-smi snapshots from the run's start and end
(taken by each Ray node, cluster/evidence.py) and at collection, the kernel log's tail, doctor's report, the job's
Ray logs, the run folder and the preflight report; and neither the site's planted secret nor the Ray token, by the
same leak search over its files as test_train_fsdp.py's."""

from __future__ import annotations

import re
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from simkit.cluster import SimCluster
from simkit.paths import REPO, simctl
from simkit.procs import make
from tests.e2e.test_train_fsdp import RUN_TIMEOUT_S, runs
from tests.e2e.test_train_rehearsal import all_joined, on_host

pytestmark = pytest.mark.docker

EXPERIMENT = "e2e-bundle"


@pytest.fixture(scope="module")
def cluster(e2e_cluster: tuple[SimCluster, subprocess.CompletedProcess[str]]) -> SimCluster:
    c = e2e_cluster[0]
    p = all_joined(c)  # a module before this one may have left a node restarting
    assert p.returncode == 0, f"the cluster did not come back whole: {p.stdout[-1500:]}{p.stderr[-1500:]}"
    return c


def archive_files(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        out = {}
        for m in tar.getmembers():
            assert m.isfile(), f"{m.name}: plain files only"
            f = tar.extractfile(m)
            assert f is not None
            out[m.name.split("/", 1)[1]] = f.read()
        return out


def holding(files: dict[str, bytes], secret: str) -> list[str]:
    """The members whose name or content holds the secret (or a 12-character piece of it)."""
    pieces = {secret[i : i + 12] for i in range(len(secret) - 11)}
    return [n for n, data in files.items() if any(p.encode() in data or p in n for p in pieces)]


def test_make_logs_brings_every_hosts_evidence_and_no_secret(cluster: SimCluster) -> None:
    c = cluster
    p = make(
        "train", "RECIPE=qwen3.5-35b-fsdp", f"INVENTORY={c.inventory}",
        f"ARGS=--set EXPERIMENT_NAME={EXPERIMENT} --set TOTAL_TRAINING_STEPS=1", timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    run_dir = runs(c, EXPERIMENT)[-1]
    stamp = run_dir.rsplit("/", 1)[1]
    # the Ray nodes answer the run's end request within seconds (cluster/evidence.py REQUEST_POLL_S)
    key = run_dir.removeprefix("/mnt/shared/runs/")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        after = on_host(c, "a3-01", f"ls /mnt/shared/runs/nodes/*/evidence/{key}/npu-smi-after.txt 2>/dev/null")
        if len(after.stdout.split()) == len(c.hosts):
            break
        time.sleep(3)

    p = make("logs", f"RUN={EXPERIMENT}/{stamp}", f"INVENTORY={c.inventory}", timeout=1200)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    m = re.search(r"bundle: (\S+\.tar\.gz)", out)
    assert m, out[-3000:]
    archive = Path(m.group(1))
    assert archive.parent == REPO / "ansible" / ".cache" / "bundles" and archive.is_file()
    files = archive_files(archive)

    assert {"run/train.log", "run/settings.json", "run/outcome.json", "MANIFEST.txt"} <= set(files)
    for host in c.hosts:
        for name in ("node.log", "npu-smi-before.txt", "npu-smi-after.txt", "npu-smi-collected.txt",
                     "kernel-tail.txt", "doctor.txt"):  # fmt: skip
            assert f"hosts/{host}/{name}" in files, (host, name, sorted(files)[:80])
        # the stand-in's table, as the real tool prints it (docs/a3-tools.md T1), from inside the Ray node
        assert b"Ascend910" in files[f"hosts/{host}/npu-smi-before.txt"], files[f"hosts/{host}/npu-smi-before.txt"]
        assert b"Ascend910" in files[f"hosts/{host}/npu-smi-collected.txt"]
        assert any(n.startswith(f"hosts/{host}/ray/") for n in files), f"{host}: the job's Ray logs"
        # every node made its CANN log folder beside its node log (CANN fills it on A3)
        assert on_host(c, host, f"test -d /mnt/shared/runs/nodes/{host}/cann").returncode == 0
    # the processes of the run opened their plogs there (on the stand-ins: verl_sim_standin.plugin, as CANN's
    # runtime does on A3), and the bundle took those written while the run went
    plogs = [n for n in files if re.fullmatch(r"hosts/[^/]+/cann/run/plog/plog-\d+_\d+\.log", n)]
    assert any(n.startswith("hosts/a3-01/") for n in plogs), sorted(files)[:80]
    assert len({n.split("/")[1] for n in plogs}) >= 2, f"the plogs of the ranks on a second host: {plogs}"
    assert any(n.startswith("hosts/a3-01/preflight-report.json") for n in files), "the control node's preflight"
    manifest = files["MANIFEST.txt"].decode()
    assert f"hosts: {' '.join(sorted(c.hosts))}" in manifest, manifest[:2000]
    assert "ray-token" in manifest, "the Ray token was known, so searched for"

    # The leak search: the site's planted secret and the Ray token are in no file of the archive ...
    secret = simctl.planted_secret_file(c.inventory).read_text().strip()
    token = on_host(c, "a3-01", "sudo cat /etc/verl-recipe/ray_auth_token").stdout.strip()
    assert len(secret) > 20 and len(token) >= 32
    assert holding(files, secret) == [] and holding(files, token) == []
    # ... and the search finds what is there
    assert holding(files, "weights synced from the trainer")
