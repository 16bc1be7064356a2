"""The dies and the driver's control nodes counted by name in the host's /dev (never opened), torch_npu (import
and version only), and the driver's HDK version against what CANN needs."""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from pathlib import Path
from typing import Any

from .findings import _DIE_NODE, CONTROL_NODES, Finding
from .packages import expected_dies
from .probes import hdk_key, read_driver_version, same_version


def list_device_nodes(dev_dir: Path) -> tuple[dict[int, Path], dict[str, Path]]:
    """The dies (davinciN) and the driver's control nodes named in dev_dir. Names and stat only: nothing is opened."""
    dies: dict[int, Path] = {}
    control: dict[str, Path] = {}
    for name in os.listdir(dev_dir):
        m = _DIE_NODE.match(name)
        if m:
            dies[int(m.group(1))] = dev_dir / name
        elif name in CONTROL_NODES:
            control[name] = dev_dir / name
    return dies, control


def _not_char_devices(paths: list[Path]) -> list[str]:
    out = []
    for p in paths:
        try:
            if not stat.S_ISCHR(p.stat().st_mode):
                out.append(p.name)
        except OSError:
            out.append(p.name)
    return out


def _names(items: list[str], most: int = 6) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def check_dies(manifest: dict[str, Any], env: dict[str, str], simulated: bool, dev_dir: Path) -> Finding:
    """Count this host's dies by their device nodes, as the Ray node does, without opening one.

    compose.yaml gives the doctor no device at all and mounts the host's /dev read-only at /host-dev
    (VERL_RECIPE_DEV_DIR): the Ray node holds every die, and with device sharing off (the driver's default) a second
    container that opens one gets -8020 "device is used". The container's device cgroup refuses an open of any
    node there, so listing the names is all the doctor can do with them, and all it does.
    """
    try:
        source, want = expected_dies(manifest, env)
    except ValueError as exc:
        return Finding(
            "npu-dies",
            "fail",
            str(exc),
            "set NODE_DIES in node.env to the dies per host (16 on an A3 node; "
            "deploy.yml writes it from site_expected_dies)",
        )
    try:
        dies, control = list_device_nodes(dev_dir)
    except OSError as exc:
        return Finding(
            "npu-dies",
            "fail",
            f"cannot list the device nodes in {dev_dir} ({exc.strerror or type(exc).__name__})",
            "run it as `docker compose run --rm doctor`: compose.yaml mounts the host's /dev read-only at /host-dev "
            "and sets VERL_RECIPE_DEV_DIR=/host-dev",
        )
    if simulated and not dies and not control:
        return Finding(
            "npu-dies",
            "expected",
            f"no device nodes in {dev_dir}: not a simulated host's /dev (compose.sim.yaml mounts it at /host-dev)",
        )
    missing = [f"davinci{i}" for i in range(want) if i not in dies]
    extra = sorted(i for i in dies if i >= want)
    absent_control = [n for n in CONTROL_NODES if n not in control]
    if missing:
        return Finding(
            "npu-dies",
            "fail",
            f"{want - len(missing)} of {want} dies in {dev_dir} ({source}={want}): {_names(missing)} missing",
            "the host lost a die or its driver: check `npu-smi info` on this host (deploy.yml's preflight row "
            "device_nodes names the same), reload or reinstall the driver, then restart the Ray node",
        )
    if extra:
        return Finding(
            "npu-dies",
            "fail",
            f"{len(dies)} dies in {dev_dir}, {source}={want} (extra: {_names([f'davinci{i}' for i in extra])})",
            "set site_expected_dies to the dies this host has (16 on an A3 node) and re-run deploy.yml",
        )
    if absent_control:
        return Finding(
            "npu-dies",
            "fail",
            f"{_names(absent_control)} missing in {dev_dir}: no die can be opened without the driver's control nodes",
            "reload or reinstall the Ascend driver on this host (its install creates them), then restart the Ray node",
        )
    if not simulated:
        # The simulated hosts may lack CAP_MKNOD and write empty files instead; a real host has character devices.
        bad = _not_char_devices([*dies.values(), *control.values()])
        if bad:
            return Finding(
                "npu-dies",
                "fail",
                f"{_names(bad)} in {dev_dir} is not a character device",
                "something replaced the driver's device nodes: reload the Ascend driver (or reboot) on this host",
            )
    return Finding("npu-dies", "ok", f"{want} dies and {', '.join(CONTROL_NODES)} in {dev_dir} (not opened)")


def has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ValueError:  # in sys.modules without a spec
        return True


def import_torch_npu() -> Any:
    """Import torch_npu with anything its native libraries print sent to stderr, so `--json` stays parseable.

    Only the import: torch_npu initialises ACL on a die lazily (device_count, set_device, the first tensor), and the
    doctor calls none of those.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        return importlib.import_module("torch_npu")
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def check_npu(manifest: dict[str, Any], simulated: bool) -> Finding:
    """torch_npu: that it imports and is the manifest's version. It opens no die (check_dies counts them)."""
    pin = str(manifest.get("python_packages", {}).get("torch_npu", ""))
    if simulated:
        present = has_module("torch_npu")
        detail = "torch_npu present, NPU not used (simulated)" if present else "no NPU (simulated runtime)"
        return Finding("npu", "expected", detail)
    fix_driver = "mount the host driver (/usr/local/Ascend/driver) and source CANN set_env.sh in the container"
    try:
        module = import_torch_npu()
    except ModuleNotFoundError as exc:
        if exc.name != "torch_npu":
            return Finding("npu", "fail", f"torch_npu import failed: {type(exc).__name__}: {exc}", fix_driver)
        return Finding("npu", "fail", "torch_npu is not installed", "use the NPU image (`make image-npu`)")
    except Exception as exc:  # noqa: BLE001 - any import/driver error is the finding itself
        return Finding("npu", "fail", f"torch_npu import failed: {type(exc).__name__}: {exc}", fix_driver)
    version = str(getattr(module, "__version__", "") or "")
    where = getattr(module, "__file__", None) or "?"
    if not version or not same_version(version, pin):
        return Finding(
            "npu",
            "fail",
            f"torch_npu {version or '(no __version__)'} imported from {where}, the manifest pins {pin}",
            "rebuild the image from docker/versions.yaml; put no other torch_npu on PYTHONPATH",
        )
    return Finding("npu", "ok", f"torch_npu {version} imports (no die opened: the Ray node holds them)")


def check_driver(manifest: dict[str, Any], simulated: bool, info: Path) -> Finding:
    need = str(manifest.get("host", {}).get("hdk_min", ""))
    have = read_driver_version(info)
    if have is None:
        if simulated:
            return Finding("driver", "expected", f"no driver ({info} absent; simulated runtime)")
        return Finding(
            "driver",
            "fail",
            f"{info} not found",
            f"install the Ascend HDK >= {need} on the host and mount /usr/local/Ascend/driver read-only",
        )
    try:
        ok = hdk_key(have) >= hdk_key(need)
    except ValueError as exc:
        return Finding("driver", "fail", f"{info}: {exc}", f"install HDK >= {need} (driver + firmware)")
    if not ok:
        return Finding(
            "driver",
            "fail",
            f"driver {have} is older than {need}, which CANN {manifest['base']['cann']['version']} needs",
            f"upgrade driver + firmware to HDK >= {need} on this host (firmware first when a driver is present)",
        )
    return Finding("driver", "ok", f"driver {have} >= {need}")
