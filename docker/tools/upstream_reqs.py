#!/usr/bin/env python3
"""Check docker/lock/upstream/*.txt against the fetched git sources (`make lock-npu-upstream-check`).

Each upstream file copies, line by line, the requirements a git-built package declares at its pinned commit. This
reads the same declarations again from the source tarballs that `make sources` wrote (no network) and fails when a
file no longer says what the source says: a requirement added, removed or changed upstream, or a file copied from
the wrong place (transformers.txt was copied from the PyPI 5.3.0 release, because the pinned commit could not be
read where it was written; this is the check that settles it on a host with the sources).

In the upstream files, a section that starts with a comment `# added here...` holds lines this project adds (not
upstream declarations; they are not compared), and `# not on NPU: <requirement> (...)` is an upstream declaration
deliberately left out of the lock (it is compared). cann.txt and sdist_builds.txt do not come from git sources.

Usage: upstream_reqs.py check --dest SOURCES_DIR --lock SOURCES_LOCK    exit 0 when all match, 1 otherwise, 2 on bad
input. Stdlib + PyYAML only; Python 3.11.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tarfile
import tomllib
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "docker" / "lock" / "upstream"


class CheckError(Exception):
    """Bad input: the message names the file and the fix."""


def norm(req: str) -> str:
    """A requirement in one spelling: canonical name, no spaces, specifiers sorted, quotes unified."""
    req = req.split(" #", 1)[0].strip()
    body, _, marker = req.partition(";")
    m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$", body.strip())
    if not m:
        return req
    name = re.sub(r"[-_.]+", "-", m.group(1)).lower()
    extras = (m.group(2) or "").replace(" ", "")
    specs = ",".join(sorted(s.replace(" ", "") for s in m.group(3).split(",") if s.strip()))
    marker = marker.strip().replace('"', "'")
    marker = re.sub(r"\s+", " ", marker)
    return f"{name}{extras}{specs}" + (f";{marker}" if marker else "")


def requirements_txt(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            out.append(line)
    return out


def setup_py_list(text: str, name: str) -> list[str]:
    """The string literals of `NAME = [...]` at module level of a setup.py."""
    for node in ast.parse(text).body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.List):
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    raise CheckError(f"setup.py has no `{name} = [...]` list of strings: the extraction needs updating")


def transformers_setup(text: str) -> list[str]:
    """transformers' setup.py: install_requires = [deps["name"], ...] over the `_deps` table."""
    table = setup_py_list(text, "_deps")
    deps = {re.split(r"[!=<>~ \[]", d, maxsplit=1)[0]: d for d in table}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "install_requires" for t in node.targets
        ):
            if not isinstance(node.value, ast.List):
                break
            out = []
            for e in node.value.elts:
                if isinstance(e, ast.Subscript) and isinstance(e.slice, ast.Constant):
                    out.append(deps[str(e.slice.value)])
            return out
    raise CheckError("transformers setup.py has no install_requires = [deps[...], ...]: the extraction needs updating")


def pyproject_deps(text: str) -> list[str]:
    deps = tomllib.loads(text).get("project", {}).get("dependencies")
    if not isinstance(deps, list):
        raise CheckError("pyproject.toml has no [project] dependencies list: the extraction needs updating")
    return [str(d) for d in deps]


# upstream file -> (git_sources key, [(path in the source tree, extractor)])
Extractor = Callable[[str], list[str]]
SPEC: dict[str, tuple[str, list[tuple[str, Extractor]]]] = {
    "verl.txt": (
        "verl",
        [("setup.py", lambda t: setup_py_list(t, "install_requires")), ("requirements-npu.txt", requirements_txt)],
    ),
    "vllm.txt": ("vllm", [("requirements/common.txt", requirements_txt)]),
    "vllm_ascend.txt": ("vllm_ascend", [("requirements.txt", requirements_txt)]),
    "megatron_lm.txt": ("megatron_lm", [("pyproject.toml", pyproject_deps)]),
    "mindspeed.txt": ("mindspeed", [("requirements.txt", requirements_txt)]),
    "megatron_bridge.txt": ("megatron_bridge", [("pyproject.toml", pyproject_deps)]),
    "transformers.txt": ("transformers", [("setup.py", transformers_setup)]),
}
NOT_FROM_GIT = ("cann.txt", "sdist_builds.txt")


def declared_in_file(path: Path) -> list[str]:
    """The upstream declarations an upstream file records (its own additions left out)."""
    out, adding = [], False
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("# added here"):
            adding = True
        elif line.startswith("# not on NPU:"):
            out.append(line.removeprefix("# not on NPU:").strip().split(" (", 1)[0])
        elif line.startswith("#") or not line:
            adding = adding and line.startswith("#")
        elif not adding:
            out.append(line)
    return out


def read_member(tar: Path, member: str) -> str:
    with tarfile.open(tar) as t:
        for name in (member, f"./{member}"):
            try:
                f = t.extractfile(name)
            except KeyError:
                continue
            if f is not None:
                return io.TextIOWrapper(f, encoding="utf-8").read()
    raise CheckError(f"{tar.name} has no {member}: the source layout changed; update docker/tools/upstream_reqs.py")


def check(dest: Path, lock: Path, upstream: Path = UPSTREAM) -> list[str]:
    if not lock.is_file():
        raise CheckError(f"{lock} not found: run `make sources` first")
    entries = (yaml.safe_load(lock.read_text()) or {}).get("sources") or {}
    found = sorted(p.name for p in upstream.glob("*.txt"))
    unknown = set(found) - set(SPEC) - set(NOT_FROM_GIT)
    if unknown:
        raise CheckError(f"{sorted(unknown)} in {upstream}: add them to SPEC in docker/tools/upstream_reqs.py")
    problems = []
    for fname, (key, parts) in SPEC.items():
        if key not in entries:
            raise CheckError(f"{lock} has no source {key!r}: run `make sources`")
        tar = dest / entries[key]["archive"]
        if not tar.is_file():
            raise CheckError(f"{tar} missing: run `make sources` (or copy the folder from a host that ran it)")
        source = {norm(r) for path, extract in parts for r in extract(read_member(tar, path))}
        recorded = {norm(r) for r in declared_in_file(upstream / fname)}
        for r in sorted(source - recorded):
            problems.append(f"{fname}: {key} at {entries[key]['commit'][:12]} declares {r}, the file does not")
        for r in sorted(recorded - source):
            problems.append(f"{fname}: records {r}, which {key} at {entries[key]['commit'][:12]} does not declare")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="upstream_reqs", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--dest", required=True, help="the sources folder of `make sources`")
    c.add_argument("--lock", required=True, help="its sources lock (docker/sources.lock)")
    c.add_argument("--upstream", default=str(UPSTREAM))
    a = p.parse_args(argv)
    try:
        problems = check(Path(a.dest), Path(a.lock), Path(a.upstream))
    except CheckError as exc:
        print(f"upstream-reqs: {exc}", file=sys.stderr)
        return 2
    for line in problems:
        print(f"upstream-reqs: {line}", file=sys.stderr)
    if problems:
        print("upstream-reqs: update docker/lock/upstream/ from the sources, then run make lock-npu", file=sys.stderr)
        return 1
    print(f"upstream-reqs: {len(SPEC)} files match the sources in {a.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
