"""The simulated images, built the way CI builds them (`make image-sim`, classic builder): contents, labels,
`verl-recipe doctor --json` inside the image, and the secret canary (never in the history, never in a layer)."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PY = ROOT / ".venv" / "bin" / "python"
RUNTIME = "verl-recipe-runtime:sim"
IMAGE = "verl-recipe:sim"
WHEELHOUSE = ROOT / ".cache" / "wheels-sim"

pytestmark = pytest.mark.docker


def sh(*cmd: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(list(cmd), cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    if check and out.returncode != 0:
        pytest.fail(f"{' '.join(cmd[:4])} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out


@pytest.fixture(scope="module")
def sim_image() -> str:
    # Uses the Docker build cache when it is there; a fresh machine builds the base, runtime and recipe layer.
    sh("make", "--no-print-directory", "image-sim")
    return IMAGE


def doctor_in_image(image: str, shared: Path, simulated: str) -> subprocess.CompletedProcess[str]:
    """Run the doctor as compose would: node.env variables, shared storage mounted at the same path."""
    env = {
        "VERL_RECIPE_SIMULATED": simulated,
        "HCCL_SOCKET_IFNAME": "eth0",
        "GLOO_SOCKET_IFNAME": "eth0",
        "TP_SOCKET_IFNAME": "eth0",
        "SHARED_ROOT": "/mnt/shared",
        "MODEL_PATH": "/mnt/shared/models/m",
        "TRAIN_FILES": "/mnt/shared/data/train.parquet",
        "VAL_FILES": "/mnt/shared/data/test.parquet",
        "CKPT_DIR": "/mnt/shared/checkpoints",
    }
    flags = [x for k, v in env.items() for x in ("-e", f"{k}={v}")]
    # The default bridge gives the container an eth0, as the cluster NIC; the doctor sends nothing over it.
    cmd = ["docker", "run", "--rm", "-v", f"{shared}:/mnt/shared", *flags, image]
    # `verl-recipe doctor` once the CLI is wired to the module; the module itself until then.
    probe = sh("docker", "run", "--rm", "--network", "none", image, "verl-recipe", "doctor", "--help", check=False)
    entry = ["verl-recipe", "doctor"] if probe.returncode == 0 else ["python", "-m", "verl_recipe.doctor"]
    return sh(*cmd, *entry, "--json", check=False)


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    for d in ("models/m", "data", "checkpoints"):
        (tmp_path / d).mkdir(parents=True)
    for f in ("data/train.parquet", "data/test.parquet"):
        (tmp_path / f).write_text("x")
    return tmp_path


def test_doctor_reports_no_npu_as_expected(sim_image: str, shared: Path) -> None:
    out = doctor_in_image(sim_image, shared, "1")
    doc = json.loads(out.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert out.returncode == 0, out.stdout
    assert doc["ok"] is True and doc["simulated"] is True
    assert checks["npu"]["status"] == "expected" and "no NPU" in checks["npu"]["detail"]
    assert checks["image-record"]["status"] == "ok"
    manifest = yaml.safe_load((ROOT / "docker" / "versions.yaml").read_text())
    assert checks["package:ray"] == {
        "name": "package:ray",
        "status": "ok",
        "detail": manifest["python_packages"]["ray"],
        "fix": "",
    }
    assert checks["package:verl"]["status"] == "ok"


def test_doctor_in_real_mode_fails_on_the_sim_image(sim_image: str, shared: Path) -> None:
    out = doctor_in_image(sim_image, shared, "0")
    doc = json.loads(out.stdout)
    checks = {c["name"]: c for c in doc["checks"]}
    assert out.returncode == 1 and doc["exit_code"] == 1
    assert checks["npu"]["status"] == "fail" and checks["npu"]["fix"]
    assert checks["driver"]["status"] == "fail"


def test_image_records_what_it_contains(sim_image: str) -> None:
    def cat(path: str) -> str:
        return sh("docker", "run", "--rm", "--network", "none", sim_image, "cat", path).stdout

    assert cat("/opt/verl-recipe/versions.yaml") == (ROOT / "docker" / "versions.yaml").read_text()
    record = json.loads(cat("/opt/verl-recipe/image-manifest.json"))
    manifest = yaml.safe_load((ROOT / "docker" / "versions.yaml").read_text())
    assert record["pins"]["ray"] == {
        "pin": manifest["python_packages"]["ray"],
        "installed": manifest["python_packages"]["ray"],
    }
    assert record["freeze_tool"] == "pip freeze --all"
    freeze = cat("/opt/verl-recipe/pip-freeze.txt").splitlines()
    assert f"ray=={manifest['python_packages']['ray']}" in freeze
    assert f"verl=={manifest['git_sources']['verl']['version']}" in freeze
    assert not any(line.startswith("torch-npu") or line.startswith("torch_npu") for line in freeze)
    assert any(line.startswith(("verl-recipe==", "verl-recipe @ ")) for line in freeze)


def test_runtime_has_no_build_leftovers(sim_image: str) -> None:
    script = (
        "for t in gcc cc g++ git make; do command -v $t && exit 1; done; "
        "test ! -e /tmp/build && test ! -e /root/.cache/pip && test ! -e /tmp/verl-recipe-src && "
        "test ! -e /var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_InRelease"
    )
    out = sh("docker", "run", "--rm", "--network", "none", sim_image, "bash", "-c", script, check=False)
    assert out.returncode == 0, f"build leftovers in the runtime: {out.stdout}"


def test_ray_head_runs_a_task_in_the_image(sim_image: str) -> None:
    # Everything Ray needs to run is in the image: a head with its dashboard, a task scheduled and returned.
    script = (
        "ray start --head --disable-usage-stats --num-cpus 2 --dashboard-host 127.0.0.1 >/tmp/ray.log 2>&1 "
        "|| { tail -20 /tmp/ray.log; exit 1; }; "
        "python -c \"import ray; ray.init(address='auto'); "
        "print('answer', ray.get(ray.remote(lambda: 41 + 1).remote()))\"; rc=$?; ray stop >/dev/null 2>&1; exit $rc"
    )
    out = sh("docker", "run", "--rm", "--network", "none", "--shm-size", "1g", sim_image, "bash", "-c", script)
    assert "answer 42" in out.stdout


@pytest.mark.parametrize("image", [RUNTIME, IMAGE])
def test_oci_labels(sim_image: str, image: str) -> None:
    labels = json.loads(sh("docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image).stdout)
    revision = labels["org.opencontainers.image.revision"]
    # The commit the image was built from: HEAD or, when commits landed since the build, one of its ancestors.
    assert sh("git", "merge-base", "--is-ancestor", revision, "HEAD", check=False).returncode == 0, revision
    assert labels["org.opencontainers.image.created"].endswith("Z")
    digest = hashlib.sha256((ROOT / "docker" / "versions.yaml").read_bytes()).hexdigest()
    assert labels["io.verl-recipe.manifest-sha256"] == digest


def test_recipe_layer_builds_offline_on_the_runtime(sim_image: str) -> None:
    # The recipe layer is built with --network none (mk/image.mk), so any download in it would have failed the build.
    mk = (ROOT / "mk" / "image.mk").read_text()
    assert "docker build --network none -t $(RECIPE_IMAGE)" in mk
    history = sh("docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", sim_image).stdout
    runtime = sh("docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", RUNTIME).stdout
    assert history.endswith(runtime)  # the recipe image is the runtime plus its own few steps
    assert len(history.splitlines()) - len(runtime.splitlines()) <= 20


# --- the secret canary ------------------------------------------------------------------------------------------


def stream_contains(fh: IO[bytes], needle: bytes) -> bool:
    tail = b""
    while chunk := fh.read(1 << 20):
        if needle in tail + chunk:
            return True
        tail = chunk[-(len(needle) - 1) :]
    return False


def saved_image_contains(image: str, needle: bytes, workdir: Path) -> list[str]:
    """Every file of `docker save IMAGE` (configs, manifests, every file inside every layer) that holds needle."""
    archive = workdir / "image.tar"
    with archive.open("wb") as fh:
        subprocess.run(["docker", "save", image], stdout=fh, check=True)
    hits: list[str] = []
    try:
        with tarfile.open(archive) as outer:
            for member in outer:
                f = outer.extractfile(member) if member.isfile() else None
                if f is None:
                    continue
                if member.name.endswith(".tar") or member.name.startswith("blobs/"):
                    try:
                        with tarfile.open(fileobj=f, mode="r|") as layer:
                            for inner in layer:
                                g = layer.extractfile(inner) if inner.isfile() else None
                                if g is not None and stream_contains(g, needle):
                                    hits.append(f"{member.name}:{inner.name}")
                        continue
                    except tarfile.ReadError:
                        f = outer.extractfile(member)
                        assert f is not None
                if stream_contains(f, needle):
                    hits.append(member.name)
    finally:
        archive.unlink()
    return hits


@pytest.fixture
def canary(tmp_path: Path) -> Iterator[dict[str, str]]:
    token = f"verlrecipecanary{secrets.token_hex(8)}"
    names = {
        "token": token,
        "runtime": f"verl-recipe-test-canary:runtime-{token[-8:]}",
        "control": f"verl-recipe-test-canary:build-stage-{token[-8:]}",
        "ctx": str(tmp_path / "ctx"),
    }
    yield names
    for key in ("runtime", "control"):
        subprocess.run(["docker", "rmi", "-f", names[key]], capture_output=True, check=False)


def test_pip_index_secret_never_reaches_the_image(sim_image: str, canary: dict[str, str], tmp_path: Path) -> None:
    token = canary["token"]
    # A mirror URL with credentials. The offline wheelhouse makes pip never contact it (loopback, closed port).
    url = f"https://verl-recipe:{token}@127.0.0.1:9/simple"
    sh("make", "--no-print-directory", "wheels-sim", f"SIM_WHEELHOUSE={WHEELHOUSE}")
    env = dict(os.environ, PIP_INDEX_URL=url)
    build = sh(
        "make", "--no-print-directory", "image-runtime-sim", f"SIM_RUNTIME_IMAGE={canary['runtime']}",
        f"SIM_WHEELHOUSE={WHEELHOUSE}", f"IMAGE_BUILD_DIR={canary['ctx']}", env=env,
    )  # fmt: skip
    # Positive control: the throwaway build stage (same inputs, so from the cache) does carry the canary, which
    # proves it reached the build and that the detector below can see it.
    args = sh(str(PY), "docker/tools/imagetool.py", "build-args", "sim-runtime").stdout.split()
    sh("docker", "build", "--target", "build", "-t", canary["control"], "-f", "docker/sim-runtime/Dockerfile",
       *args, "--build-arg", "PIP_INDEX_URL", "--build-arg", "PIP_NO_INDEX=1", f"{canary['ctx']}/sim-runtime",
       env=env)  # fmt: skip
    control = sh("docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", canary["control"]).stdout
    assert token in control
    # The image itself: not in any history line, not in any file of any layer, not in the build log.
    history = sh("docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", canary["runtime"]).stdout
    assert history.strip() and token not in history
    inspect = sh("docker", "image", "inspect", canary["runtime"]).stdout
    assert token not in inspect
    assert saved_image_contains(canary["runtime"], token.encode(), tmp_path) == []
    assert token not in build.stdout + build.stderr
    # Same locks, another route (offline wheelhouse instead of the index): the same package set (reproducibility).
    for record in ("runtime-pip-freeze.txt", "runtime-dpkg.txt"):
        ours, theirs = (
            sh("docker", "run", "--rm", "--network", "none", image, "cat", f"/opt/verl-recipe/{record}").stdout
            for image in (canary["runtime"], RUNTIME)
        )
        assert ours.strip() and ours == theirs, record
