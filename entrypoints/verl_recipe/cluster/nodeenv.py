"""The per-host env file (docs/contracts.md section 2) as the entrypoint sees it: this node and its cluster."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..settingtypes import SettingsError
from ..topology import RAY_DASHBOARD_PORT, RAY_GCS_PORT

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class NodeEnv:
    name: str
    ip: str
    head_addr: str
    ray_port: int
    dashboard_port: int
    dies: int
    cluster: tuple[tuple[str, str], ...]  # (name, ip) in rank order
    simulated: bool
    num_cpus: int | None
    dev_dir: str
    port_offset: int = 0  # only for several Ray nodes in one network namespace (tests); 0 on a real host

    @property
    def gcs_address(self) -> str:
        return f"{self.head_addr}:{self.ray_port}"

    def name_of(self, ip: str) -> str:
        return next((n for n, a in self.cluster if a == ip), ip)


def _int(env: Mapping[str, str], key: str, default: int | None = None) -> int:
    raw = env.get(key, "")
    if raw == "" and default is not None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise SettingsError(
            f"node env: {key}={raw!r} is not an integer; fix: correct {key} in node.env (written by deploy.yml)"
        ) from None


def parse_cluster(raw: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for item in filter(None, (x.strip() for x in raw.split(","))):
        name, sep, ip = item.partition("=")
        if not sep or not _NAME.match(name) or not ip:
            raise SettingsError(f"node env: CLUSTER_NODES entry {item!r} is not NAME=IP; fix: re-run deploy.yml")
        out.append((name, ip))
    if len({ip for _, ip in out}) != len(out):
        raise SettingsError("node env: CLUSTER_NODES lists an address twice; fix: give each host its own address")
    return tuple(out)


def from_environ(env: Mapping[str, str] | None = None) -> NodeEnv:
    e = os.environ if env is None else env
    missing = [k for k in ("NODE_IP", "HEAD_ADDR") if not e.get(k)]
    if missing:
        raise SettingsError(
            f"node env: {', '.join(missing)} not set; fix: run deploy.yml to write node.env, or export "
            "them (NODE_IP = this host's cluster address, HEAD_ADDR = the Ray head's)"
        )
    cpus = e.get("RAY_NUM_CPUS", "")
    return NodeEnv(
        name=e.get("NODE_NAME") or e["NODE_IP"],
        ip=e["NODE_IP"],
        head_addr=e["HEAD_ADDR"],
        ray_port=_int(e, "RAY_PORT", RAY_GCS_PORT),
        dashboard_port=_int(e, "RAY_DASHBOARD_PORT", RAY_DASHBOARD_PORT),
        dies=_int(e, "NODE_DIES", 16),
        cluster=parse_cluster(e.get("CLUSTER_NODES", "")),
        simulated=e.get("VERL_RECIPE_SIMULATED", "0") == "1",
        num_cpus=_int(e, "RAY_NUM_CPUS") if cpus else None,
        dev_dir=e.get("VERL_RECIPE_DEV_DIR", "/dev"),
        port_offset=_int(e, "VERL_RECIPE_RAY_PORT_OFFSET", 0),
    )
