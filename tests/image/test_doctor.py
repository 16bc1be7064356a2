"""`python -m verl_recipe.doctor`: version ordering, each check's pass and fail, simulated mode, exit codes, JSON."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

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
    for var in ("HCCL_IF_IP", "NODE_IP", "NODE_DIES", "NDEVICES_PER_NODE", "VERL_RECIPE_DEV_DIR"):
        monkeypatch.delenv(var, raising=False)
    return {"shared": shared, "sys_net": sys_net, "tmp": tmp_path}


@pytest.fixture(autouse=True)
def sim_runtime_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The package set of verl-recipe-runtime:sim (the dev venv has no Ray): manifest pins + a CPU torch."""
    manifest = load_manifest()
    pk = manifest["python_packages"]
    have = {doctor.DIST_NAMES[k]: str(pk[k]) for k in doctor.SIM_STRICT}
    have |= {"torch": "2.13.0+cpu", "verl": str(manifest["git_sources"]["verl"]["version"])}
    monkeypatch.setattr(doctor.packages, "installed_version", lambda dist: have.get(dist))


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
    # a plain container in simulated mode: no simulated host's /dev to count
    assert checks["npu-dies"]["status"] == "expected" and "/host-dev" in checks["npu-dies"]["detail"]
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


def test_each_recipes_model_path_from_the_site_file_is_checked(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deploy.yml writes site_models as site.yaml's per-recipe MODEL_PATH and no site-wide one: each is checked."""
    monkeypatch.delenv("MODEL_PATH")
    site = node["tmp"] / "site.yaml"
    present, absent = node["shared"] / "models" / "m", node["shared"] / "models" / "gone"
    recipes = {"qwen3.5-35b-fsdp": {"MODEL_PATH": str(present)}, "qwen3.5-397b": {"MODEL_PATH": str(absent)}}
    site.write_text(json.dumps({"recipes": recipes}))
    monkeypatch.setenv("VERL_RECIPE_SITE", str(site))
    code, doc = run_json(node, capsys)
    checks = by_name(doc)
    assert code == 1
    assert "path:MODEL_PATH" not in checks
    assert checks["path:MODEL_PATH:qwen3.5-35b-fsdp"] == {**checks["path:MODEL_PATH:qwen3.5-35b-fsdp"], "status": "ok"}
    bad = checks["path:MODEL_PATH:qwen3.5-397b"]
    assert bad["status"] == "fail" and str(absent) in bad["detail"] and "site_models" in bad["fix"]
    site.write_text(json.dumps({"recipes": {"qwen3.5-397b": {"TP": 8}}}))
    _, doc = run_json(node, capsys)
    assert by_name(doc)["path:MODEL_PATH"]["detail"] == "not set", "no model path anywhere still fails"


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
    monkeypatch.setattr(doctor.packages, "installed_version", lambda dist: versions.get(dist))
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


# --- the dies: counted by name in the host's /dev, never opened --------------------------------------------------

CONTROL = ("davinci_manager", "devmm_svm", "hisi_hdc")


def host_dev(
    path: Path, dies: range | list[int] = range(16), control: tuple[str, ...] = CONTROL, char: bool = False
) -> Path:
    """A host's /dev as the doctor sees it at /host-dev: empty files (as a simulated host without CAP_MKNOD writes
    them) or, with char=True, links to /dev/null (a character device, as on a real host)."""
    path.mkdir(parents=True, exist_ok=True)
    for name in [*(f"davinci{i}" for i in dies), *control, "null", "davinci_other"]:
        if char:
            (path / name).symlink_to("/dev/null")
        else:
            (path / name).write_text("")
    return path


def run_dev(node: dict[str, Path], capsys: pytest.CaptureFixture[str], dev: Path | None, *extra: str) -> dict:
    args = ["--json", "--sys-net", str(node["sys_net"]), "--min-free-gb", "0", *extra]
    args += ["--driver-info", str(node["tmp"] / "version.info"), "--record-dir", str(node["tmp"] / "record")]
    if dev is not None:
        args += ["--dev-dir", str(dev)]
    capsys.readouterr()
    code = doctor.main(args)
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == code
    return doc


def test_simulated_healthy_host_passes(node: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    doc = run_dev(node, capsys, host_dev(node["tmp"] / "host-dev"))
    dies = by_name(doc)["npu-dies"]
    assert doc["ok"] is True and dies["status"] == "ok", dies
    assert "16 dies" in dies["detail"] and "hisi_hdc" in dies["detail"]


@pytest.mark.parametrize(
    ("dies", "shown"),
    [
        (range(12), "12 of 16 dies"),  # fault dies:12
        ([i for i in range(16) if i != 7], "davinci7 missing"),  # fault dev-missing:7
        (range(1, 16), "davinci0 missing"),
    ],
)
def test_simulated_host_with_fewer_dies_fails(
    node: dict[str, Path], capsys: pytest.CaptureFixture, dies: Any, shown: str
) -> None:
    doc = run_dev(node, capsys, host_dev(node["tmp"] / "host-dev", dies))
    check = by_name(doc)["npu-dies"]
    assert doc["ok"] is False and doc["exit_code"] == 1
    assert check["status"] == "fail" and shown in check["detail"], check
    assert "npu-smi info" in check["fix"]
    failed = [c for c in doc["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in failed] == ["npu-dies"], "nothing else fails on a healthy simulated node"


def test_fewer_dies_is_one_line_with_its_fix(node: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    dev = host_dev(node["tmp"] / "host-dev", range(12))
    capsys.readouterr()
    argv = ["--sys-net", str(node["sys_net"]), "--min-free-gb", "0", "--dev-dir", str(dev)]
    assert doctor.main([*argv, "--record-dir", str(node["tmp"] / "record")]) == 1
    out = capsys.readouterr().out.splitlines()
    fails = [line for line in out if line.startswith("[FAIL]")]
    missing = "davinci12, davinci13, davinci14, davinci15 missing"
    assert fails == [f"[FAIL] npu-dies: 12 of 16 dies in {dev} (host.dies_per_node.a3=16): {missing}"]
    assert out[out.index(fails[0]) + 1].strip().startswith("fix: the host lost a die")


def test_missing_control_node_fails(node: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    doc = run_dev(node, capsys, host_dev(node["tmp"] / "host-dev", control=("davinci_manager", "devmm_svm")))
    check = by_name(doc)["npu-dies"]
    assert check["status"] == "fail" and "hisi_hdc missing" in check["detail"] and "driver" in check["fix"]


def test_dev_dir_comes_from_verl_recipe_dev_dir(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_RECIPE_DEV_DIR", str(host_dev(node["tmp"] / "host-dev", range(15))))
    assert "davinci15 missing" in by_name(run_dev(node, capsys, None))["npu-dies"]["detail"]
    monkeypatch.setenv("VERL_RECIPE_DEV_DIR", str(node["tmp"] / "absent"))
    check = by_name(run_dev(node, capsys, None))["npu-dies"]
    assert check["status"] == "fail" and str(node["tmp"] / "absent") in check["detail"]
    assert "/host-dev" in check["fix"]


@pytest.mark.parametrize(
    ("var", "value", "shown"),
    [
        ("NODE_DIES", "sixteen", "NODE_DIES='sixteen' is not a whole number"),
        ("NODE_DIES", "0", "NODE_DIES='0'"),
        ("NDEVICES_PER_NODE", "-2", "NDEVICES_PER_NODE='-2'"),
        ("NODE_DIES", "8", "16 dies in"),  # more dies than node.env says: the inventory is wrong
        ("NODE_DIES", "17", "davinci16 missing"),
    ],
)
def test_bad_die_count_setting_fails(
    node: dict[str, Path],
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    var: str,
    value: str,
    shown: str,
) -> None:
    monkeypatch.setenv(var, value)
    doc = run_dev(node, capsys, host_dev(node["tmp"] / "host-dev"))
    check = by_name(doc)["npu-dies"]
    assert doc["exit_code"] == 1 and check["status"] == "fail" and shown in check["detail"], check
    assert check["fix"]


def test_node_dies_sets_the_expected_count(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NODE_DIES", "8")
    monkeypatch.setenv("NDEVICES_PER_NODE", "16")  # node.env's NODE_DIES wins, as for the Ray node
    check = by_name(run_dev(node, capsys, host_dev(node["tmp"] / "host-dev", range(8))))["npu-dies"]
    assert check["status"] == "ok" and "8 dies" in check["detail"]


def test_real_host_needs_character_devices(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERL_RECIPE_SIMULATED", "0")
    check = by_name(run_dev(node, capsys, host_dev(node["tmp"] / "files")))["npu-dies"]
    assert check["status"] == "fail" and "not a character device" in check["detail"]
    check = by_name(run_dev(node, capsys, host_dev(node["tmp"] / "chars", char=True)))["npu-dies"]
    assert check["status"] == "ok", check
    check = by_name(run_dev(node, capsys, host_dev(node["tmp"] / "empty", [], ())))["npu-dies"]
    assert check["status"] == "fail" and "0 of 16 dies" in check["detail"], "no simulated excuse on a real host"


# --- torch_npu: import and version only ----------------------------------------------------------------------


class Opened(AssertionError):
    pass


def refuse(what: str) -> Any:
    def call(*args: object, **kwargs: object) -> None:
        raise Opened(f"doctor called {what}: that initialises ACL on a die the Ray node holds")

    return call


def fake_torch_npu(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    """torch and torch_npu whose device calls raise: an import that touched a die would fail the check."""
    calls = ("device_count", "set_device", "init", "is_available", "current_device")
    npu = types.SimpleNamespace(**{n: refuse(f"torch.npu.{n}") for n in calls})
    torch = types.ModuleType("torch")
    torch.npu = npu  # type: ignore[attr-defined]
    mod = types.ModuleType("torch_npu")
    mod.__spec__ = importlib.machinery.ModuleSpec("torch_npu", None)
    mod.__version__ = version  # type: ignore[attr-defined]
    mod.npu = npu  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch_npu", mod)


def runs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """No npu-smi or any other tool: the doctor's checks run in-process."""
    for name in ("run", "Popen", "check_output", "call"):
        monkeypatch.setattr(subprocess, name, refuse(f"subprocess.{name}"))


def real_host(node: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("VERL_RECIPE_SIMULATED", "0")
    write_driver(node, "26.0.rc1")
    runs_nothing(monkeypatch)
    return host_dev(node["tmp"] / "host-dev", char=True)


def test_torch_npu_import_and_version_only(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = real_host(node, monkeypatch)
    pin = str(load_manifest()["python_packages"]["torch_npu"])
    fake_torch_npu(monkeypatch, f"{pin}+git1234")  # a local build tag is the same version
    checks = by_name(run_dev(node, capsys, dev))
    assert checks["npu"]["status"] == "ok" and f"torch_npu {pin}+git1234 imports" in checks["npu"]["detail"]
    assert checks["npu-dies"]["status"] == "ok" and checks["driver"]["status"] == "ok"


def test_torch_npu_version_drift_fails(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = real_host(node, monkeypatch)
    fake_torch_npu(monkeypatch, "2.1.0")
    check = by_name(run_dev(node, capsys, dev))["npu"]
    assert check["status"] == "fail" and "torch_npu 2.1.0" in check["detail"] and "pins" in check["detail"]
    assert "rebuild the image" in check["fix"]


class BrokenLoader(importlib.abc.Loader):
    """A torch_npu whose import fails as it does without the driver's libraries, after printing to fd 1."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        os.write(1, b"[W native] noise on stdout\n")
        raise OSError("libascend_hal.so: cannot open shared object file: No such file or directory")


class BrokenFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.ModuleSpec(name, BrokenLoader()) if name == "torch_npu" else None


def test_torch_npu_import_failure_names_it_and_keeps_json_clean(
    node: dict[str, Path], capfd: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = real_host(node, monkeypatch)
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    monkeypatch.setattr(sys, "meta_path", [BrokenFinder(), *sys.meta_path])
    capfd.readouterr()
    args = ["--json", "--sys-net", str(node["sys_net"]), "--min-free-gb", "0", "--dev-dir", str(dev)]
    assert doctor.main([*args, "--record-dir", str(node["tmp"] / "record")]) == 1
    out, err = capfd.readouterr()
    check = by_name(json.loads(out))["npu"]  # the library's print went to stderr, not into the JSON
    assert "noise on stdout" in err
    assert check["status"] == "fail" and "libascend_hal.so" in check["detail"] and "set_env.sh" in check["fix"]


def test_torch_npu_absent_on_a_real_host(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = real_host(node, monkeypatch)
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # import raises ModuleNotFoundError(name="torch_npu")
    check = by_name(run_dev(node, capsys, dev))["npu"]
    assert check == {
        "name": "npu",
        "status": "fail",
        "detail": "torch_npu is not installed",
        "fix": "use the NPU image (`make image-npu`)",
    }


def test_simulated_mode_does_not_import_torch_npu(
    node: dict[str, Path], capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "meta_path", [BrokenFinder(), *sys.meta_path])
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    runs_nothing(monkeypatch)
    check = by_name(run_dev(node, capsys, host_dev(node["tmp"] / "host-dev")))["npu"]
    assert check["status"] == "expected" and "NPU not used" in check["detail"]
