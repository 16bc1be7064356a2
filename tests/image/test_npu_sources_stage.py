"""The NPU Dockerfile's `sources` stage, built for real from a `make sources` context made of local repositories.
Only that stage can run here: it needs bash, sha256sum and tar, which the Debian base has as the CANN base does,
so `verl-recipe-base` stands in for the CANN image. The later stages need CANN and run on an Ascend build host."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from simkit.paths import load_by_path

ROOT = Path(__file__).resolve().parents[2]
sources = load_by_path("verl_recipe_image_sources2", ROOT / "docker" / "tools" / "sources.py")

pytestmark = pytest.mark.docker
TAG = "verl-recipe-test-npu:sources-stage"


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True)
    return out.stdout.strip()


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("npu-ctx")
    keys = list(yaml.safe_load((ROOT / "docker" / "versions.yaml").read_text())["git_sources"])
    entries = {}
    for key in keys:
        repo = tmp / "mirror" / "github.com" / "acme" / f"{key}.git"
        repo.mkdir(parents=True)
        git(repo, "init", "-q")
        (repo / "setup.py").write_text(f"# {key}\n")
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", key)
        entries[key] = {
            "url": f"https://github.com/acme/{key}.git",
            "ref": "",
            "commit": git(repo, "rev-parse", "HEAD"),
        }
    manifest = tmp / "versions.yaml"
    manifest.write_text(yaml.safe_dump({"schema": 1, "git_sources": entries}))
    base = ["--manifest", str(manifest)]
    dest, lock = tmp / "sources", tmp / "sources.lock"
    assert (
        sources.main([*base, "fetch", "--dest", str(dest), "--lock", str(lock), "--mirror", (tmp / "mirror").as_uri()])
        == 0
    )
    ca = tmp / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    ctx = tmp / "ctx"
    rc = sources.main([*base, "context", "--dest", str(dest), "--lock", str(lock), "--out", str(ctx),
                       "--ca-bundle", str(ca), "--lock-dir", str(ROOT / "docker" / "lock")])  # fmt: skip
    assert rc == 0
    subprocess.run(["bash", "docker/sim-runtime/ensure-base.sh", "verl-recipe-base:bookworm", "bookworm"],
                   cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    yield ctx
    subprocess.run(["docker", "rmi", "-f", TAG], capture_output=True, check=False)


def stopped_containers() -> set[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", "status=exited", "--filter", "status=created"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return set(out.stdout.split())


def build_sources_stage(ctx: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        # --force-rm: the classic builder otherwise keeps the failed step's container (the tampered-tarball test).
        ["docker", "build", "--force-rm", "--network", "none", "--target", "sources", "-t", TAG, "-f",
         str(ROOT / "docker" / "npu" / "Dockerfile"), "--build-arg", "CANN_IMAGE=verl-recipe-base:bookworm", str(ctx)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_sources_stage_unpacks_every_git_source(context: Path) -> None:
    out = build_sources_stage(context)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    keys = set(yaml.safe_load((ROOT / "docker" / "versions.yaml").read_text())["git_sources"])
    listing = subprocess.run(["docker", "run", "--rm", "--network", "none", TAG, "bash", "-c",
                              "cd /build/src && ls"],
                             capture_output=True, text=True, check=True)  # fmt: skip
    assert set(listing.stdout.split()) == keys
    heads = subprocess.run(["docker", "run", "--rm", "--network", "none", TAG, "bash", "-c",
                            "cat /build/src/*/setup.py"], capture_output=True, text=True, check=True)  # fmt: skip
    assert sorted(heads.stdout.split("\n")[:-1]) == sorted(f"# {k}" for k in keys)


def test_sources_stage_refuses_a_tampered_tarball(context: Path) -> None:
    tar = next((context / "sources").glob("verl-*.tar"))
    original = tar.read_bytes()
    try:
        tar.write_bytes(original + b"\0" * 512)
        before = stopped_containers()
        out = build_sources_stage(context)
        assert out.returncode != 0
        assert "FAILED" in out.stdout + out.stderr
        assert stopped_containers() == before, "the failed build left its intermediate container behind"
    finally:
        tar.write_bytes(original)
