"""What the doctor reads of this container: simulated mode, installed versions, the driver's version file, local
addresses and interfaces."""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

from .. import a3facts
from .findings import UsageError

# ---------------------------------------------------------------------------------------------------------------
# helpers


def simulated_from_env(env: dict[str, str]) -> bool:
    raw = env.get("VERL_RECIPE_SIMULATED", "0").strip()
    if raw not in ("0", "1", ""):
        raise UsageError(f"VERL_RECIPE_SIMULATED={raw!r}: use 1 (simulated cluster) or 0 (real A3)")
    return raw == "1"


def installed_version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def same_version(installed: str, pin: str) -> bool:
    """Exact match; a local build tag (`+cpu`) on the installed side is ignored."""
    return installed == pin or installed.split("+", 1)[0] == pin


def hdk_key(version: str) -> tuple[int, ...]:
    """Order Ascend HDK versions (a3facts.hdk_key): 25.5.0 < 26.0.RC1 < 26.0.RC2 < 26.0.0 < 26.0.1."""
    return a3facts.hdk_key(version)


def read_driver_version(path: Path) -> str | None:
    """The HDK release a driver version.info names, None when the file is absent."""
    if not path.is_file():
        return None
    return a3facts.hdk_version(a3facts.parse_version_info(path.read_text(errors="replace"))) or None


def local_addresses() -> set[str]:
    """IPv4 addresses of this network namespace, from /proc/net/fib_trie (stdlib only, no ioctl)."""
    addrs: set[str] = set()
    try:
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
    except OSError:
        return addrs
    for prev, line in zip(lines, lines[1:], strict=False):
        if "/32 host LOCAL" in line:
            addrs.add(prev.split()[-1])
    return addrs


def interfaces(sys_net: Path) -> list[str]:
    try:
        return sorted(p.name for p in sys_net.iterdir())
    except OSError:
        return []
