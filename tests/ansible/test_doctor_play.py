"""ansible/doctor.yml (`make doctor`): doctor on every host at once and one table on the control node. Here against
hosts that are this machine (local connection) whose `docker` is a stand-in printing a doctor report per host, as
`docker compose run --rm -T doctor --json` prints it (entrypoints/verl_recipe/doctor): the table names each host's
verdict and every check that did not pass with its fix, and the play fails for a failed or silent host."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

OK = {"name": "manifest", "status": "ok", "detail": "/etc/verl-recipe/versions.yaml", "fix": ""}
EXPECTED = {"name": "npu", "status": "expected", "detail": "no torch_npu (simulated)", "fix": ""}
BAD = {"name": "driver", "status": "fail", "detail": "HDK 25.0.RC1 < 26.0.RC1", "fix": "upgrade the driver"}


def run(tmp_path: Path, reports: dict[str, object]) -> subprocess.CompletedProcess[str]:
    hosts = {}
    for name, report in reports.items():
        folder = tmp_path / name
        folder.mkdir()
        # the stand-in docker of this host: its report, or a failure with no JSON at all
        out = json.dumps(report, indent=2) if isinstance(report, dict) else ""
        (folder / "report.json").write_text(out)
        hosts[name] = {
            "site_install_dir": str(folder),
            "ansible_connection": "local",
            "ansible_become": False,
            "ansible_python_interpreter": str(REPO / ".venv" / "bin" / "python"),
        }
    inv = {"all": {"children": {"a3_nodes": {"hosts": hosts}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inv))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "docker").write_text(
        '#!/bin/sh\n[ -s report.json ] || { echo "docker: permission denied" >&2; exit 1; }\ncat report.json\n'
        "grep -q '\"ok\": false' report.json && exit 1; exit 0\n"
    )
    (fake / "docker").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{fake}:{REPO / '.venv' / 'bin'}:{os.environ['PATH']}",
        "ANSIBLE_CONFIG": "ansible.cfg",
        "ANSIBLE_LOCALHOST_WARNING": "false",
        # these hosts share names with the simulated cluster's: nothing of theirs may reach ansible.cfg's fact cache
        "ANSIBLE_CACHE_PLUGIN": "memory",
    }
    return subprocess.run(
        ["ansible-playbook", "-i", str(tmp_path / "hosts.yml"), "doctor.yml"],
        cwd=REPO / "ansible",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=env,
    )


def test_all_hosts_pass_in_one_table(tmp_path: Path) -> None:
    report = {"ok": True, "exit_code": 0, "simulated": True, "checks": [OK, EXPECTED]}
    p = run(tmp_path, {"a3-01": report, "a3-02": report})
    assert p.returncode == 0, p.stdout[-3000:]
    assert "doctor: all 2 hosts pass" in p.stdout
    for h in ("a3-01", "a3-02"):
        assert f"{h:<16} ok     all 2 checks ok or expected" in p.stdout, p.stdout[-3000:]


def test_a_failed_and_a_silent_host_are_named_with_the_fix(tmp_path: Path) -> None:
    good = {"ok": True, "exit_code": 0, "simulated": False, "checks": [OK]}
    bad = {"ok": False, "exit_code": 1, "simulated": False, "checks": [OK, BAD]}
    p = run(tmp_path, {"a3-01": good, "a3-02": bad, "a3-03": None})
    assert p.returncode != 0
    out = p.stdout
    assert f"{'a3-02':<16} FAIL   1 of 2 checks not ok" in out, out[-3000:]
    assert "driver fail: HDK 25.0.RC1 < 26.0.RC1; fix: upgrade the driver" in out
    # no JSON: the host's own last line, not a template error
    assert f"{'a3-03':<16} FAIL" in out and "docker: permission denied" in out, out[-3000:]
    assert "doctor: a3-02, a3-03 did not pass" in out
    assert f"{'a3-01':<16} ok " in out
