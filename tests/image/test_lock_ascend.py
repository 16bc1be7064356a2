"""`make lock-npu-ascend`: the Ascend-index packages are locked with hashes from ASCEND_INDEX_URL alone, and the main
lock is neither re-resolved nor rewritten (it used to be re-resolved from scratch, moving every other version).
A loopback index serving a test wheel stands in for Ascend's (which this machine cannot reach)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import shutil
import subprocess
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "docker" / "lock"


def make_wheel(folder: Path, name: str, version: str) -> Path:
    dist = f"{name.replace('-', '_')}-{version}"
    wheel = folder / f"{dist}-py3-none-any.whl"
    files = {
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = ""
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(text)}\n"
    files[f"{dist}.dist-info/RECORD"] = record + f"{dist}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel


@pytest.fixture
def index(tmp_path: Path) -> Iterator[str]:
    version = yaml.safe_load((ROOT / "docker" / "versions.yaml").read_text())["python_packages"]["triton_ascend"]
    project = tmp_path / "index" / "simple" / "triton-ascend"
    project.mkdir(parents=True)
    wheel = make_wheel(project, "triton-ascend", str(version))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (project / "index.html").write_text(f'<a href="{wheel.name}#sha256={digest}">{wheel.name}</a>\n')
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path / "index"))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()


def lock_dir_copy(tmp_path: Path) -> Path:
    d = tmp_path / "lock"
    d.mkdir()
    for f in ("npu.in", "npu-ascend.in", "npu.lock", "overrides.txt", "unresolved.txt"):
        shutil.copyfile(LOCK / f, d / f)
    return d


def lock_sh(mode: str, lock_dir: Path, index_url: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LOCK_DIR=str(lock_dir), ASCEND_INDEX_URL=index_url, UV_NO_CACHE="1")
    return subprocess.run(["bash", str(LOCK / "lock.sh"), mode], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip


def test_ascend_lock_is_hashed_and_leaves_the_main_lock_alone(tmp_path: Path, index: str) -> None:
    d = lock_dir_copy(tmp_path)
    before = (d / "npu.lock").read_bytes()
    res = lock_sh("ascend", d, index)
    assert res.returncode == 0, res.stderr
    assert (d / "npu.lock").read_bytes() == before
    text = (d / "npu-ascend.lock").read_text()
    assert "triton-ascend==" in text and "--hash=sha256:" in text
    assert not (d / "unresolved.txt").exists()
    assert "npu.lock unchanged" in res.stdout


def test_ascend_lock_needs_the_index_and_never_prints_it(tmp_path: Path) -> None:
    d = lock_dir_copy(tmp_path)
    res = lock_sh("ascend", d, "")
    assert res.returncode == 2 and "ASCEND_INDEX_URL" in res.stderr
    # An index that does not serve it: one clear failure, the URL (it may carry a token) never echoed.
    secret = "http://user:s3cr3t-token@127.0.0.1:9/simple"
    res = lock_sh("ascend", d, secret)
    assert res.returncode == 1
    assert "s3cr3t-token" not in res.stdout + res.stderr
    assert not (d / "npu-ascend.lock").exists()
