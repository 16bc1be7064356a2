"""Devices other than the NPU, which a package installed beside this one brings: it registers itself under the
`verl_recipe.devices` entry points (NAME = "module"), and the module gives `overlay()` (the Hydra entries and launch
environment the device adds) and `write_model(dir)`, `write_data(train, test)` (the assets it trains on).

The simulated cluster's CPU stand-ins register `cpu` (docker/sim-runtime/standin); they are installed in
verl-recipe:sim and the development venv only, never in the NPU image. This package names no such package.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from .settingtypes import SettingsError

GROUP = "verl_recipe.devices"


class DeviceMissing(SettingsError):
    """DEVICE=cpu where no package registers the CPU stand-ins (outside the simulated runtime)."""


def device_module(name: str) -> ModuleType:
    found = list(entry_points(group=GROUP, name=name))
    if not found:
        raise DeviceMissing(
            f"DEVICE={name} runs verl on the simulated cluster's CPU stand-ins, which are not installed here (only in "
            "verl-recipe:sim and the development venv); fix: DEVICE=npu on A3 hosts"
        )
    module = found[0].load()
    if not isinstance(module, ModuleType):
        raise DeviceMissing(f"DEVICE={name}: entry point {found[0].value} is not a module; fix: reinstall its package")
    return module


def overlay(name: str) -> dict[str, Any]:
    """What DEVICE=name adds to a launch: the device package's own overlay (its names have one home there)."""
    return dict(device_module(name).overlay())
