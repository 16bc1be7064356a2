"""What one bundle sees, run inside it: host, visible devices, the node's environment keys and shared paths."""

from __future__ import annotations

import os
import socket
from typing import Any


def probe(paths: dict[str, list[str]], env_keys: tuple[str, ...]) -> dict[str, Any]:
    """Runs in one bundle: what this worker sees."""
    import ray

    problems = []
    for key in env_keys:
        if not os.environ.get(key):
            problems.append(f"{key} not set in the worker environment")
    for p in paths.get("read", []):
        if not os.path.exists(p):
            problems.append(f"{p} missing")
    for p in paths.get("write", []):
        probe_dir = p
        while not os.path.exists(probe_dir) and probe_dir != os.path.dirname(probe_dir):
            probe_dir = os.path.dirname(probe_dir)
        if not os.access(probe_dir, os.W_OK):
            problems.append(f"{p} not writable")
    ids = ray.get_runtime_context().get_accelerator_ids().get("NPU", [])
    return {
        "host": socket.gethostname(),
        "ip": ray.util.get_node_ip_address(),
        "npu_ids": list(ids),
        "visible": os.environ.get("ASCEND_RT_VISIBLE_DEVICES", ""),
        "problems": problems,
    }


# How long one new TCP connection between two nodes may take: a healthy cluster network answers in milliseconds; a
# firewall that drops (rather than rejects) the SYN leaves the caller waiting, the way Gloo's and c10d's connects do.
