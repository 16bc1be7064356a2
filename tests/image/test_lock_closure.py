"""The NPU lock is the closure of what the image installs: every requirement of the packages built from git (at their
pinned commits, docker/lock/upstream/) and of CANN is locked and satisfied, except the reviewed overrides and the
accepted `pip check` conflicts; the build tools the Dockerfile needs are in it. This is `pip check` emulated
without building the image: a requirement dropped from the lock, or an upstream pin that starts to conflict, fails
here in CI, before any A3 build host runs the real one."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCK_DIR = ROOT / "docker" / "lock"
UPSTREAM = LOCK_DIR / "upstream"
GIT_BUILT = {"verl", "vllm", "vllm-ascend", "megatron-core", "mindspeed", "megatron-bridge", "transformers"}
# docker/lock/upstream/<file> -> the distribution the image pip-installs from that git source (None: not installed
# as a distribution, so `pip check` never reads its requirements; they must still be locked to import it).
DISTRIBUTION = {
    "verl.txt": "verl",
    "vllm.txt": "vllm",
    "vllm_ascend.txt": "vllm-ascend",
    "megatron_lm.txt": "megatron-core",
    "mindspeed.txt": "mindspeed",
    "transformers.txt": "transformers",
    "megatron_bridge.txt": None,
    "cann.txt": None,
    "sdist_builds.txt": None,
}
# The versions the git-built distributions report (transformers at cc7ab9be reports 5.3.0.dev0).
GIT_BUILT_VERSIONS = {"transformers": "5.3.0.dev0"}
PLATFORMS = ("aarch64", "x86_64")


def manifest() -> dict:
    return yaml.safe_load((ROOT / "docker" / "versions.yaml").read_text())


def marker_env(machine: str) -> dict[str, str]:
    return {
        "python_version": "3.11",
        "python_full_version": "3.11.15",
        "platform_machine": machine,
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def installed(machine: str) -> dict[str, Version]:
    """What the A3 image (aarch64) or the rehearsal (x86_64) installs: the lock entries whose markers hold, the
    Ascend-index packages at the manifest's pins, and the git-built distributions."""
    out: dict[str, Version] = {}
    for line in (LOCK_DIR / "npu.lock").read_text().splitlines():
        if not line or line[0].isspace() or line.startswith("#"):
            continue
        req = Requirement(line.rstrip(" \\"))
        if req.marker is None or req.marker.evaluate(marker_env(machine)):
            (spec,) = req.specifier
            assert canonicalize_name(req.name) not in out, f"{req.name} locked twice for {machine}"
            out[canonicalize_name(req.name)] = Version(spec.version)
    m = manifest()
    out["triton-ascend"] = Version(m["python_packages"]["triton_ascend"])
    for key, src in m["git_sources"].items():
        dist = {"vllm_ascend": "vllm-ascend", "megatron_lm": "megatron-core", "megatron_bridge": "megatron-bridge"}
        name = dist.get(key, key)
        if name != "megatron-bridge":
            out[name] = Version(GIT_BUILT_VERSIONS.get(name, str(src["version"])))
    return out


def upstream_requirements(path: Path) -> list[Requirement]:
    lines = [ln.strip() for ln in path.read_text().splitlines()]
    return [Requirement(ln) for ln in lines if ln and not ln.startswith("#")]


def accepted(rehearsal: bool) -> set[tuple[str, str, frozenset[str], str]]:
    data = tomllib.loads((LOCK_DIR / "accepted-conflicts.toml").read_text())
    out: set[tuple[str, str, frozenset[str], str]] = set()
    for item in data["accepted"]:
        if item.get("only") == "rehearsal" and not rehearsal:
            continue
        req = Requirement(item["requirement"])
        specs = frozenset(str(s) for s in req.specifier)
        out.add((canonicalize_name(item["package"]), canonicalize_name(req.name), specs, item["kind"]))
    return out


def test_every_upstream_file_names_its_source_commit() -> None:
    sources = manifest()["git_sources"]
    files = sorted(p.name for p in UPSTREAM.glob("*.txt"))
    assert files == sorted(DISTRIBUTION), files
    for f in files:
        head = (UPSTREAM / f).read_text().splitlines()[0]
        key = f.removesuffix(".txt")
        if key in sources and key not in ("vllm", "transformers"):
            commit = sources[key]["commit"]
            assert commit in (UPSTREAM / f).read_text(), f"{f} does not name the pinned commit {commit}"
        assert head.startswith("# "), f


@pytest.mark.parametrize("machine", PLATFORMS)
def test_every_requirement_of_what_the_image_installs_is_locked(machine: str) -> None:
    """The 47 requirements the old lock never saw (torchdata, tensorboard, uvloop, xgrammar, numba, decorator...)."""
    have = installed(machine)
    missing = []
    for f in sorted(UPSTREAM.glob("*.txt")):
        for req in upstream_requirements(f):
            if req.marker is not None and not req.marker.evaluate(marker_env(machine)):
                continue
            if canonicalize_name(req.name) not in have:
                missing.append(f"{f.name}: {req}")
    assert not missing, f"not in docker/lock/npu.lock for {machine}: {missing}: run make lock-npu"


@pytest.mark.parametrize("machine", PLATFORMS)
def test_pip_check_emulated_finds_only_the_accepted_conflicts(machine: str) -> None:
    have = installed(machine)
    ok = accepted(rehearsal=False)
    bad, used = [], set()
    for f, dist in DISTRIBUTION.items():
        if dist is None:
            continue
        for req in upstream_requirements(UPSTREAM / f):
            if req.marker is not None and not req.marker.evaluate(marker_env(machine)):
                continue
            name = canonicalize_name(req.name)
            version = have.get(name)
            if version is not None and req.specifier.contains(version, prereleases=True):
                continue
            kind = "missing" if version is None else "conflict"
            key = (dist, name, frozenset(str(s) for s in req.specifier), kind)
            if key in ok:
                used.add(key)
            else:
                bad.append(f"{dist} requires {req}, image has {name} {version}")
    assert not bad, f"broken requirements not in docker/lock/accepted-conflicts.toml: {bad}"
    # Every accepted conflict of an installed git-built package still occurs (the list does not go stale).
    stale = {k for k in ok if k[0] in {d for d in DISTRIBUTION.values() if d} and k not in used}
    assert not stale, f"accepted but no longer broken: {stale}: remove them from accepted-conflicts.toml"


def test_cann_python_dependencies_are_in_the_venv() -> None:
    """The CANN base installs these into its system Python; /opt/venv must have its own (issue: 'decorator')."""
    have = installed("aarch64")
    for req in upstream_requirements(UPSTREAM / "cann.txt"):
        assert canonicalize_name(req.name) in have, req.name
    assert {"decorator", "absl-py", "pathlib2", "cython", "sympy", "attrs"} <= set(have)


@pytest.mark.parametrize("machine", PLATFORMS)
def test_build_tools_in_the_lock_are_new_enough(machine: str) -> None:
    have = installed(machine)
    # Building the lock's sdists (antlr4-python3-runtime) without isolation needs bdist_wheel: setuptools >= 70.1
    # has it built in; wheel is installed first anyway.
    assert have["setuptools"] >= Version("70.1"), have["setuptools"]
    # setuptools 82 removed pkg_resources; the manifest pins upstream's 80.10.2 (the import smoke test imports it).
    assert have["setuptools"] < Version("82"), have["setuptools"]
    assert have["setuptools"] == Version(manifest()["python_packages"]["setuptools"])
    assert "wheel" in have
    # vllm-ascend's CMakeLists needs cmake >= 3.26 (the CANN image's apt cmake is 3.22).
    assert have["cmake"] >= Version("3.26"), have["cmake"]
    # Megatron-LM's setup.py runs `python3 -m pybind11 --includes`; vllm-ascend's runs `python3 -m pip show torch-npu`.
    assert {"pybind11", "pip", "torch-npu"} <= set(have)
    assert any(s.name.startswith("antlr4") for s in [Requirement(n) for n in have])


def test_vllm_ascend_declares_the_manifests_npu_stack() -> None:
    """The releases/v0.18.0 branch names torch-npu 2.9.0.post2 and triton-ascend 3.2.1 (the tag: 2.9.0, 3.2.0)."""
    pk = manifest()["python_packages"]
    declared = {canonicalize_name(r.name): r.specifier for r in upstream_requirements(UPSTREAM / "vllm_ascend.txt")}
    assert declared["torch-npu"] == SpecifierSet(f"=={pk['torch_npu']}")
    assert declared["triton-ascend"] == SpecifierSet(f"=={pk['triton_ascend']}")
    assert "releases/v0.18.0" in (UPSTREAM / "vllm_ascend.txt").read_text().splitlines()[0]


def test_no_phantom_git_built_package_in_the_lock() -> None:
    text = (LOCK_DIR / "npu.lock").read_text()
    for name in GIT_BUILT:
        assert not re.search(rf"^{re.escape(name)}==", text, re.MULTILINE), name
    assert "# The following packages were excluded from the output:" in text


def overrides() -> list[tuple[Requirement, list[str]]]:
    """Each override line with the comment block above it."""
    out, comment = [], []
    for line in (LOCK_DIR / "overrides.txt").read_text().splitlines():
        if line.startswith("#"):
            comment.append(line)
        elif line.strip():
            out.append((Requirement(line), comment))
            comment = []
        else:
            comment = [] if not out or comment else comment
    return out


def test_every_override_has_a_reason_and_agrees_with_the_manifest() -> None:
    pk = manifest()["python_packages"]
    found = overrides()
    assert found
    for req, comment in found:
        assert len(" ".join(comment)) > 80, f"override {req} needs its reason in the comment above it"
        key = canonicalize_name(req.name).replace("-", "_")
        if key in pk:
            assert req.specifier == SpecifierSet(f"=={pk[key]}"), f"{req} disagrees with the manifest's {pk[key]}"
    names = {canonicalize_name(r.name) for r, _ in found}
    # The upstream pins that disagree: opencv (vLLM vs vllm-ascend), protobuf (CANN vs vLLM); transformers for
    # resolution only. torch-npu needs none since vllm-ascend's releases/v0.18.0 names the manifest's post2.
    assert {"opencv-python-headless", "protobuf", "transformers"} <= names
    assert "torch-npu" not in names


def test_accepted_conflicts_are_upstream_declarations_with_reasons() -> None:
    data = tomllib.loads((LOCK_DIR / "accepted-conflicts.toml").read_text())
    files = {d: f for f, d in DISTRIBUTION.items() if d}
    for item in data["accepted"]:
        assert item["kind"] in ("conflict", "missing") and len(item["reason"]) > 40, item
        if item["package"] not in files:
            # A locked PyPI package's own metadata (torch-npu's x86_64 wheel): only the rehearsal may accept those.
            assert item.get("only") == "rehearsal" and canonicalize_name(item["package"]) in installed("x86_64"), item
            continue
        declared = {str(r) for r in upstream_requirements(UPSTREAM / files[item["package"]])}
        req = Requirement(item["requirement"])
        assert any(Requirement(d).name == req.name and Requirement(d).specifier == req.specifier for d in declared), (
            f"{item['package']} does not declare {item['requirement']} in docker/lock/upstream/"
        )


def test_lock_serves_both_platforms_in_one_resolution() -> None:
    aarch64, x86_64 = installed("aarch64"), installed("x86_64")
    pins = manifest()["python_packages"]
    for have in (aarch64, x86_64):
        assert have["torch"] == Version(pins["torch"]) and have["torch-npu"] == Version(pins["torch_npu"])
    # The CUDA runtime wheels that PyPI's x86_64 torch pulls in are x86_64-only (markers); the A3 image has none.
    assert not [n for n in aarch64 if n.startswith("nvidia-") and n.endswith("-cu12")]
    assert [n for n in x86_64 if n.startswith("nvidia-") and n.endswith("-cu12")]
    assert Marker("platform_machine == 'x86_64'").evaluate(marker_env("x86_64"))
