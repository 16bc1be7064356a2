"""The preflight report: what crosses from the preflight module (on each host) to its report plugin (on the control
node) to the readiness page. One row per host and check; a row that is about dies names them in `entries`, one per
die, each with what was found there (and, on a ping row, the address pinged, and the peer host and die once the
report plugin knows them). The table of checks says each check's level (drawn on the die grid, or as a host badge)
and on which inter-server path a failure of it explains lost pings to that die. docs/contracts.md section 8.

Standard library only, no imports: ansible/module_utils/a3_report.py is a link to this file, which Ansible ships to
every host with the preflight module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The report's schema: 2 added `schema`, the rows' `entries` and meta `addresses` and `dies_per_host`; the readiness
# page refuses a report of another schema (rerun the preflight).
SCHEMA = 2

DIE, HOST = "die", "host"
ROCE, HCCS = "roce", "hccs"
BOTH = (ROCE, HCCS)


@dataclass(frozen=True)
class CheckSpec:
    level: str  # DIE: drawn on each die of the grid; HOST: a badge of the host
    explains_pings_on: tuple[str, ...] = ()  # paths on which a failure on a die explains lost pings to that die


# The die-level checks; every other row (OS, versions, runtime, storage, clock, ssh, ...) is a host badge.
CHECKS: dict[str, CheckSpec] = {
    "device_nodes": CheckSpec(DIE, BOTH),
    "npu_map": CheckSpec(DIE, BOTH),
    "chip_health": CheckSpec(DIE, BOTH),
    "npu_occupancy": CheckSpec(DIE),
    "running_versions": CheckSpec(DIE),
    "npu_link": CheckSpec(DIE, (ROCE,)),
    "npu_ip": CheckSpec(DIE, (ROCE,)),
    "hccn_conf": CheckSpec(DIE),
    "npu_net_health": CheckSpec(DIE, BOTH),
    "npu_gateway": CheckSpec(DIE),
    "npu_tls": CheckSpec(DIE),
    "npu_netmask": CheckSpec(DIE),
    "npu_vnic": CheckSpec(DIE, (HCCS,)),
    "npu_ping": CheckSpec(DIE),
}
PING = "npu_ping"


def level(check: str) -> str:
    spec = CHECKS.get(check)
    return spec.level if spec else HOST


def explains_pings(check: str, path: str) -> bool:
    spec = CHECKS.get(check)
    return bool(spec and path in spec.explains_pings_on)


def entries_of(found: dict[int, str], addresses: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """One entry per die, in die order: {"die", "text"} (and "address" where the die pinged one)."""
    out: list[dict[str, Any]] = []
    for die in sorted(found):
        entry: dict[str, Any] = {"die": die, "text": found[die]}
        if addresses and die in addresses:
            entry["address"] = addresses[die]
        out.append(entry)
    return out


def entry_text(entry: dict[str, Any]) -> str:
    """An entry as the text table shows it: "die 7: DOWN", with "(a3-04 die 7)" once its peer is known."""
    text = f"die {entry['die']}: {entry['text']}"
    if entry.get("peer") is not None:
        text += f" ({entry['peer']} die {entry['peer_die']})"
    return text


def entries_text(entries: list[dict[str, Any]]) -> str:
    return "; ".join(entry_text(e) for e in entries)


def valid_entries(value: Any) -> list[dict[str, Any]]:
    """A row's entries as a reader may trust them: dicts with an int die and a text; anything else is left out."""
    out = []
    for e in value if isinstance(value, list) else []:
        if not isinstance(e, dict) or isinstance(e.get("die"), bool) or not isinstance(e.get("die"), int):
            continue
        entry: dict[str, Any] = {"die": e["die"], "text": str(e.get("text", ""))}
        for key in ("address", "peer"):
            if isinstance(e.get(key), str):
                entry[key] = e[key]
        if "peer" in entry and isinstance(e.get("peer_die"), int) and not isinstance(e.get("peer_die"), bool):
            entry["peer_die"] = e["peer_die"]
        elif "peer" in entry:
            del entry["peer"]
        if e.get("explained") is True:
            entry["explained"] = True
        out.append(entry)
    return out
