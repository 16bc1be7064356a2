"""The stand-in rollout's own checks (standin_checks.py), in a fresh Python: see that file for why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHECKS = Path(__file__).with_name("standin_checks.py")


def test_standin_rollout_checks_pass_in_their_own_process() -> None:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(CHECKS)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, cwd=CHECKS.parents[2])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "7 passed" in p.stdout.splitlines()[-1], p.stdout[-1000:]
