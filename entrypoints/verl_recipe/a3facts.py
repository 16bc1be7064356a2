"""What is fixed about an Ascend A3 host, for every side that reads one: the HDK version order, the version.info
format, the dies of a node, the Ray ports and the nearest existing parent of a path.

Standard library only, no imports from the project: it runs where the package is not installed too. It has one
copy, here (the package's doctor and topology import it); ansible/module_utils/a3facts.py (the preflight module
imports `ansible.module_utils.a3facts` on the hosts) and docker/sim-host/tools/a3facts.py (the simulated host's
stand-ins) are links to it, and docker/sim-host/build.sh copies the file itself into the image's build context.
"""

from __future__ import annotations

import os
import re

# An A3 node's NPU dies, davinci0-15 (8 NPU modules x 2 dies); docker/versions.yaml `dies_per_node.a3` says the same.
DIES_PER_NODE = 16

# The defaults of RAY_PORT (the head's GCS) and RAY_DASHBOARD_PORT, which the site may change (node.env).
RAY_GCS_PORT = 6379
RAY_DASHBOARD_PORT = 8265
# Every node's own ports, as `ray start` options.
RAY_NODE_PORTS = {
    "node-manager-port": 6380,
    "object-manager-port": 6381,
    "runtime-env-agent-port": 6382,
    "metrics-export-port": 6383,
    "dashboard-agent-grpc-port": 6384,
    "dashboard-agent-listen-port": 52365,
    "min-worker-port": 10002,
    "max-worker-port": 19999,
}
RAY_CLIENT_PORT = 10001  # the head's Ray client server

# version.info keys that hold the HDK release. The driver's `Version` is the release itself; the firmware's
# `Version` is its own 7.x number, so only `package_version` names the firmware's HDK release.
DRIVER_VERSION_KEYS = ("Version", "package_version")
FIRMWARE_VERSION_KEYS = ("package_version",)

_RC = re.compile(r"rc(\d+)", re.IGNORECASE)


def hdk_key(version: str) -> tuple[int, ...]:
    """Sort key of an Ascend HDK version, MAJOR.MINOR[.PATCH|.RCn][.N...]:

    25.5.0 < 26.0.RC1 = 26.0.rc1 < 26.0.RC2 < 26.0 = 26.0.0 < 26.0.1 < 26.0.1.2. A release candidate sorts
    before every final release of the same major.minor; a missing third field is .0; fields after the third are
    numbers compared last (trailing zeros among them do not count). Anything else (26, 26.x.1, 26.0.beta, an
    empty string) raises ValueError naming the value.
    """
    parts = version.strip().split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ValueError(f"not an HDK version: {version!r} (want MAJOR.MINOR[.PATCH|.RCn], like 26.0.RC1 or 25.5.0)")
    third = parts[2] if len(parts) > 2 else "0"
    rc = _RC.fullmatch(third)
    if not rc and not third.isdigit():
        raise ValueError(f"not an HDK version: {version!r} ({third!r} is neither a number nor RCn)")
    extra = parts[3:]
    if not all(p.isdigit() for p in extra):
        raise ValueError(f"not an HDK version: {version!r} (fields after the third must be numbers)")
    tail = [int(p) for p in extra]
    while tail and tail[-1] == 0:
        tail.pop()
    # (release candidate 0 / final 1, its number) after major.minor
    stage = [0, int(rc.group(1))] if rc else [1, int(third)]
    return (int(parts[0]), int(parts[1]), *stage, *tail)


def parse_version_info(text: str) -> dict[str, str]:
    """`key=value` lines of a driver or firmware version.info; the first of a repeated key counts."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def hdk_version(fields: dict[str, str], keys: tuple[str, ...] = DRIVER_VERSION_KEYS) -> str:
    """The HDK release a parsed version.info names (the first of `keys` that is set), or "" when none is."""
    return next((fields[k] for k in keys if fields.get(k)), "")


def nearest_existing(path: str) -> str:
    """`path` itself when it exists, else its nearest existing parent (a folder still to be created lies below it)."""
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return probe or "."
