"""The preflight's row (check), the host it runs on (Host: one command at a time, device queries counted, output
checked), reading a file, and a group of checks guarded so that one failure becomes a row, not a lost host."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any

from ansible.module_utils.a3_report import entries_of

# One row of the preflight report: check, ok, status, dies, peers, found, expected, fix (check() builds it).
PreflightRow = dict[str, Any]


def check(
    name: str,
    ok: bool,
    found: Any,
    expected: Any,
    fix: str,
    dies: list[int] | None = None,
    peers: list[str] | None = None,
    entries: dict[int, str] | None = None,
    addresses: dict[int, str] | None = None,
) -> PreflightRow:
    """One row: `dies` and `peers` name what the row is about (the failing dies, the hosts pinged); `entries` what
    was found on each of those dies, and on a ping row the address each pinged (the report's contract,
    a3_report.py)."""
    return {
        "check": name,
        "ok": bool(ok),
        "status": "ok" if ok else "failed",
        "dies": sorted(set(dies or [])),
        "peers": sorted(set(peers or [])),
        "entries": entries_of(entries or {}, addresses),
        "found": str(found),
        "expected": str(expected),
        "fix": "" if ok else fix,
    }


class Host:
    """Runs the host's commands one at a time and counts the device queries (npu-smi, hccn_tool). Output that is
    not UTF-8 is read with replacement characters and named in the tool_output row."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.p = params
        self.timeout = params["command_timeout"]
        path = os.environ.get("PATH", "/usr/bin:/bin")
        extra = [
            *params["tool_dirs"],
            "/usr/local/bin",
            "/usr/local/sbin",
            "/usr/local/Ascend/driver/tools",
            "/usr/sbin",
            "/sbin",
        ]
        self.path = os.pathsep.join([path, *extra])
        self.queries = 0
        self.query_s = 0.0
        self.not_utf8: list[str] = []

    def tool(self, name: str) -> str | None:
        return shutil.which(name, path=self.path)

    def run(self, argv: list[str]) -> tuple[int, str]:
        # LC_ALL=C: the tools' English messages, which the parsers read (a GBK locale prints others)
        env = {**os.environ, "LC_ALL": "C"}
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=self.timeout, check=False, env=env)
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            return 127, str(exc)
        return proc.returncode, self.decode(argv, proc.stdout + proc.stderr).strip()

    def decode(self, argv: list[str], raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            cmd = " ".join([os.path.basename(argv[0]), *argv[1:]])
            self.not_utf8.append(f"`{cmd}` byte {exc.start}: {raw[exc.start : exc.start + 1]!r}")
            return raw.decode("utf-8", errors="replace")

    def query(self, argv: list[str]) -> tuple[int, str]:
        """A device query: never two at once (the caller runs them in sequence)."""
        t = time.monotonic()
        out = self.run(argv)
        self.queries += 1
        self.query_s += time.monotonic() - t
        return out


def read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def guarded(name: str, fn: Any, *args: Any) -> Any:
    """One group of checks; a failure nobody foresaw becomes a failed row for this host instead of killing the
    module (which would lose every other row)."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - reported as a row, with the exception's type and text
        return check(
            name,
            False,
            f"the check itself failed: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}",
            "the check runs",
            "report this line to verl-recipe with the host's tool output; the other rows are still valid",
        )
