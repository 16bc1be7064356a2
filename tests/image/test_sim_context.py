"""The simulated runtime's build context: the local CPU torch wheel by hash, the PyPI fallback, offline wheelhouses."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from simkit.paths import load_by_path

ROOT = Path(__file__).resolve().parents[2]
imagetool = load_by_path("verl_recipe_imagetool", ROOT / "docker" / "tools" / "imagetool.py")


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return path


def test_wheel_with_a_foreign_hash_falls_back_to_the_pypi_lock(
    tmp_path: Path, ca: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    links = tmp_path / "links"
    links.mkdir()
    (links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"not the locked wheel")
    dest = tmp_path / "ctx"
    assert imagetool.sim_context(dest, [links], ca) == 0
    assert (dest / "requirements.lock").read_text() == (ROOT / "docker/sim-runtime/requirements-pypi.lock").read_text()
    assert list((dest / "wheels").iterdir()) == []
    err = capsys.readouterr().err
    assert "WARNING" in err and "CUDA build" in err and str(links) in err
    assert (dest / "ca.crt").read_text() == ca.read_text()


def test_locked_local_wheel_is_used(tmp_path: Path, ca: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    links = tmp_path / "links"
    links.mkdir()
    wheel = links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"stand-in wheel")
    # A copy of the repository's sim-runtime folder whose lock pins exactly this file (no 190 MB wheel needed).
    root = tmp_path / "root"
    shutil.copytree(ROOT / "docker" / "sim-runtime", root / "docker" / "sim-runtime")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    lock_text = f"torch==2.13.0+cpu \\\n    --hash=sha256:{digest}\n"
    (root / "docker" / "sim-runtime" / "requirements.lock").write_text(lock_text)
    monkeypatch.setattr(imagetool, "ROOT", root)
    dest = tmp_path / "ctx"
    assert imagetool.sim_context(dest, [links], ca) == 0
    assert [p.name for p in (dest / "wheels").iterdir()] == [wheel.name]
    assert (dest / "requirements.lock").read_text() == lock_text
    assert (dest / "verl.lock").read_text() == (ROOT / "docker" / "sim-runtime" / "verl.lock").read_text()


def test_incomplete_wheelhouse_names_what_is_missing(tmp_path: Path, ca: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    (house / "ray-0-py3-none-any.whl").write_bytes(b"junk")
    with pytest.raises(imagetool.UsageError, match=r"lacks the locked files of .*make wheels-sim"):
        imagetool.sim_context(tmp_path / "ctx", [], ca, house)


def test_missing_ca_bundle_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(imagetool.UsageError, match="PIP_CA_BUNDLE"):
        imagetool.sim_context(tmp_path / "ctx", [], tmp_path / "absent.pem")
