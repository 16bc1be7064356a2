"""`python -m verl_recipe.doctor`: version ordering, each check's pass and fail, simulated mode, exit codes, JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from verl_recipe import doctor
from verl_recipe.manifest import load_manifest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A node env as deploy.yml writes it, with the shared paths present and a fake /sys/class/net."""
    shared = tmp_path / "shared"
    for d in ("models/m", "data", "checkpoints"):
        (shared / d).mkdir(parents=True)
    (shared / "data" / "train.parquet").write_text("x")
    (shared / "data" / "test.parquet").write_text("x")
    sys_net = tmp_path / "net"
    for nic in ("lo", "eth0"):
        (sys_net / nic).mkdir(parents=True)
    env = {
        "VERL_RECIPE_SIMULATED": "1",
        "HCCL_SOCKET_IFNAME": "eth0",
        "GLOO_SOCKET_IFNAME": "eth0",
        "TP_SOCKET_IFNAME": "=eth0",
        "SHARED_ROOT": str(shared),
        "MODEL_PATH": str(shared / "models/m"),
        "TRAIN_FILES": str(shared / "data/train.parquet"),
        "VAL_FILES": str(shared / "data/test.parquet"),
        "CKPT_DIR": str(shared / "checkpoints" / "run1"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("HCCL_IF_IP", raising=False)
    monkeypatch.delenv("NODE_IP", raising=False)
    return {"shared": shared, "sys_net": sys_net, "tmp": tmp_path}


@pytest.fixture(autouse=True)
def sim_runtime_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The package set of verl-recipe-runtime:sim (the dev venv has no Ray): manifest pins + a CPU torch."""
    manifest = load_manifest()
    pk = manifest["python_packages"]
    have = {doctor.DIST_NAMES[k]: str(pk[k]) for k in doctor.SIM_STRICT}
    have |= {"torch": "2.13.0+cpu", "verl": str(manifest["git_sources"]["verl"]["version"])}
    monkeypatch.setattr(doctor, "installed_version", lambda dist: have.get(dist))


def run(node: dict[str, Path], *extra: str) -> tuple[int, dict]:
    args = ["--json", "--sys-net", str(node["sys_net"]), "--dev-dir", str(node["tmp"]), "--min-free-gb", "0", *extra]
    args += ["--driver-info", str(node["tmp"] / "version.info"), "--record-dir", str(node["tmp"] / "record")]
    return doctor.main(args), {}


def run_json(node: dict[str, Path], capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    capsys.readouterr()
    code, _ = run(node, *extra)
    return code, json.loads(capsys.readouterr().out)


def by_name(doc: dict) -> dict[str, dict]:
    return {c["name"]: c for c in doc["checks"]}


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("25.5.0", "26.0.RC1"),
        ("26.0.rc1", "26.0.RC2"),
        ("26.0.RC2", "26.0.0"),
        ("26.0.0", "26.0.1"),
        ("24.1.rc3", "24.1.rc3.7"),
        ("25.3.rc1", "26.0.rc1"),
    ],
)
def test_hdk_ordering(older: str, newer: str) -> None:
    assert doctor.hdk_key(older) < doctor.hdk_key(newer)


def test_hdk_spellings_compare_equal() -> None:
    assert doctor.hdk_key("26.0.rc1") == doctor.hdk_key("26.0.RC1")


@pytest.mark.parametrize("bad", ["", "26", "26.x.1", "26.0.beta"])
def test_hdk_rejects_garbage(bad: str) -> None:
    with pytest.raises(ValueError):
        doctor.hdk_key(bad)


def test_simulated_node_is_ok_and_no_npu_is_expected(node: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    code, doc = run_json(node, capsys)
    checks = by_name(doc)
    assert code == 0 and doc["ok"] is True and doc["simulated"] is True and doc["exit_code"] == 0
    assert checks["npu"]["status"] == "expected" and "no NPU" in checks["npu"]["detail"]
    assert checks["driver"]["status"] == "expected"
    assert checks["package:torch-npu"]["status"] == "expected"
    assert {c["status"] for c in doc["checks"]} <= {"ok", "expected", "warn"}
    assert set(doc) == {"ok", "exit_code", "simulated", "checks"}
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in doc["checks"])


def test_real_mode_without_npu_fails_with_fixes(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_RECIPE_SIMULATED", "0")
    code, doc = run_json(node, capsys)
    checks = by_name(doc)
    assert code == 1 and doc["ok"] is False
    assert checks["npu"]["status"] == "fail" and checks["npu"]["fix"]
    assert checks["driver"]["status"] == "fail" and ">= 26.0.RC1" in checks["driver"]["fix"]
    assert all(c["fix"] for c in doc["checks"] if c["status"] == "fail")


def write_driver(node: dict[str, Path], version: str) -> None:
    (node["tmp"] / "version.info").write_text(
        f"Version={version}\nascendhal_version=7.35.23\npackage_version={version}\n"
    )


def test_driver_older_than_hdk_min_fails(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_RECIPE_SIMULATED", "0")
    write_driver(node, "25.5.0")
    _, doc = run_json(node, capsys)
    driver = by_name(doc)["driver"]
    assert driver["status"] == "fail"
    assert "25.5.0" in driver["detail"] and "26.0.RC1" in driver["detail"] and "upgrade" in driver["fix"]


def test_driver_at_hdk_min_passes(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_RECIPE_SIMULATED", "0")
    write_driver(node, "26.0.rc1")
    _, doc = run_json(node, capsys)
    assert by_name(doc)["driver"]["status"] == "ok"


def test_wrong_nic_and_missing_paths_fail(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "ib9")
    monkeypatch.delenv("TP_SOCKET_IFNAME")
    monkeypatch.setenv("MODEL_PATH", str(node["shared"] / "models" / "absent"))
    code, doc = run_json(node, capsys)
    checks = by_name(doc)
    assert code == 1
    assert checks["env:GLOO_SOCKET_IFNAME"]["status"] == "fail" and "ib9" in checks["env:GLOO_SOCKET_IFNAME"]["detail"]
    assert checks["env:TP_SOCKET_IFNAME"]["detail"] == "not set"
    assert checks["path:MODEL_PATH"]["status"] == "fail" and "absent" in checks["path:MODEL_PATH"]["detail"]
    assert checks["env:HCCL_SOCKET_IFNAME"]["status"] == "ok"


def test_hccl_if_ip_must_be_local(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not doctor.local_addresses():
        pytest.fail("/proc/net/fib_trie lists no local address on this machine")
    monkeypatch.setenv("HCCL_IF_IP", "192.0.2.77")  # TEST-NET-1: never local
    _, doc = run_json(node, capsys)
    assert by_name(doc)["env:HCCL_IF_IP"]["status"] == "fail"
    monkeypatch.setenv("HCCL_IF_IP", "127.0.0.1")
    _, doc = run_json(node, capsys)
    assert by_name(doc)["env:HCCL_IF_IP"]["status"] == "ok"


def test_not_enough_free_space_fails(node: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    code, doc = run_json(node, capsys, "--min-free-gb", "1e9")
    check = by_name(doc)["ckpt-space"]
    assert code == 1 and check["status"] == "fail" and "need 1e+09 GB" in check["detail"]


@pytest.mark.parametrize(("value", "names", "ok"), [
    ("eth", ["lo", "eth0"], True), ("=eth0", ["eth0"], True), ("=eth", ["eth0"], False),
    ("ib", ["eth0"], False), ("^docker", ["eth0"], True), ("ib0,eth1", ["eth1"], True),
])  # fmt: skip
def test_nic_syntax(value: str, names: list[str], ok: bool) -> None:
    assert doctor.nic_matches(value, names) is ok


def test_bad_simulated_value_is_usage_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("VERL_RECIPE_SIMULATED", "yes")
    assert doctor.main(["--json"]) == 2
    err = capsys.readouterr().err
    assert "VERL_RECIPE_SIMULATED='yes'" in err and len(err.strip().splitlines()) == 1


def test_bad_option_is_usage_error() -> None:
    assert doctor.main(["--no-such-option"]) == 2
    assert doctor.main(["--min-free-gb", "-1"]) == 2


def test_package_drift_against_the_manifest(monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = load_manifest()
    versions = {"hydra-core": "1.3.1", "omegaconf": manifest["python_packages"]["omegaconf"]}
    monkeypatch.setattr(doctor, "installed_version", lambda dist: versions.get(dist))
    checks = {c.name: c for c in doctor.check_packages(manifest, simulated=True)}
    assert checks["package:hydra-core"].status == "fail" and "1.3.1" in checks["package:hydra-core"].detail
    assert checks["package:omegaconf"].status == "ok"
    assert checks["package:ray"].status == "fail"  # ray is in the simulated runtime too: absence is a failure
    assert checks["package:torch-npu"].status == "expected"


def test_record_and_drift_detection(node: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    record = node["tmp"] / "record"
    assert doctor.main(["--record", str(record), "--record-meta", "vcs_ref=abc"]) == 0
    data = json.loads((record / "image-manifest.json").read_text())
    assert data["meta"] == {"vcs_ref": "abc"} and data["packages"]["PyYAML"]
    assert "PyYAML==" in (record / "pip-freeze.txt").read_text()
    _, doc = run_json(node, capsys)
    assert by_name(doc)["image-record"]["status"] == "ok"
    data["packages"]["PyYAML"] = "0.0.1"
    (record / "image-manifest.json").write_text(json.dumps(data))
    code, doc = run_json(node, capsys)
    assert code == 1 and "PyYAML 0.0.1->" in by_name(doc)["image-record"]["detail"]


def test_module_entry_point_runs() -> None:
    env = {k: v for k, v in os.environ.items() if k != "VERL_RECIPE_SIMULATED"} | {"VERL_RECIPE_SIMULATED": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "verl_recipe.doctor", "--json"], capture_output=True, text=True, env=env
    )
    doc = json.loads(out.stdout)
    assert out.returncode == doc["exit_code"] and doc["simulated"] is True
    assert subprocess.run([sys.executable, "-m", "verl_recipe.doctor", "--bogus"], capture_output=True).returncode == 2
