"""`make base-digest` against a loopback registry: bearer challenge, digest recorded in place, moved tags refused,
unreachable registry reported without inventing a digest."""

from __future__ import annotations

import http.server
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from simkit.paths import load_by_path

ROOT = Path(__file__).resolve().parents[2]
# Loaded under a project-specific name: docker/tools is not a package and "digest" is a common module name.
base_digest = load_by_path("verl_recipe_image_digest", ROOT / "docker" / "tools" / "digest.py")

DIGEST = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32


class Registry(http.server.BaseHTTPRequestHandler):
    """Answers HEAD /v2/ascendhub/cann/manifests/<tag> after an anonymous bearer token, like a real registry."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - signature of the base class
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        if self.path.startswith("/token?"):
            body = b'{"token": "t0k"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.end_headers()

    def do_HEAD(self) -> None:  # noqa: N802
        host = self.headers.get("Host", "")  # the loopback address:port this request was sent to
        if self.headers.get("Authorization") != "Bearer t0k":
            self.send_response(401)
            self.send_header(
                "WWW-Authenticate", f'Bearer realm="http://{host}/token",service="reg",scope="repository:x:pull"'
            )
            self.end_headers()
        elif self.path == "/v2/ascendhub/cann/manifests/9.0.0-a3-ubuntu22.04-py3.11":
            assert "application/vnd.oci.image.index.v1+json" in self.headers.get("Accept", "")
            self.send_response(200)
            self.send_header("Docker-Content-Digest", DIGEST)
            self.end_headers()
        else:
            self.send_response(404)
            self.end_headers()


@pytest.fixture
def registry() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "versions.yaml"
    shutil.copyfile(ROOT / "docker" / "versions.yaml", path)
    return path


def test_digest_recorded_in_place(registry: str, manifest: Path) -> None:
    before = manifest.read_text()
    assert base_digest.main(["--manifest", str(manifest), "--registry-url", registry]) == 0
    after = manifest.read_text()
    assert yaml.safe_load(after)["base"]["cann"]["digest"] == DIGEST
    assert yaml.safe_load(after)["base"]["cann"]["digest_a2"] == yaml.safe_load(before)["base"]["cann"]["digest_a2"]
    # Only the digest line changed: every comment of the manifest is kept.
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert len(changed) == 1 and DIGEST in changed[0][1]


def test_moved_tag_is_refused_without_update(registry: str, manifest: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base_digest.record(manifest, "digest", OTHER)
    assert base_digest.main(["--manifest", str(manifest), "--registry-url", registry]) == 1
    assert "moved" in capsys.readouterr().err
    assert yaml.safe_load(manifest.read_text())["base"]["cann"]["digest"] == OTHER
    assert base_digest.main(["--manifest", str(manifest), "--registry-url", registry, "--update"]) == 0
    assert yaml.safe_load(manifest.read_text())["base"]["cann"]["digest"] == DIGEST


def test_unknown_tag_and_unreachable_registry_leave_the_manifest_alone(
    registry: str, manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = manifest.read_text()
    # The a2 tag is not served by this registry: 404.
    assert base_digest.main(["--manifest", str(manifest), "--registry-url", registry, "--soc", "a2"]) == 1
    assert "HTTP 404" in capsys.readouterr().err
    # A closed loopback port: reported as unreachable.
    assert base_digest.main(["--manifest", str(manifest), "--registry-url", "http://127.0.0.1:9"]) == 1
    assert "not reachable" in capsys.readouterr().err
    assert manifest.read_text() == before


def test_bad_soc_is_a_usage_error(manifest: Path) -> None:
    assert base_digest.main(["--manifest", str(manifest), "--soc", "a5"]) == 2


def test_image_name_split() -> None:
    assert base_digest.split_image("swr.cn-south-1.myhuaweicloud.com/ascendhub/cann") == (
        "https://swr.cn-south-1.myhuaweicloud.com",
        "ascendhub/cann",
    )
    assert base_digest.split_image("quay.io/ascend/cann") == ("https://quay.io", "ascend/cann")
    assert base_digest.split_image("ascendai/cann") == ("https://registry-1.docker.io", "ascendai/cann")
