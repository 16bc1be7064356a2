"""Each of the project's Ansible modules says its options once for people (DOCUMENTATION) and once for Ansible
(ARGUMENT_SPEC): the two must agree option by option, and EXAMPLES and RETURN must parse and name what the module
really takes and returns."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ansible.helpers import load_plugin

ANSIBLE = Path(__file__).resolve().parents[2] / "ansible"
MODULES = sorted(ANSIBLE.glob("roles/*/library/*.py"))
# What Ansible assumes for a key the spec leaves out.
SPEC_DEFAULTS: dict[str, Any] = {"required": False, "default": None, "elements": None, "choices": None}


def load(path: Path) -> Any:
    return load_plugin(str(path.relative_to(ANSIBLE)))


def as_compared(option: dict[str, Any]) -> dict[str, Any]:
    return {"type": option.get("type", "str"), **{k: option.get(k, v) for k, v in SPEC_DEFAULTS.items()}}


def test_every_module_is_checked() -> None:
    assert {p.name for p in MODULES} >= {"a3_preflight.py", "a3_asset_manifest.py"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_documentation_and_argument_spec_agree(path: Path) -> None:
    mod = load(path)
    doc = yaml.safe_load(mod.DOCUMENTATION)
    assert doc["module"] == path.stem
    documented, spec = doc["options"], mod.ARGUMENT_SPEC
    assert set(documented) == set(spec), f"only documented: {set(documented) - set(spec)}, only in the spec: " + str(
        set(spec) - set(documented)
    )
    for name in spec:
        assert as_compared(documented[name]) == as_compared(spec[name]), name
        assert documented[name].get("description"), f"{name} has no description"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_examples_use_only_documented_options(path: Path) -> None:
    mod = load(path)
    options = yaml.safe_load(mod.DOCUMENTATION)["options"]
    required = {k for k, v in options.items() if v.get("required")}
    tasks = yaml.safe_load(mod.EXAMPLES)
    assert tasks, "EXAMPLES has no task"
    for task in tasks:
        args = task[path.stem]
        assert set(args) <= set(options), set(args) - set(options)
        # the preflight's action plugin fills these in itself
        assert required - set(args) <= {"ping_plan", "cluster_peers"}, required - set(args)


def returned_keys(path: Path, function: str) -> set[str]:
    """The keys of the dict literal `function` returns, or of the keyword arguments main() passes exit_json."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Return) and isinstance(sub.value, ast.Dict):
                    return {str(k.value) for k in sub.value.keys if isinstance(k, ast.Constant)}
                if isinstance(sub, ast.Call) and getattr(sub.func, "attr", "") == "exit_json":
                    return {kw.arg for kw in sub.keywords if kw.arg and kw.arg != "changed"}
    raise AssertionError(f"{function} not found in {path.name}")


@pytest.mark.parametrize(
    ("path", "function"),
    [
        (ANSIBLE / "roles/preflight/library/a3_preflight.py", "run_all"),
        (ANSIBLE / "roles/shared_assets/library/a3_asset_manifest.py", "main"),
    ],
    ids=lambda x: getattr(x, "stem", x),
)
def test_return_documents_exactly_what_the_module_returns(path: Path, function: str) -> None:
    documented = set(yaml.safe_load(load(path).RETURN))
    assert documented == returned_keys(path, function)


def test_a_drift_is_caught() -> None:
    # the comparison itself: a choice present on one side only is a difference
    assert as_compared({"type": "str", "default": "roce"}) != as_compared(
        {"type": "str", "default": "roce", "choices": ["roce", "hccs"]}
    )
