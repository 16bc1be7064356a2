"""Shared fixtures: every test sees a process environment without launch settings."""

from __future__ import annotations

import pytest
from verl_recipe.recipes import load_recipe, recipe_names
from verl_recipe.settings import ALIASES, BY_NAME

_LAUNCH_ENV = set()
for _name in recipe_names():
    _r = load_recipe(_name)
    _LAUNCH_ENV |= set(_r.env) | set(_r.npu_env)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [*BY_NAME, *ALIASES, *_LAUNCH_ENV, "VERL_RECIPE_SITE", "WANDB_API_KEY", "WANDB_MODE"]:
        monkeypatch.delenv(key, raising=False)


@pytest.fixture(autouse=True)
def verl_checks_only_where_tested(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's own start-up checks cost 3-8 s of CPU per `validate` (verl's imports in a child process): they run in
    the tests marked verl_checks, which test them; every other test validates with them off, as the note says."""
    from verl_recipe.verl_check import SWITCH

    if request.node.get_closest_marker("verl_checks") is None:
        monkeypatch.setenv(SWITCH, "0")
    else:
        monkeypatch.delenv(SWITCH, raising=False)


@pytest.fixture(scope="session")
def sim_image() -> str:
    """verl-recipe:sim, built once per session the way CI builds it (docker layer cache makes reruns cheap)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    subprocess.run(["make", "--no-print-directory", "-C", str(root), "image-sim"], check=True)
    return "verl-recipe:sim"


def _ansible_module_utils() -> None:
    """The preflight module imports `ansible.module_utils.a3facts`, which Ansible ships to a host from
    ansible/module_utils (ansible.cfg); the tests that load the module by path find it on the same package path."""
    from pathlib import Path

    import ansible.module_utils

    folder = str(Path(__file__).resolve().parents[1] / "ansible" / "module_utils")
    if folder not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(folder)


_ansible_module_utils()
