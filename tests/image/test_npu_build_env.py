"""The NPU build's environment, without building: docker/npu/build-env.sh and cann-env.sh and compose.yaml's
x-cann-env wrapper run for real in bash over a fake CANN tree whose set_env.sh files behave like CANN's (they put
CANN's directories in front of PATH, and that directory holds a `python3` that is not the venv's), and the
Dockerfile's steps are checked in order. Each test names the build stop (issue: replay of the NPU build) it guards."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simkit.paths import load_by_path
from tests.image.test_dockerfile_stages import stages

ROOT = Path(__file__).resolve().parents[2]
NPU = ROOT / "docker" / "npu"
DOCKERFILE = NPU / "Dockerfile"


def fake_cann(tmp: Path, machine: str = "x86_64", devlib: bool = True) -> dict[str, Path]:
    """A CANN-shaped tree under tmp; every absolute path of the scripts is rewritten to point into it."""
    home = tmp / "Ascend" / "cann-9.0.0"
    for d in ("bin", "share/info/ascendnpu-ir/bin"):
        (home / d).mkdir(parents=True)
    if devlib:
        (home / f"{machine}-linux" / "devlib" / "linux" / machine).mkdir(parents=True)
    (tmp / "Ascend" / "ascend-toolkit").mkdir(parents=True)
    (tmp / "Ascend" / "nnal" / "atb").mkdir(parents=True)
    # CANN's bin directory holds a python3 that is NOT the venv's: whatever finds it first gets the wrong one.
    trap = home / "bin" / "python3"
    trap.write_text("#!/bin/sh\necho WRONG-PYTHON\n")
    trap.chmod(0o755)
    (tmp / "Ascend" / "ascend-toolkit" / "set_env.sh").write_text(
        f'export PATH="{home}/bin:$PATH"\nexport TOOLKIT_ENV=1\n'
    )
    (home / "share/info/ascendnpu-ir/bin/set_env.sh").write_text("export NPU_IR_ENV=1\n")
    (tmp / "Ascend" / "nnal" / "atb" / "set_env.sh").write_text("export NNAL_ENV=1\n")
    venv = tmp / "venv" / "bin"
    venv.mkdir(parents=True)
    real = venv / "python3"
    real.write_text("#!/bin/sh\necho VENV-PYTHON\n")
    real.chmod(0o755)
    scripts = tmp / "npu"
    scripts.mkdir()
    for name in ("build-env.sh", "cann-env.sh"):
        text = (NPU / name).read_text()
        text = text.replace("/build/npu/", f"{scripts}/").replace("/opt/venv", str(tmp / "venv"))
        text = text.replace("/usr/local/Ascend", str(tmp / "Ascend")).replace("/build/ca.crt", str(tmp / "ca.crt"))
        (scripts / name).write_text(text)
    return {"home": home, "scripts": scripts, "venv": venv}


def run_bash(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    return subprocess.run(["bash", "-c", script], env=base | env, capture_output=True, text=True, check=False)


def test_build_env_puts_the_venv_first_and_turns_torch_npu_autoload_off(tmp_path: Path) -> None:
    """Stops 3-5: vllm-ascend's `python3 -m pip show torch-npu`, Megatron-LM's `python3 -m pybind11`, cmake>=3.26
    and the torch_npu auto-load that needs the driver's libascend_hal.so."""
    machine = os.uname().machine
    f = fake_cann(tmp_path, machine)
    out = run_bash(
        f'. {f["scripts"]}/build-env.sh && python3 && echo "AUTOLOAD=$TORCH_DEVICE_BACKEND_AUTOLOAD" '
        '&& echo "LD=$LD_LIBRARY_PATH" && echo "ENV=$TOOLKIT_ENV$NPU_IR_ENV$NNAL_ENV" && echo "VENV=$VIRTUAL_ENV"',
        {"ASCEND_TOOLKIT_HOME": str(f["home"])},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "VENV-PYTHON", "python3 is not the venv's after CANN's set_env.sh"
    assert "AUTOLOAD=0" in lines
    devlib = f["home"] / f"{machine}-linux" / "devlib" / "linux" / machine
    assert f"LD={devlib}" in lines
    assert "ENV=111" in lines, "all three CANN set_env.sh files are sourced"


def test_build_env_without_devlib_still_turns_autoload_off(tmp_path: Path) -> None:
    f = fake_cann(tmp_path, devlib=False)
    out = run_bash(f'. {f["scripts"]}/build-env.sh && echo "AUTOLOAD=$TORCH_DEVICE_BACKEND_AUTOLOAD"',
                   {"ASCEND_TOOLKIT_HOME": str(f["home"])})  # fmt: skip
    assert out.returncode == 0 and "AUTOLOAD=0" in out.stdout
    assert "devlib" in out.stderr


@pytest.mark.parametrize("missing", ["ascend-toolkit/set_env.sh", "nnal/atb/set_env.sh"])
def test_build_env_refuses_a_base_without_cann(tmp_path: Path, missing: str) -> None:
    f = fake_cann(tmp_path)
    (tmp_path / "Ascend" / missing).unlink()
    out = run_bash(f". {f['scripts']}/build-env.sh && echo SHOULD-NOT-RUN", {"ASCEND_TOOLKIT_HOME": str(f["home"])})
    assert out.returncode != 0 and "SHOULD-NOT-RUN" not in out.stdout
    assert missing in out.stderr and "CANN" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_build_env_needs_ascend_toolkit_home(tmp_path: Path) -> None:
    f = fake_cann(tmp_path)
    out = run_bash(f". {f['scripts']}/build-env.sh && echo SHOULD-NOT-RUN", {})
    assert out.returncode != 0 and "ASCEND_TOOLKIT_HOME" in out.stderr and "SHOULD-NOT-RUN" not in out.stdout


def compose_wrapper() -> str:
    """compose.yaml's x-cann-env script as bash receives it (compose turns $$ into $)."""
    data = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return str(data["x-cann-env"]).replace("$$", "$")


def test_every_compose_service_starts_through_the_cann_wrapper() -> None:
    """Stop 9: a service that sets `entrypoint:` replaces the CANN image's, which sourced set_env.sh."""
    data = yaml.safe_load((ROOT / "compose.yaml").read_text())
    wrapper = data["x-cann-env"]
    for name, svc in data["services"].items():
        entrypoint = svc.get("entrypoint") or data["x-ascend-node"]["entrypoint"]
        assert entrypoint[:4] == ["bash", "-c", wrapper, "cann-env"], name


def test_compose_wrapper_sources_cann_and_keeps_the_venv_first(tmp_path: Path) -> None:
    f = fake_cann(tmp_path)
    script = compose_wrapper().replace("/usr/local/Ascend", str(tmp_path / "Ascend"))
    env = {"ASCEND_TOOLKIT_HOME": str(f["home"]), "VIRTUAL_ENV": str(tmp_path / "venv")}
    probe = 'python3; echo "$TOOLKIT_ENV$NPU_IR_ENV$NNAL_ENV"'
    out = subprocess.run(["bash", "-c", script, "cann-env", "bash", "-c", probe],
                         env={"PATH": "/usr/bin:/bin"} | env, capture_output=True, text=True, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["VENV-PYTHON", "111"]
    # Without CANN (the simulated runtime) it runs the command as it is; with a broken CANN tree it stops.
    plain = subprocess.run(["bash", "-c", compose_wrapper(), "cann-env", "echo", "ran"],
                           capture_output=True, text=True, check=False)  # fmt: skip
    assert plain.returncode == 0 and plain.stdout.strip() == "ran"
    (tmp_path / "Ascend" / "nnal" / "atb" / "set_env.sh").unlink()
    broken = subprocess.run(["bash", "-c", script, "cann-env", "echo", "ran"], env={"PATH": "/usr/bin:/bin"} | env,
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert broken.returncode == 1 and "ran" not in broken.stdout and "nnal/atb/set_env.sh is missing" in broken.stderr


def build_runs() -> list[str]:
    build = next(s for s in stages(DOCKERFILE) if s.name == "build")
    return [line for line in build.lines if line.startswith("RUN ")]


def test_every_build_step_that_runs_python_sources_the_build_env_first() -> None:
    runs = build_runs()
    venv_at = next(i for i, r in enumerate(runs) if "-m venv /opt/venv" in r)
    for run in runs[venv_at:]:
        if re.search(r"\bpip\b|python3|pip_install", run):
            body = run.split("python3 -m venv /opt/venv", 1)[-1]
            first_use = min(m.start() for m in re.finditer(r"pip install|pip_install|python3 ", body))
            assert ". /build/npu/build-env.sh" in body[:first_use], run[:120]


def test_setuptools_and_wheel_go_in_before_the_sdists(tmp_path: Path) -> None:
    """Stop 2: antlr4-python3-runtime (sdist) built without isolation needs bdist_wheel."""
    run = next(r for r in build_runs() if "/build/lock/npu.lock" in r)
    awk = re.search(r"awk '([^']+)' /build/lock/npu\.lock\s*> /build/lock/build-tools\.txt", run)
    assert awk, "the build-tools selection from the lock is gone"
    order = [run.index(s) for s in ("-r /build/lock/build-tools.txt", "-r /build/lock/wheels.txt",
                                    "--no-build-isolation -r /build/lock/sdists.txt")]  # fmt: skip
    assert order == sorted(order), "build tools, then every wheel, then the sdists (which build against them)"
    assert "--only-binary :all: -r /build/lock/wheels.txt" in run
    picked = subprocess.run(["awk", awk.group(1), str(ROOT / "docker" / "lock" / "npu.lock")],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    names = {line.split("==")[0] for line in picked.splitlines() if line and not line.startswith(" ")}
    assert names == {"setuptools", "wheel"}
    assert picked.count("--hash=sha256:") >= 2, "the build tools are installed with their hashes too"


def test_lock_split_covers_every_entry_once(tmp_path: Path) -> None:
    lock, names = ROOT / "docker" / "lock" / "npu.lock", ROOT / "docker" / "lock" / "sdist-only.txt"
    awk = NPU / "lock-select.awk"

    def pick(want: int) -> list[str]:
        out = subprocess.run(["awk", "-v", f"want={want}", "-f", str(awk), str(names), str(lock)],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        return [line.split()[0] for line in out.splitlines() if line and not line[0].isspace()]

    wheels, sdists = pick(0), pick(1)
    every = [ln.split()[0] for ln in lock.read_text().splitlines() if ln and not ln[0].isspace() and ln[0] != "#"]
    assert sorted(wheels + sdists) == sorted(every)
    assert {s.split("==")[0] for s in sdists} == {"antlr4-python3-runtime", "arctic-inference"}


def test_source_builds_run_with_the_kernels_on_unless_rehearsing() -> None:
    run = next(r for r in build_runs() if "pip_install ./vllm_ascend" in r)
    assert 'kernels=1 && if [ -n "${REHEARSAL}" ]; then kernels=0; fi' in run
    assert 'COMPILE_CUSTOM_KERNELS="${kernels}"' in run and 'SOC_VERSION="${SOC_VERSION}"' in run


def test_pip_check_is_judged_against_the_accepted_list() -> None:
    runs = build_runs()
    assert any("/build/check/pip_check.py /build/check/accepted-conflicts.toml" in r for r in runs)
    assert not any(re.search(r"pip check(?!\.py)", r) for r in runs), "a bare pip check would fail on accepted ones"


def test_runtime_env_extends_the_base_paths() -> None:
    """Stop 9: ENV PATH / PYTHONPATH replaced the CANN image's (CANN's bin and python/site-packages)."""
    runtime = stages(DOCKERFILE)[-1]
    env = " ".join(line for line in runtime.lines if line.startswith("ENV "))
    assert re.search(r"PATH=/opt/venv/bin:\$\{PATH\}", env)
    assert "PYTHONPATH=/opt/megatron-bridge/src${PYTHONPATH:+:${PYTHONPATH}}" in env


def test_runtime_entrypoint_sources_cann_and_keeps_the_venv_first() -> None:
    runtime = stages(DOCKERFILE)[-1]
    (entry,) = [line for line in runtime.lines if line.startswith("ENTRYPOINT")]
    assert ". /opt/verl-recipe/npu/cann-env.sh && exec" in entry
    assert any(line.startswith("COPY ") and "npu/cann-env.sh" in line for line in runtime.lines)


def test_runtime_smoke_test_imports_for_real() -> None:
    """Stop 7: find_spec passed while `import transformers`, ray_trainer and vLLM's server failed."""
    runtime = stages(DOCKERFILE)[-1]
    smoke = next(line for line in runtime.lines if line.startswith("RUN ") and "import_smoke.py" in line)
    assert "find_spec" not in smoke
    workers = (
        "engine.fsdp.transformer_impl",
        "engine.megatron.transformer_impl",
        "rollout.vllm_rollout.vllm_async_server",
    )
    for module in ("pkg_resources", "transformers", "verl.trainer.main_ppo", "verl.trainer.ppo.ray_trainer",
                   "megatron.core", "mindspeed", "vllm", *(f"verl.workers.{w}" for w in workers)):  # fmt: skip
        assert re.search(rf"\s{re.escape(module)}\s", smoke), module
    # The A3 build imports torch_npu and vllm_ascend's platform for real; only the rehearsal leaves them out.
    real = smoke.split('if [ -z "${REHEARSAL}" ]; then', 1)[1].split("else", 1)[0]
    assert "torch_npu" in real and "vllm_ascend.platform" in real
    # Megatron-Bridge imports transformer_engine unless MindSpeed's adaptor has put its stand-ins in place first.
    assert real.index("mindspeed.megatron_adaptor") < real.index("megatron.bridge")
    assert "AUTOLOAD=0" not in real and "--hide" not in real, "the A3 build hides nothing"


def smoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(NPU / "import_smoke.py"), *args],
                          capture_output=True, text=True, check=False)  # fmt: skip


def test_import_smoke_imports_for_real_and_reports_every_failure() -> None:
    assert smoke("json", "email.message").returncode == 0
    res = smoke("json", "no_such_module_h12", "another_missing_h12")
    assert res.returncode == 1
    assert "FAIL no_such_module_h12" in res.stderr and "FAIL another_missing_h12" in res.stderr
    assert "2 of 3 imports failed" in res.stderr
    # A hidden module is unimportable and invisible to find_spec, as the rehearsal needs for torch_npu.
    hidden = smoke("--hide", "json", "json")
    assert hidden.returncode == 1 and "hidden json" in hidden.stdout
    # Other imports go on (the Zen of Python does not need json).
    assert smoke("--hide", "json", "this").returncode == 0
    assert smoke().returncode == 2 and smoke("--hide").returncode == 2


def test_rehearsal_check_runs_each_service_through_its_own_entrypoint() -> None:
    check = load_by_path("verl_recipe_standin_check", ROOT / "docker/npu-standin/check.py")
    data = yaml.safe_load((ROOT / "compose.yaml").read_text())
    for service in check.SERVICES:
        assert service in data["services"], service
        wrapper = check.wrapper_of(service)
        assert wrapper[:2] == ["bash", "-c"] and wrapper[3] == "cann-env"
        assert "$$" not in wrapper[2] and wrapper[2] == compose_wrapper()
