"""Weight sync over IPC: verl 0.8.0's version rule on real version strings, the doctor's row, the site setting's
default against the pins, and validate's refusal of a bucket smaller than the largest tensor without IPC.

Version strings are real ones: `npu-smi` headers and board "Software Version" lines pasted in vllm-project/
vllm-ascend issues #2971 (24.1.rc3.7, CANN toolkit 8.2.RC1), #3998 (25.3.rc1, CANN 8.3.RC1) and #5850 (25.2.1), an
older 910A fixture's npu-smi 23.0.rc1.b070, board outputs with Software Version 23.0.5 and 25.5.0, driver
version.info files (Version=25.3.rc1, Version=24.1.rc1, package_version=26.0.rc1 on an A3 host with CANN 9.0.0),
and the forms verl's own docstring names (25.3.rc1.2, 25.5.t3.b001, 8.3.0).
"""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
from verl_recipe.doctor.ipc import CANN_INFO, check_ipc, ipc_supported, release
from verl_recipe.manifest import load_manifest
from verl_recipe.models import MODELS
from verl_recipe.recipes import load_recipe

from .helpers import run

S = "--skip-path-checks"
BUCKET = "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes"


@pytest.mark.parametrize(
    ("driver", "cann", "ipc"),
    [
        ("24.1.rc3.7", "8.2.RC1", False),  # vllm-ascend #2971: both below the floor
        ("25.3.rc1", "8.3.RC1", True),  # vllm-ascend #3998: both exactly at the floor
        ("25.2.1", "8.3.RC1", False),  # vllm-ascend #5850: a final 25.2 is still below 25.3.rc1
        ("23.0.rc1.b070", "9.0.0", False),
        ("23.0.5", "9.0.0", False),
        ("25.5.0", "8.3.RC1", True),
        ("24.1.rc1", "8.3.RC1", False),
        ("26.0.rc1", "9.0.0", True),  # the manifest's floor with its CANN
        ("26.0.rc1", "8.2.RC1", False),  # a new driver does not make an old CANN support it
        ("25.3.rc1.2", "8.3.0", True),
        ("25.5.t3.b001", "8.3.rc1", True),
        ("25.3", "8.3.rc2", True),  # a final release is above its own release candidates
    ],
)
def test_ipc_rule_on_real_versions(driver: str, cann: str, ipc: bool) -> None:
    assert ipc_supported(driver, cann) is ipc


@pytest.mark.parametrize(
    ("text", "cut"),
    [("25.3.rc1.2", "25.3.rc1"), ("25.5.t3.b001", "25.5"), ("9.0.0.B160", "9.0.0"), ("26.0.RC1", "26.0.rc1"),
     ("24.1.rc3.7", "24.1.rc3"), (" 8.3.RC1\n", "8.3.rc1")],
)  # fmt: skip
def test_release_cut_as_verl_cuts_it(text: str, cut: str) -> None:
    assert release(text) == cut


@pytest.mark.parametrize("text", ["", "abc", "25", "v25.3.rc1", "Version: 25.3"])
def test_unreadable_version_is_named(text: str) -> None:
    with pytest.raises(ValueError, match="not a driver or CANN version"):
        release(text)


def test_default_setting_follows_the_pins() -> None:
    """WEIGHT_SYNC_IPC=true by default because every host that passes the preflight has the manifest's HDK floor and
    runs the image's CANN: lowering either below verl's IPC floor must change the default too."""
    manifest = load_manifest()
    assert ipc_supported(str(manifest["host"]["hdk_min"]), str(manifest["base"]["cann"]["version"]))
    assert load_recipe("qwen3.5-397b").settings["WEIGHT_SYNC_IPC"] is True


# ------------------------------------------------------------------------------------------------ the doctor's row


def node_files(tmp_path: Path, driver: str | None, cann: str | None, npu_smi: bool = True) -> tuple[Path, dict]:
    info = tmp_path / "driver" / "version.info"
    info.parent.mkdir(parents=True)
    if driver is not None:
        info.write_text(f"Version={driver}\nascendhal_version=7.35.23\n")
    home = tmp_path / "cann" / "latest"
    arch = home / f"{platform.machine()}-linux"
    arch.mkdir(parents=True)
    if cann is not None:
        (arch / CANN_INFO).write_text(f"package_name=Ascend-cann-toolkit\nversion={cann}\narch=aarch64\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    if npu_smi:
        tool = bindir / "npu-smi"
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
    return info, {"ASCEND_HOME_PATH": str(home), "PATH": str(bindir)}


def test_doctor_row_ok(tmp_path: Path) -> None:
    info, env = node_files(tmp_path, "26.0.rc1", "9.0.0")
    found = check_ipc(False, info, env)
    assert found.status == "ok" and "26.0.rc1" in found.detail and "9.0.0" in found.detail


def test_doctor_row_below_the_floor_warns_with_the_fix(tmp_path: Path) -> None:
    info, env = node_files(tmp_path, "24.1.rc3.7", "8.2.RC1")
    found = check_ipc(False, info, env)
    assert found.status == "warn"
    assert "24.1.rc3.7" in found.detail and "shared memory" in found.detail
    assert "WEIGHT_SYNC_IPC: false" in found.fix and "25.3.rc1" in found.fix


@pytest.mark.parametrize(
    ("driver", "cann", "npu_smi", "named"),
    [
        (None, "9.0.0", True, "version.info"),
        ("26.0.rc1", None, True, CANN_INFO),
        ("26.0.rc1", "9.0.0", False, "npu-smi"),
    ],
)
def test_doctor_row_fails_where_verl_would_raise(
    tmp_path: Path, driver: str | None, cann: str | None, npu_smi: bool, named: str
) -> None:
    info, env = node_files(tmp_path, driver, cann, npu_smi)
    found = check_ipc(False, info, env)
    assert found.status == "fail" and named in found.detail and found.fix


def test_doctor_row_unreadable_version(tmp_path: Path) -> None:
    info, env = node_files(tmp_path, "26.0.rc1", "next")
    found = check_ipc(False, info, env)
    assert found.status == "fail" and "'next'" in found.detail


def test_doctor_row_simulated(tmp_path: Path) -> None:
    assert check_ipc(True, tmp_path / "none", {}).status == "expected"


# ------------------------------------------------------------------------------------------------ validate


def test_largest_tensors_of_the_three_sizes() -> None:
    """248320 x hidden x 2 bytes (bf16): the numbers docs/settings.md quotes."""
    mib = {name: m.largest_tensor()[1] / 2**20 for name, m in MODELS.items()}
    assert mib == {"qwen3.5-35b-a3b": 970, "qwen3.5-122b-a10b": 1455, "qwen3.5-397b-a17b": 1940}
    assert all(m.largest_tensor()[0] == "embed_tokens" for m in MODELS.values())


def test_small_bucket_without_ipc_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "validate", "qwen3.5-397b", S, "--set", "WEIGHT_SYNC_IPC=false")
    assert res.rc == 2
    errors = [line for line in res.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, res.err
    line = errors[0]
    assert f"{BUCKET}=1024" in line and "embed_tokens is 1940 MiB" in line
    assert f"fix: add `-- {BUCKET}=1940` or more" in line and "WEIGHT_SYNC_IPC=true" in line


@pytest.mark.parametrize(
    "args",
    [
        ["--set", "WEIGHT_SYNC_IPC=false", "--", f"{BUCKET}=2048"],  # the fix the line names
        ["--set", "WEIGHT_SYNC_IPC=true"],
        ["--set", "WEIGHT_SYNC_IPC=false", "--set", "DEVICE=gpu"],  # CUDA IPC is always there
    ],
)
def test_bucket_accepted_where_it_can_work(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    res = run(capsys, "validate", "qwen3.5-397b", S, *args)
    assert BUCKET not in res.err, res.err


def test_bucket_of_the_smaller_recipes_holds_their_largest_tensor(capsys: pytest.CaptureFixture[str]) -> None:
    for recipe in ("qwen3.5-35b", "qwen3.5-122b", "qwen3.5-35b-fsdp"):
        res = run(capsys, "validate", recipe, S, "--set", "WEIGHT_SYNC_IPC=false")
        assert res.rc == 0, (recipe, res.err)
