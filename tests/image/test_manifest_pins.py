"""The manifest holds exactly upstream's pins, and every Dockerfile and lock input takes its versions from it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "docker" / "versions.yaml"
IMAGETOOL = ROOT / "docker" / "tools" / "imagetool.py"
DOCKERFILES = sorted(ROOT.glob("docker/*/Dockerfile"))
# The Dockerfiles whose every ARG imagetool renders (the images of mk/image.mk).
IMAGE_DOCKERFILES = [ROOT / "docker" / d / "Dockerfile" for d in ("sim-runtime", "npu", "recipe")]

# Written down from the upstream sources, independently of docker/versions.yaml, so that this test checks the
# manifest against upstream: the CANN base tag and SOC name from Ascend/cann-container-image and vllm-ascend's
# build docs; the HDK floor from Ascend's CANN 9.0.0 / HDK compatibility table; torch, torchvision, torch_npu
# 2.9.0.post2 and triton-ascend 3.2.1 from vllm-ascend releases/v0.18.0 `requirements.txt` (a2796db4, #9138: the
# branch verl's A3 image clones; the tag e18643f8 still named 2.9.0 and 3.2.0 for CANN 8.5.1); triton-ascend,
# TransferQueue and flash-linear-attention also from verl release/v0.8.0 `requirements-npu.txt`, setuptools 80.10.2
# from its Ascend Dockerfile (82 removed pkg_resources); each commit is the one its tag or branch named below pointed
# at when pinned (vLLM v0.18.0's as vLLM's wheel index names it: `make sources` checks the tag still resolves there).
UPSTREAM_PINS = {
    ("base", "cann", "version"): "9.0.0",
    ("base", "cann", "image"): "swr.cn-south-1.myhuaweicloud.com/ascendhub/cann",
    ("base", "cann", "tag"): "9.0.0-a3-ubuntu22.04-py3.11",
    ("base", "python"): "3.11",
    ("soc", "a3"): "ascend910_9392",
    ("host", "hdk_min"): "26.0.RC1",
    ("python_packages", "torch"): "2.9.0",
    ("python_packages", "torchvision"): "0.24.0",
    ("python_packages", "torch_npu"): "2.9.0.post2",
    ("python_packages", "triton_ascend"): "3.2.1",
    ("python_packages", "transfer_queue"): "0.1.7",
    ("python_packages", "flash_linear_attention"): "0.5.0",
    ("python_packages", "megatron_core"): "0.16.0",
    ("git_sources", "verl", "url"): "https://github.com/verl-project/verl.git",
    ("git_sources", "verl", "ref"): "release/v0.8.0",
    ("git_sources", "verl", "commit"): "3e4edb6e3d6872ad8aa21af83e98ee6e1bea19a2",
    ("git_sources", "verl", "version"): "0.8.0",
    ("git_sources", "vllm", "ref"): "v0.18.0",
    ("git_sources", "vllm", "commit"): "bcf2be96120005e9aea171927f85055a6a5c0cf6",
    ("git_sources", "vllm", "version"): "0.18.0",
    ("git_sources", "vllm_ascend", "ref"): "releases/v0.18.0",
    ("git_sources", "vllm_ascend", "commit"): "35b0fdf7d57aee5bd93793e03506ae2d85959595",
    ("python_packages", "setuptools"): "80.10.2",
    ("git_sources", "megatron_lm", "ref"): "core_v0.16.0",
    ("git_sources", "megatron_lm", "commit"): "3bec9aa97dda898d16ff5a89bac0ed2b6682b172",
    ("git_sources", "mindspeed", "url"): "https://gitcode.com/Ascend/MindSpeed.git",
    ("git_sources", "mindspeed", "ref"): "core_r0.16.0",
    ("git_sources", "mindspeed", "commit"): "e4772499f7eb9fa9a68919dd1eaddef00e915b2d",
    ("git_sources", "megatron_bridge", "commit"): "de93536e9028ecf1e4dc28608dc80f336dcdfe59",
    ("git_sources", "transformers", "commit"): "cc7ab9be508ce6ed3637bba9e50367b29b742dc6",
}
UPSTREAM_GIT_SOURCES = {"verl", "vllm", "vllm_ascend", "megatron_lm", "mindspeed", "megatron_bridge", "transformers"}

VERSIONISH = re.compile(r"(?<![\w.$-])v?\d+\.\d+(?:\.\d+)*(?:[.-]?(?:rc|post|dev|a|b)\d+)?(?![\w.])", re.IGNORECASE)
COMMITISH = re.compile(r"\b[0-9a-f]{40}\b")


def manifest() -> dict:
    return yaml.safe_load(MANIFEST.read_text())


def dig(data: dict, path: tuple[str, ...]) -> object:
    for key in path:
        data = data[key]
    return data


def imagetool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(IMAGETOOL), *args], capture_output=True, text=True, check=False)


def build_args(target: str, *extra: str) -> dict[str, str]:
    """The `--build-arg` lines; the `--label` lines after them are checked in test_dockerfile_stages.py."""
    out = imagetool("build-args", target, *extra)
    assert out.returncode == 0, out.stderr
    args = {}
    for line in out.stdout.splitlines():
        flag, _, kv = line.partition(" ")
        assert flag in ("--build-arg", "--label"), line
        if flag == "--label":
            continue
        key, _, value = kv.partition("=")
        args[key] = value
    return args


@pytest.mark.parametrize("path", sorted(UPSTREAM_PINS), ids=lambda p: ".".join(p))
def test_manifest_pin_matches_upstream(path: tuple[str, ...]) -> None:
    assert str(dig(manifest(), path)) == UPSTREAM_PINS[path]


def test_manifest_git_sources_are_exactly_upstreams() -> None:
    sources = manifest()["git_sources"]
    assert set(sources) == UPSTREAM_GIT_SOURCES
    for name, src in sources.items():
        # Every source is pinned by commit; `make sources` checks that a tag still resolves to it.
        assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]), name


def test_no_base_digest_is_invented() -> None:
    cann = manifest()["base"]["cann"]
    for key in ("digest", "digest_a2"):
        assert cann[key] == "" or re.fullmatch(r"sha256:[0-9a-f]{64}", cann[key]), key


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfile_has_no_hardcoded_versions(dockerfile: Path) -> None:
    for n, line in enumerate(dockerfile.read_text().splitlines(), 1):
        code = line.split("#", 1)[0] if line.lstrip().startswith("#") else line
        assert not COMMITISH.search(code), f"{dockerfile.name}:{n}: commit hash; take it from the manifest"
        assert not VERSIONISH.search(code), f"{dockerfile.name}:{n}: version literal; pass it as an ARG: {line}"


TARGET_OF = {"sim-runtime": "sim-runtime", "npu": "npu", "recipe": "recipe"}
# Arguments that come from the caller, not the manifest (mirrors, the layering).
CALLER_ARGS = {"PIP_INDEX_URL", "PIP_NO_INDEX", "ASCEND_INDEX_URL", "RUNTIME_IMAGE"}


@pytest.mark.parametrize("dockerfile", IMAGE_DOCKERFILES, ids=lambda p: p.parent.name)
def test_every_dockerfile_arg_is_rendered_from_the_manifest(dockerfile: Path) -> None:
    declared = set(re.findall(r"^ARG\s+([A-Z_][A-Z0-9_]*)", dockerfile.read_text(), re.MULTILINE))
    rendered = build_args(TARGET_OF[dockerfile.parent.name])
    assert declared, dockerfile
    assert declared - CALLER_ARGS <= set(rendered), f"ARGs without a manifest value: {declared - set(rendered)}"
    # No ARG has a default: a missing value fails the build instead of silently using a stale pin.
    assert not re.search(r"^ARG\s+\w+=", dockerfile.read_text(), re.MULTILINE)


def test_build_args_carry_the_manifest_values() -> None:
    m = manifest()
    npu = build_args("npu")
    assert npu["TORCH_VERSION"] == m["python_packages"]["torch"]
    assert npu["TORCH_NPU_VERSION"] == m["python_packages"]["torch_npu"]
    assert npu["SOC_VERSION"] == m["soc"]["a3"]
    assert npu["CANN_IMAGE"].startswith(f"{m['base']['cann']['image']}:{m['base']['cann']['tag']}")
    sim = build_args("sim-runtime")
    assert sim["RAY_VERSION"] == m["python_packages"]["ray"]
    assert sim["BASE_IMAGE"] == f"verl-recipe-base:{m['base']['debian_suite']}"


def test_a2_variant_costs_one_argument() -> None:
    a3, a2 = build_args("npu"), build_args("npu", "--soc", "a2")
    changed = {k for k in a3 if a3[k] != a2[k]}
    assert changed == {"SOC", "SOC_VERSION", "CANN_IMAGE", "CANN_DIGEST", "NPU_DIES_PER_NODE"} - (
        {"CANN_DIGEST"} if a3["CANN_DIGEST"] == a2["CANN_DIGEST"] else set()
    )
    assert a2["SOC_VERSION"] == manifest()["soc"]["a2"]
    assert manifest()["base"]["cann"]["tag_a2"] in a2["CANN_IMAGE"]


def test_bad_soc_is_a_one_line_usage_error() -> None:
    out = imagetool("build-args", "npu", "--soc", "a9")
    assert out.returncode == 2
    assert "SOC='a9'" in out.stderr and "a2" in out.stderr and "a3" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_unknown_target_and_bad_override_are_rejected() -> None:
    assert imagetool("build-args", "gpu").returncode == 2
    out = imagetool("build-args", "recipe", "--set", "TORCH_VERSION=1.0")
    assert out.returncode == 2 and "TORCH_VERSION" in out.stderr


def test_image_tags_follow_the_contract() -> None:
    m_hash = imagetool("build-args", "recipe", "--format", "json")
    assert m_hash.returncode == 0
    runtime = imagetool("image-tag", "npu-runtime").stdout.strip()
    assert re.fullmatch(r"verl-recipe-runtime:npu-[0-9a-f]{12}", runtime)
    assert imagetool("image-tag", "npu").stdout.strip().startswith("verl-recipe:npu-")
    assert imagetool("image-tag", "npu", "--soc", "a2").stdout.strip().endswith("-a2")


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("sim", "docker/sim-runtime/requirements.in"),
        ("sim-verl", "docker/sim-runtime/verl.in"),
        ("npu", "docker/lock/npu.in"),
        ("npu-ascend", "docker/lock/npu-ascend.in"),
    ],
)
def test_committed_lock_inputs_are_rendered_from_the_manifest(kind: str, path: str) -> None:
    out = imagetool("lock-input", kind)
    assert out.returncode == 0, out.stderr
    assert (ROOT / path).read_text() == out.stdout, f"{path} is stale: run the lock target"


def test_mm_cache_workaround_stays_on_npu_past_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM #42995's workaround: a pin that has the fix drops it on GPU only; on NPU mm_processor_cache_gb stays 0."""
    from verl_recipe import manifest as recipe_manifest
    from verl_recipe.workarounds import mm_cache_rule_active

    fixed = str(manifest()["workarounds"]["vllm_mm_processor_cache"]["fixed_in_vllm"])
    data = manifest()
    data["git_sources"]["vllm"]["version"] = fixed
    moved = tmp_path / "versions.yaml"
    moved.write_text(yaml.safe_dump(data))
    recipe_manifest.load_manifest.cache_clear()
    try:
        assert mm_cache_rule_active("npu") and mm_cache_rule_active("gpu")  # the pinned 0.18.0 predates the fix
        monkeypatch.setenv("VERL_RECIPE_MANIFEST", str(moved))
        recipe_manifest.load_manifest.cache_clear()
        assert mm_cache_rule_active("npu")
        assert mm_cache_rule_active()  # callers that name no device get the NPU rule
        assert not mm_cache_rule_active("gpu")
    finally:
        recipe_manifest.load_manifest.cache_clear()
