"""Whether verl 0.8.0's rollout can use IPC for weight sync on this node, from the versions it decides by.

verl 0.8.0 (verl/utils/device.py, `is_support_ipc`, at release/v0.8.0 3e4edb6e) decides in each rollout worker:
the driver's version, as `npu-smi info -t board` prints it ("Software Version"), must be at least 25.3.rc1, and the
CANN toolkit's version (`version=` in `$ASCEND_HOME_PATH/<arch>-linux/ascend_toolkit_install.info`) at least
8.3.rc1. Each is first cut to its release: MAJOR.MINOR plus a third field that is a number or rcN (25.3.rc1.2 is
25.3.rc1, 9.0.0.b160 is 9.0.0), and a third field starting with `t` (a test build, 25.5.t3.b001) leaves MAJOR.MINOR.
Without IPC verl sends the weights through shared memory, where a tensor larger than the bucket
(`update_weights_bucket_megabytes`) is an AssertionError (verl/workers/rollout/vllm_rollout/
bucketed_weight_transfer.py:137); `validate` refuses such a bucket when the site says WEIGHT_SYNC_IPC=false
(checks/weightsync.py).

The doctor runs no npu-smi (it holds no die; the package docstring says why): the driver's version comes from the
driver's own version.info, the same release npu-smi reports, and the CANN version from the file verl reads.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
from pathlib import Path

from .. import a3facts
from .findings import Finding
from .probes import read_driver_version

DRIVER_MIN = "25.3.rc1"
CANN_MIN = "8.3.rc1"
CANN_HOME_DEFAULT = "/usr/local/Ascend/ascend-toolkit/latest"  # verl's default when ASCEND_HOME_PATH is unset
CANN_INFO = "ascend_toolkit_install.info"
_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(rc\d+|\d+|t))?", re.IGNORECASE)


def release(version: str) -> str:
    """The release a driver or CANN version names, as verl 0.8.0 cuts it: 25.3.rc1.2 -> 25.3.rc1,
    25.5.t3.b001 -> 25.5, 9.0.0.B160 -> 9.0.0. ValueError naming the text when it starts with no MAJOR.MINOR."""
    found = _RELEASE.match(version.strip().lower())
    if not found:
        raise ValueError(f"not a driver or CANN version: {version[:60]!r} (want MAJOR.MINOR..., like 25.3.rc1)")
    major, minor, third = found.groups()
    return f"{major}.{minor}" if third in (None, "t") else f"{major}.{minor}.{third}"


def at_least(version: str, floor: str) -> bool:
    return a3facts.hdk_key(release(version)) >= a3facts.hdk_key(floor)


def ipc_supported(driver: str, cann: str) -> bool:
    """verl 0.8.0's rule: driver >= 25.3.rc1 and CANN >= 8.3.rc1 (each cut to its release first)."""
    return at_least(driver, DRIVER_MIN) and at_least(cann, CANN_MIN)


def cann_info_path(env: dict[str, str]) -> Path:
    home = env.get("ASCEND_HOME_PATH") or CANN_HOME_DEFAULT
    return Path(home) / f"{platform.machine()}-linux" / CANN_INFO


def read_cann_version(path: Path) -> str | None:
    """`version=` of a CANN toolkit install info (the first such line), None when the file or the line is absent."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("version="):
            return line.split("=", 1)[1].strip() or None
    return None


def check_ipc(simulated: bool, driver_info: Path, env: dict[str, str]) -> Finding:
    name = "weight-sync-ipc"
    if simulated:
        return Finding(name, "expected", "no NPU: verl's rollout sends weights through shared memory (simulated)")
    driver = read_driver_version(driver_info)
    cann_path = cann_info_path(env)
    cann = read_cann_version(cann_path)
    if driver is None or cann is None:
        missing = f"{driver_info}" if driver is None else f"version= in {cann_path}"
        return Finding(
            name,
            "fail",
            f"cannot tell: {missing} not found, and verl 0.8.0's rollout raises when it cannot read its versions",
            "mount the host driver read-only at /usr/local/Ascend/driver and run in the NPU image (CANN set_env.sh "
            "sets ASCEND_HOME_PATH)",
        )
    if not shutil.which("npu-smi", path=env.get("PATH", os.defpath)):
        return Finding(
            name,
            "fail",
            "npu-smi is not on PATH: verl 0.8.0's rollout runs `npu-smi info -t board` for the driver's version and "
            "raises without it",
            "bind the host's npu-smi at /usr/local/bin/npu-smi (compose.yaml does, from node.env's NPU_SMI_PATH)",
        )
    try:
        ok = ipc_supported(driver, cann)
    except ValueError as exc:
        return Finding(name, "fail", str(exc), "reinstall the driver or rebuild the image: its version is unreadable")
    versions = f"driver {driver}, CANN {cann}"
    if ok:
        return Finding(
            name, "ok", f"{versions}: verl's rollout syncs weights over IPC (>= {DRIVER_MIN} and {CANN_MIN})"
        )
    return Finding(
        name,
        "warn",
        f"{versions}: below verl 0.8.0's IPC floor (driver {DRIVER_MIN}, CANN {CANN_MIN}); its rollout sends the "
        "weights through shared memory, where a tensor larger than the weight-sync bucket stops the run",
        f"upgrade this host to HDK >= {DRIVER_MIN} with CANN >= {CANN_MIN}, or set WEIGHT_SYNC_IPC: false in the "
        "inventory's site_launch so that validate checks every bucket against the model's largest tensor",
    )
