"""Static checks of the stage structure, for what cannot be built here (the NPU image) and as a second line for
the simulated one: secrets only in throwaway stages, no compilers or source trees in the image, every git
source used, named stages in the documented order."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SECRET_ARGS = {"PIP_INDEX_URL", "ASCEND_INDEX_URL"}
IMAGETOOL = ROOT / "docker" / "tools" / "imagetool.py"
# The OCI labels that the build sets for every image (`docker build --label`, from imagetool build-args) and the
# build argument each one's value is: where and when the image comes from.
BUILD_LABELS = {
    "org.opencontainers.image.source": "VCS_SOURCE",
    "org.opencontainers.image.revision": "VCS_REF",
    "org.opencontainers.image.created": "IMAGE_CREATED",
}
DOCKERFILES = sorted(ROOT.glob("docker/*/Dockerfile"))


@dataclass
class Stage:
    name: str
    base: str
    lines: list[str] = field(default_factory=list)

    @property
    def args(self) -> set[str]:
        return {m.group(1) for line in self.lines if (m := re.match(r"ARG\s+([A-Z_][A-Z0-9_]*)", line))}

    @property
    def copies_from(self) -> set[str]:
        return {m.group(1) for line in self.lines if (m := re.match(r"COPY\s+--from=(\S+)", line))}


def stages(dockerfile: Path) -> list[Stage]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    out: list[Stage] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if m := re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.IGNORECASE):
            out.append(Stage(name=m.group(2) or f"stage{len(out)}", base=m.group(1)))
        elif out:
            out[-1].lines.append(line)
    return out


def image_chain(all_stages: list[Stage]) -> list[Stage]:
    """The final stage and every stage it is built FROM: the stages whose history ends up in the image."""
    by_name = {s.name: s for s in all_stages}
    chain, current = [], all_stages[-1]
    while True:
        chain.append(current)
        if current.base not in by_name:
            return chain
        current = by_name[current.base]


@pytest.mark.parametrize("name", ["sim-runtime", "npu"])
def test_secret_args_only_in_throwaway_stages(name: str) -> None:
    all_stages = stages(ROOT / "docker" / name / "Dockerfile")
    chain = image_chain(all_stages)
    for stage in chain:
        assert not stage.args & SECRET_ARGS, f"{name}: {stage.name} is part of the image and declares a secret ARG"
    throwaway = [s for s in all_stages if s not in chain]
    assert any(s.args & SECRET_ARGS for s in throwaway), f"{name}: no stage uses the index URL at all"
    # The image takes only finished trees from the throwaway stages, never their CA bundle or lock files.
    for stage in chain:
        for line in stage.lines:
            if line.startswith("COPY --from="):
                assert "/opt/" in line and "/build/" not in line.split()[-1], line


def test_npu_stages_are_sources_build_runtime() -> None:
    all_stages = stages(ROOT / "docker" / "npu" / "Dockerfile")
    assert [s.name for s in all_stages] == ["sources", "build", "runtime"]
    runtime = all_stages[-1]
    assert runtime.copies_from == {"build"}
    body = " ".join(runtime.lines)
    for tool in ("apt-get install", "gcc", "g++", "git ", "cmake", "/build/src", "sources/"):
        assert tool not in body, f"runtime stage mentions {tool!r}"
    # The CANN base for every stage is the manifest's, by tag and digest when one is recorded.
    assert {s.base for s in all_stages} == {"${CANN_IMAGE}"}


def test_npu_build_uses_every_git_source_and_nothing_else() -> None:
    sources = set(yaml.safe_load((ROOT / "docker" / "versions.yaml").read_text())["git_sources"])
    build = next(s for s in stages(ROOT / "docker" / "npu" / "Dockerfile") if s.name == "build")
    text = " ".join(build.lines)
    used = set(re.findall(r"pip_install \./([a-z_]+)", text)) | set(re.findall(r"cp -a ([a-z_]+)/src", text))
    assert used == sources
    # Source builds never resolve anything: no index, no isolation, no deps.
    assert "PIP_NO_INDEX=1" in text and "--no-build-isolation" in text and "--no-deps" in text
    assert "--require-hashes" in text
    # Custom kernels on for every real build (REHEARSAL is empty; tests/image/test_npu_build_env.py checks the switch).
    assert 'COMPILE_CUSTOM_KERNELS="${kernels}"' in text and 'SOC_VERSION="${SOC_VERSION}"' in text
    assert "pip_check.py /build/check/accepted-conflicts.toml" in text
    assert "--remote" not in text and "git clone" not in text and "--trusted-host" not in text


def test_sim_runtime_stages() -> None:
    all_stages = stages(ROOT / "docker" / "sim-runtime" / "Dockerfile")
    assert [s.name for s in all_stages] == ["python", "build", "runtime"]
    assert all_stages[-1].copies_from == {"build"}
    assert all_stages[-1].base == "python"


def build_flags(target: str) -> tuple[dict[str, str], dict[str, str]]:
    """imagetool build-args TARGET: its build arguments and its labels."""
    out = subprocess.run(
        [sys.executable, str(IMAGETOOL), "build-args", target], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    found: dict[str, dict[str, str]] = {"--build-arg": {}, "--label": {}}
    for line in out.stdout.splitlines():
        flag, _, kv = line.partition(" ")
        key, _, value = kv.partition("=")
        assert flag in found, line
        found[flag][key] = value
    return found["--build-arg"], found["--label"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_final_stage_sets_its_own_oci_labels(dockerfile: Path) -> None:
    final = stages(dockerfile)[-1]
    labels = " ".join(line for line in final.lines if line.startswith("LABEL"))
    for key in ("version", "title"):
        assert f"org.opencontainers.image.{key}=" in labels, key


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_build_gets_the_build_labels_and_no_dockerfile_spells_them(dockerfile: Path) -> None:
    # Each Dockerfile is built from its folder's imagetool target, which labels it from its own build arguments.
    args, labels = build_flags(dockerfile.parent.name)
    assert labels == {key: args[name] for key, name in BUILD_LABELS.items()}
    assert all(labels.values()), labels
    code = " ".join(line for stage in stages(dockerfile) for line in stage.lines)
    for key in BUILD_LABELS:
        assert key not in code, f"{dockerfile.parent.name}: {key} is set by the build (imagetool BUILD_LABELS)"


def test_every_docker_build_passes_imagetools_flags() -> None:
    # mk/image.mk: each `docker build` reads the build-args file it wrote; the simulated host's build script
    # passes what imagetool prints for it.
    recipes = re.sub(r"\\\n", " ", (ROOT / "mk" / "image.mk").read_text())
    builds = [line for line in recipes.splitlines() if line.lstrip().startswith("docker build")]
    assert len(builds) >= 4, builds
    for line in builds:
        assert re.search(r"\$\$\(cat \$\(IMAGE_BUILD_DIR\)/[\w$().-]+\.args\)", line), line
    script = (ROOT / "docker" / "sim-host" / "build.sh").read_text()
    assert 'imagetool.py" build-args sim-host' in script
    assert re.search(r'docker build "\$\{build_flags\[@\]\}"', script)
