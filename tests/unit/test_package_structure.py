"""The package's structure: its imports form no cycle, and exit codes and topology constants have one home each.

Imports are read with `ast` from the source, function-level ones included: an import inside a function hides a
cycle from Python at start-up, not from the structure.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "verl_recipe"
PACKAGE_DIR = Path(__file__).resolve().parents[2] / "entrypoints" / PACKAGE


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package folder (a package is its __init__.py)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The module `name` loads: itself, or its longest prefix that is a module of the package."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """(module of the package imported, line) for every import statement in the file, at any depth."""
    here = module if _is_package(path) else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = here.split(".")
                if node.level - 1 >= len(base_parts):
                    continue  # above the package: not ours
                base = ".".join(base_parts[: len(base_parts) - (node.level - 1)])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            # `from .x import name` loads x; `from . import x` loads the module x (or a name of the package).
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if target != PACKAGE and not target.startswith(PACKAGE + "."):
                continue
            known = _known(target, modules)
            if known is not None and known != module:
                found.append((known, node.lineno))
    return found


def import_graph(root: Path, package: str = PACKAGE) -> dict[str, dict[str, int]]:
    """module -> {imported module: first line importing it}."""
    modules = module_names(root, package)
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges: dict[str, int] = {}
        for target, line in imports_of(module, path, modules):
            edges.setdefault(target, line)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def describe(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    return "; ".join(f"{a} imports {b} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False))


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE_DIR)
    assert len(graph) > 10 and sum(len(e) for e in graph.values()) > 20, "the package's imports were not read"
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle: {describe(cycle, graph)}; fix: move what both need into a lower module"


def test_a_cycle_hidden_in_a_function_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("x = 1\n\ndef late():\n    from .sub import c\n")
    (pkg / "sub" / "c.py").write_text("def later():\n    import verl_recipe.a\n")
    (pkg / "d.py").write_text("from . import a\nfrom .sub.c import later\nfrom .. import elsewhere\n")
    graph = import_graph(pkg)
    assert graph[f"{PACKAGE}.d"] == {f"{PACKAGE}.a": 1, f"{PACKAGE}.sub.c": 2}
    cycle = find_cycle(graph)
    assert cycle == [f"{PACKAGE}.a", f"{PACKAGE}.b", f"{PACKAGE}.sub.c", f"{PACKAGE}.a"]
    (pkg / "sub" / "c.py").write_text("def later():\n    pass\n")
    assert find_cycle(import_graph(pkg)) is None


def _assigned_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Name):
                    names.add(n.id)
    return names


def test_exit_codes_and_topology_are_defined_once() -> None:
    homes = {
        "exitcodes.py": lambda name: name.startswith("EXIT_"),
        # the A3 facts (dies per node, Ray's ports) live in a3facts.py, shared with Ansible and the simulated host;
        # topology.py re-exports them beside what is verl's (CPUs per die)
        "topology.py": lambda name: name == "CPUS_PER_DIE",
        "a3facts.py": lambda name: name == "DIES_PER_NODE" or name.startswith("RAY_"),
    }
    wrong = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        names = _assigned_names(ast.parse(path.read_text()))
        for home, belongs in homes.items():
            if path.name != home:
                wrong += [f"{path.name}: {n} (belongs in {home})" for n in sorted(names) if belongs(n)]
    assert not wrong, "defined outside their module: " + ", ".join(wrong)


def _int_literals(expr: ast.expr | None) -> list[int]:
    """Int constants an expression can evaluate to directly (through `a if c else b`)."""
    if isinstance(expr, ast.IfExp):
        return _int_literals(expr.body) + _int_literals(expr.orelse)
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return [expr.value]
    return []


def _own_returns(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.Return]:
    """The function's return statements, not those of functions defined inside it."""
    out: list[ast.Return] = []
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            out.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo += list(ast.iter_child_nodes(node))
    return out


def test_exit_codes_are_named_not_literal() -> None:
    """A function returning an int returns no literal besides 0 (also a count); exit() gets no literal at all."""
    wrong = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if path.name == "exitcodes.py":
            continue
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.returns is not None:
                if ast.unparse(fn.returns) != "int":
                    continue
                for ret in _own_returns(fn):
                    if any(v != 0 for v in _int_literals(ret.value)):
                        wrong.append(f"{path.name}:{ret.lineno} {ast.unparse(ret)}")
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or ast.unparse(node.func) not in {"sys.exit", "exit", "SystemExit"}:
                continue
            if any(_int_literals(a) for a in node.args):
                wrong.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert not wrong, "exit codes as literals (use verl_recipe.exitcodes): " + "; ".join(wrong)


def test_every_file_of_the_package_that_is_not_python_is_package_data() -> None:
    """A wheel or a non-editable install (the images) carries only the .py files and pyproject's package-data: a
    page's CSS or a recipe left out of it would be missing at run time, not here."""
    import fnmatch
    import tomllib

    root = PACKAGE_DIR.parents[1]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][PACKAGE]
    data = [
        p.relative_to(PACKAGE_DIR).as_posix()
        for p in PACKAGE_DIR.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    ]
    assert "pages/readiness/page.css" in data
    missing = [f for f in data if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert not missing, f"not in pyproject's package-data: {missing}; fix: add them to [tool.setuptools.package-data]"


SIMULATION_PACKAGES = ("verl_sim_standin", "simkit", "simctl_parts")


def test_the_product_imports_no_simulation_package() -> None:
    """The simulated cluster's stand-ins register themselves (the verl_recipe.devices entry points): the product
    names none of the simulation's packages, in an import or in a string it could import by name."""
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                names = [node.value]
            found += [
                f"{path.relative_to(PACKAGE_DIR)}:{node.lineno} {n}" for n in names if n.startswith(SIMULATION_PACKAGES)
            ]
    assert not found, f"the product names a simulation package: {found}"
