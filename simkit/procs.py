"""Running commands for the tests and the bench: output captured, failures raised with the output's tail."""

from __future__ import annotations

import subprocess
from typing import Any

from simkit.paths import REPO


class CommandFailed(RuntimeError):
    """A command the kit needed failed; the message ends with the tail of its output."""


def run(cmd: list[str], timeout: float = 3600, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)


def checked(p: subprocess.CompletedProcess[str], what: str) -> subprocess.CompletedProcess[str]:
    """`p` when it exited 0; else CommandFailed naming `what`, the exit status and the last 3000 characters."""
    if p.returncode != 0:
        raise CommandFailed(f"{what} failed (rc {p.returncode}): {(p.stdout + p.stderr)[-3000:]}")
    return p


def make(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    """A target of the repository's Makefile, as a user types it."""
    return run(["make", "--no-print-directory", "-C", str(REPO), *args], timeout=timeout)
