"""What each host keeps of a run on shared storage, beside its node log, and the node's part in keeping it.

    LOG_DIR/nodes/<host>.log                       the node's own log, for its life (raynode.py)
    LOG_DIR/nodes/<host>/cann/                     CANN's application logs (plogs) of every process on the node:
                                                   ASCEND_PROCESS_LOG_PATH, exported before `ray start`
    LOG_DIR/nodes/<host>/evidence/<run>/           one run's items from this host, <run> being the run folder's
                                                   path under LOG_DIR (<project>/<experiment>/runs/<stamp>):
        npu-smi-before.txt, npu-smi-after.txt      `npu-smi info` when the run starts and when it ends (the node)
        ray/                                       this node's Ray session logs written during the run (the node,
                                                   at the run's end)
        kernel-tail.txt, npu-smi-collected.txt,    written by `make logs` (ansible/logs.yml, as root on the host)
        doctor.txt, preflight-report.json

The launcher asks for the snapshots with a request file in LOG_DIR/nodes/.requests/ (shared storage: every node
reads it); each node's request thread answers within REQUEST_POLL_S. npu-smi runs only there, in the Ray node
container, the one that holds the dies: Huawei's npu-smi guide says the tool does not support concurrent calls, and
the requests come before verl starts and after it ends, when nothing else on the node calls it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

NODES = "nodes"  # LOG_DIR/nodes (contracts/runfiles.NODES is the run folder's link to it)
CANN = "cann"
EVIDENCE = "evidence"
REQUESTS = ".requests"
BEFORE, AFTER = "before", "after"
NPU_SMI_BEFORE, NPU_SMI_AFTER = "npu-smi-before.txt", "npu-smi-after.txt"
JOB_RAY_LOGS = "ray"

# CANN's application-log variables (CANN 9.0.0 environment variable reference, "日志" section): the folder its
# plog/ and device-<id>/ logs go to (default $HOME/ascend/log, lost with the container). Only the path is set here;
# the level (ASCEND_GLOBAL_LOG_LEVEL, default 3 = ERROR) and ASCEND_SLOG_PRINT_TO_STDOUT (1 sends the logs to the
# screen instead of the files) stay the site's (docs/troubleshooting.md, "Evidence from every host").
CANN_LOG_ENV = "ASCEND_PROCESS_LOG_PATH"

NPU_SMI = "/usr/local/bin/npu-smi"  # compose.yaml binds the host's there, read-only
NPU_SMI_TIMEOUT_S = 60.0
REQUEST_POLL_S = 2.0
REQUEST_MAX_AGE_S = 600.0  # older requests are another node start's business (a node that restarts skips them)
SESSION_LOGS = Path("/tmp/ray/session_latest/logs")  # compose.yaml mounts the host's Ray temp folder at /tmp/ray
SESSION_LOG_MAX_FILES = 400
SESSION_LOG_TAIL_BYTES = 16 * 2**20  # per file: the end of a Ray log is where a job's failure is
_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+=-]{0,199}$")


def nodes_dir(log_dir: str | Path) -> Path:
    return Path(log_dir) / NODES


def cann_log_dir(log_dir: str | Path, host: str) -> Path:
    return nodes_dir(log_dir) / host / CANN


def run_key(run_dir: Path, log_dir: str | Path) -> str:
    """The run folder's path under LOG_DIR, the same on every host; ValueError when it is not under it."""
    rel = os.path.relpath(os.path.abspath(run_dir), os.path.abspath(log_dir))
    if not valid_key(rel):
        raise ValueError(f"{run_dir} is not a run folder under LOG_DIR {log_dir}")
    return rel


def valid_key(key: str) -> bool:
    """A relative path of plain names: nothing a request could use to write outside LOG_DIR/nodes/<host>."""
    parts = key.split("/")
    return 1 <= len(parts) <= 8 and all(_PART.match(p) and p not in (".", "..") for p in parts)


def evidence_dir(log_dir: str | Path, host: str, key: str) -> Path:
    return nodes_dir(log_dir) / host / EVIDENCE / key


# ---- the launcher's side


def request_snapshots(run_dir: Path, log_dir: str | Path, when: str, since: float | None = None) -> Path | None:
    """Ask every node for its `npu-smi info` (and at the end its Ray logs since `since`); never stops a run."""
    try:
        key = run_key(run_dir, log_dir)
        folder = nodes_dir(log_dir) / REQUESTS
        folder.mkdir(parents=True, exist_ok=True)
        now = time.time()
        for old in folder.glob("*.json"):  # a day of requests is plenty; older ones are nobody's
            with contextlib.suppress(OSError):
                if now - old.stat().st_mtime > 86400:
                    old.unlink()
        body = {"run": key, "when": when, "time": now, "since": since if since is not None else now}
        tmp = folder / f".{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(body) + "\n")
        path = folder / f"{int(now)}-{uuid.uuid4().hex[:8]}-{when}.json"
        tmp.replace(path)
        return path
    except (OSError, ValueError) as exc:
        print(f"warning: the hosts' npu-smi {when} snapshot was not asked for ({exc})", file=sys.stderr)
        return None


# ---- the node's side


def node_cann_env(log_dir: str | None, host: str) -> dict[str, str]:
    """The CANN log folder every process of this node writes to, or nothing without LOG_DIR."""
    return {CANN_LOG_ENV: str(cann_log_dir(log_dir, host))} if log_dir else {}


def npu_smi_argv(simulated: bool, tool: str = NPU_SMI) -> list[str]:
    # The simulated hosts' stand-in is a Python script whose #! names the host's python3, which the simulated image
    # lacks; it runs with the node's own interpreter there. On A3 npu-smi is the driver's binary.
    return [sys.executable, "-IS", tool, "info"] if simulated else [tool, "info"]


def npu_smi_text(argv: list[str], timeout_s: float = NPU_SMI_TIMEOUT_S) -> str:
    """`npu-smi info`'s output with a header line; a failure is written down, not raised."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        p = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"# {stamp} `{' '.join(argv[-2:])}` did not run: {exc}\n"
    out = (p.stdout + p.stderr).decode(errors="replace")
    return f"# {stamp} `{' '.join(argv[-2:])}` exit {p.returncode}\n{out}"


def _write_new(path: Path, text: str) -> None:
    """Written under the node's own folder, never through a link planted there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def copy_ray_logs(src: Path, dest: Path, since: float) -> int:
    """This node's Ray session logs written since the run started, each cut to its last SESSION_LOG_TAIL_BYTES."""
    try:
        entries = sorted(os.scandir(src), key=lambda e: e.name)
    except OSError:
        return 0
    copied = 0
    for e in entries:
        if copied >= SESSION_LOG_MAX_FILES:
            break
        try:
            if not e.is_file(follow_symlinks=False) or e.stat(follow_symlinks=False).st_mtime < since:
                continue
            dest.mkdir(parents=True, exist_ok=True)
            fd = os.open(dest / e.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with open(e.path, "rb") as f, os.fdopen(fd, "wb") as out:
                size = os.fstat(f.fileno()).st_size
                f.seek(max(0, size - SESSION_LOG_TAIL_BYTES))
                shutil.copyfileobj(f, out)
            copied += 1
        except OSError:
            continue  # a worker log that went away while read
    return copied


def answer(request: Any, log_dir: str, host: str, simulated: bool, ray_logs: Path = SESSION_LOGS) -> Path:
    """One request: this host's npu-smi snapshot (and at the end its Ray logs) into its evidence folder."""
    if not isinstance(request, dict):
        raise ValueError(f"request {str(request)[:200]} is not a JSON object")
    key, when, since = str(request.get("run", "")), request.get("when"), request.get("since") or 0
    if not valid_key(key) or when not in (BEFORE, AFTER) or not isinstance(since, int | float):
        raise ValueError(f"request {str(request)[:200]} is not {{run: <path under LOG_DIR>, when: before|after}}")
    folder = evidence_dir(log_dir, host, key)
    _write_new(folder / (NPU_SMI_BEFORE if when == BEFORE else NPU_SMI_AFTER), npu_smi_text(npu_smi_argv(simulated)))
    if when == AFTER:
        copy_ray_logs(ray_logs, folder / JOB_RAY_LOGS, float(since))
    return folder


def serve_requests(log_dir: str, host: str, simulated: bool, stopping: threading.Event) -> None:
    """The node's request thread: each new request answered once; nothing here may stop the node."""
    folder = nodes_dir(log_dir) / REQUESTS
    seen: set[str] = set()
    warned = False
    while not stopping.wait(REQUEST_POLL_S):
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".json") and n not in seen)
        except OSError:
            continue
        for name in names:
            seen.add(name)
            try:
                path = folder / name
                if time.time() - path.stat().st_mtime > REQUEST_MAX_AGE_S:
                    continue
                answer(json.loads(path.read_text()), log_dir, host, simulated)
            except Exception as exc:  # noqa: BLE001 - a bad request file never stops the node
                if not warned:
                    print(f"{host}: a snapshot request was not answered ({exc})", file=sys.stderr, flush=True)
                    warned = True


def start_request_thread(log_dir: str | None, host: str, simulated: bool, stopping: threading.Event) -> None:
    """The node's part: its CANN log folder made (CANN would make it at its first line; made here, every host shows
    where its plogs go) and the request thread started. Without LOG_DIR, nothing."""
    if not log_dir:
        return
    with contextlib.suppress(OSError):
        cann_log_dir(log_dir, host).mkdir(parents=True, exist_ok=True)
    threading.Thread(target=serve_requests, args=(log_dir, host, simulated, stopping), daemon=True).start()
