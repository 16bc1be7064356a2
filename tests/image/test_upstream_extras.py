"""nvidia-resiliency-ext and megatron-energon: upstream's scripts install them, the image leaves them out
(docs/image.md, "Packages upstream installs that the image leaves out"). This fails when the pinned verl imports
either one anywhere, or imports a Megatron-Bridge module outside the set reviewed at de93536e (whose module-level
import closure reaches them only inside try/except ImportError)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

# Found, not imported: importing verl imports torch, which refuses the sys.intern that Ansible's modules (loaded by
# other tests of the same pytest process) put in place; these tests read verl's sources only.
_SPEC = importlib.util.find_spec("verl")
if _SPEC is None or _SPEC.origin is None:
    pytest.skip("verl is not installed here", allow_module_level=True)
VERL = Path(_SPEC.origin).parent
EXTRAS = ("nvidia_resiliency_ext", "megatron.energon")
# verl 0.8.0's imports of Megatron-Bridge; their closure at de93536e was read and holds no unguarded import of EXTRAS.
REVIEWED_BRIDGE = {
    "megatron.bridge",
    "megatron.bridge.models.conversion.model_bridge",
    "megatron.bridge.models.gpt_provider",
    "megatron.bridge.peft.utils",
    "megatron.bridge.training.checkpointing",
    "megatron.bridge.training.utils.config_utils",
    "megatron.bridge.training.utils.train_utils",
}


def imported(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):  # every import, also inside functions: a lazy one is on the path once it runs
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


def verl_imports() -> dict[str, set[str]]:
    return {str(f.relative_to(VERL)): imported(ast.parse(f.read_text())) for f in VERL.rglob("*.py")}


def test_verl_imports_neither_extra() -> None:
    bad = [(f, m) for f, mods in verl_imports().items() for m in mods if m.startswith(EXTRAS)]
    assert not bad, f"verl imports {bad}: lock the package (docs/image.md) or show the path is unused"


def test_verl_imports_only_the_reviewed_bridge_modules() -> None:
    bridge = {m for mods in verl_imports().values() for m in mods if m.startswith("megatron.bridge")}
    assert bridge, "verl imports no megatron.bridge module at all: the scan is broken"
    assert bridge <= REVIEWED_BRIDGE, f"review these for {EXTRAS}: {sorted(bridge - REVIEWED_BRIDGE)}"


def test_the_scan_sees_lazy_imports() -> None:
    tree = ast.parse("def f():\n    from nvidia_resiliency_ext.inprocess import CallWrapper\n")
    assert any(m.startswith(EXTRAS) for m in imported(tree))
