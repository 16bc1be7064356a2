"""Where the repository's parts are, for the tests and the bench (nothing here is read by the product)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
ANSIBLE_DIR = REPO / "ansible"
SIM_HOST_DIR = REPO / "docker" / "sim-host"
SIMCTL = SIM_HOST_DIR / "simctl.py"
TOOLS = SIM_HOST_DIR / "tools"
# The interpreter running the tests or the bench is the project venv's: ansible-playbook lies beside it.
VENV_BIN = Path(sys.executable).parent
SIM_IMAGE = "verl-recipe:sim"  # the recipe image the simulated hosts run (`make image-sim`)


def load_by_path(name: str, path: Path) -> ModuleType:
    """Import a script that is not on sys.path (simctl.py, the stand-in tools), once per process under `name`."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# The cluster controller, imported for its SSH command line and its labels (the cluster's one definition of both).
simctl = load_by_path("verl_sim_simctl", SIMCTL)
