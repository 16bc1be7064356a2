"""The simulated cluster's CPU stand-ins (docker/sim-runtime/standin, verl_sim_standin) live in the simulated runtime
image and the development venv only: never in the NPU image or in either of its build contexts (the NPU runtime's,
assembled by docker/tools/sources.py, and the recipe layer's, the repository root filtered by .dockerignore)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STANDIN = "docker/sim-runtime/standin"


def test_npu_dockerfiles_and_context_builder_never_name_the_standins() -> None:
    for path in ("docker/npu/Dockerfile", "docker/recipe/Dockerfile", "docker/tools/sources.py"):
        text = (REPO / path).read_text()
        assert STANDIN not in text and "verl_sim_standin" not in text and "sim-runtime" not in text, path


def test_recipe_layer_context_excludes_the_standins() -> None:
    ignored = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    assert STANDIN in ignored, "the recipe layer (NPU image) is built from the repository root"


def test_only_the_sim_runtime_context_carries_them() -> None:
    tool = (REPO / "docker" / "tools" / "imagetool.py").read_text()
    body = tool.split("def sim_context", 1)[1].split("\ndef ", 1)[0]
    assert 'src / "standin"' in body and tool.count('src / "standin"') == 1  # sim-context alone copies them
    sim = (REPO / "docker" / "sim-runtime" / "Dockerfile").read_text()
    assert "COPY standin/" in sim and "pip install --no-deps --no-index --no-build-isolation /tmp/build/standin" in sim


@pytest.mark.docker
def test_the_recipe_layer_context_sent_to_docker_has_no_standin(tmp_path: Path) -> None:
    """What docker really receives as the recipe layer's context (classic builder, .dockerignore applied)."""
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("FROM verl-recipe-base:bookworm\nCOPY . /ctx\n")
    tag = "verl-recipe-context-probe:test"
    build = subprocess.run(
        ["docker", "build", "-q", "--network", "none", "-t", tag, "-f", str(dockerfile), str(REPO)],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-2000:]
    try:
        found = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", tag, "sh", "-c",
             "ls /ctx/entrypoints >/dev/null && find /ctx -name 'verl_sim_standin*' -o -path '*sim-runtime/standin*'"],
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        assert found.returncode == 0, found.stderr
        assert found.stdout.strip() == "", f"stand-in files in the recipe layer's context: {found.stdout[:500]}"
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, check=False)


@pytest.mark.docker
def test_the_sim_image_has_them(sim_image: str) -> None:
    p = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--entrypoint", "python", sim_image, "-c",
         "import verl_sim_standin as s; print(s.ROLLOUT_NAME, s.PLUGIN_MODULE)"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0 and p.stdout.split() == ["standin", "verl_sim_standin.plugin"], p.stderr[-2000:]
