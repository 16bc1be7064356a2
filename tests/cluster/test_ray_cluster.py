"""Real Ray on loopback inside one verl-recipe:sim container: node start with token authentication, refusal of a
short node and of a node without authentication, the head's wait, the rehearsal (placement groups, probes, gloo
all-reduce), clients without the token or with another one refused by the GCS and the job API, and clean stops."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.docker
def test_two_node_cluster_rehearsal_and_failures(sim_image: str, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    out = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "--shm-size",
            "1g",
            "-v",
            f"{HERE / 'scenario.sh'}:/scenario.sh:ro",
            "-v",
            f"{shared}:/shared",
            "--entrypoint",
            "bash",
            sim_image,
            "/scenario.sh",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = out.stdout.splitlines()
    kv = dict(line.split("=", 1) for line in lines if "=" in line and line.split("=", 1)[0].isupper())
    report = "\n".join(line for line in lines if line.startswith("REPORT: "))
    context = out.stdout + out.stderr
    assert kv.get("RC_SHORT") == "2", context
    assert "h3: 15 NPU dies visible" in kv["MSG_SHORT"] and "missing davinci15" in kv["MSG_SHORT"]
    assert kv.get("RC_NOAUTH") == "2", context
    assert "RAY_AUTH_MODE=(unset)" in kv["MSG_NOAUTH"] and "token authentication" in kv["MSG_NOAUTH"]
    assert kv.get("RC_PREPARE") == "0", context
    assert kv.get("RC_REHEARSE") == "0", context
    assert "gloo all-reduce" in report and "over 4 ranks" in report
    for node in ("h1", "h2"):
        row = next(line for line in lines if line.startswith(f"REPORT: {node} "))
        assert row.split()[3] == "16", f"every bundle of {node} probed: {row}"
        assert row.rstrip().endswith("ok"), row
    assert "REPORT_FILE: 2-nodes.json" in lines
    # GCS status and job-API HTTP code: no token and another cluster's token are refused, the cluster's accepted.
    assert kv.get("AUTH_NONE") == "refused 401", context
    assert kv.get("AUTH_OTHER") == "refused 403", context
    assert kv.get("AUTH_OWN") == "accepted 200", context
    assert kv.get("RC_WRONG_TOKEN") == "2", context
    assert "refuses the token in /tmp/other_token" in kv["MSG_WRONG_TOKEN"], kv["MSG_WRONG_TOKEN"]
    assert kv.get("TOKEN_LEAKS") == "0", "the token appears in no Ray log, node log, report or run output"
    assert kv.get("RC_WORKER_STOP") == "0", context
    assert kv.get("RC_WAIT") == "3", context
    assert "h2 (127.0.0.3)" in kv["MSG_WAIT"], kv["MSG_WAIT"]
    assert kv.get("RC_HEAD_STOP") == "0", context
    assert kv.get("LEFTOVER") == "0", "SIGTERM stops every Ray process the node started"
    assert {"NODE_LOG: h1.log", "NODE_LOG: h2.log"} <= set(lines)
