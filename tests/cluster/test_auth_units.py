"""Ray token authentication without a cluster: the entrypoint's refusals, doctor's report against a real HTTP
server standing in for the head's dashboard, compose.yaml's token mount, and the deploy role's handling of it."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from verl_recipe import doctor
from verl_recipe.cli import main as cli_main
from verl_recipe.cluster.raynode import NodeError, auth_problem, read_token, require_token_auth
from verl_recipe.recipes import recipe_names, service_name

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "ansible" / "roles" / "ray_node"
TOKEN = "a" * 64
SERVICES = {"ray-head", "ray-worker", "doctor", "prepare-data", "runs", *(service_name(r) for r in recipe_names())}


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    f = tmp_path / "ray_auth_token"
    f.write_text(TOKEN + "\n")
    f.chmod(0o600)
    return f


def auth_env(token_file: Path, **extra: str) -> dict[str, str]:
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file), **extra}


def test_token_settings_as_compose_sets_them_pass(token_file: Path) -> None:
    assert auth_problem(auth_env(token_file)) is None
    assert read_token(str(token_file)) == TOKEN, "first line, whitespace trimmed, as Ray reads it"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"RAY_AUTH_MODE": ""}, "RAY_AUTH_MODE=(unset)"),
        ({"RAY_AUTH_MODE": "disabled"}, "RAY_AUTH_MODE=disabled"),
        ({"RAY_AUTH_TOKEN": TOKEN}, "RAY_AUTH_TOKEN is set"),
        ({"RAY_AUTH_TOKEN_PATH": ""}, "RAY_AUTH_TOKEN_PATH is not set"),
        ({"RAY_AUTH_TOKEN_PATH": "/nonexistent/ray_auth_token"}, "/nonexistent/ray_auth_token cannot be read"),
    ],
)
def test_missing_or_unsafe_token_settings_are_refused(token_file: Path, change: dict[str, str], expected: str) -> None:
    problem = auth_problem(auth_env(token_file) | change)
    assert problem is not None and expected in problem and "fix:" in problem
    assert TOKEN not in problem, "the message never carries the token"


def test_a_short_token_is_refused(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_text("abc\n")
    problem = auth_problem({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(short)})
    assert problem is not None and "3 characters" in problem and "ray_node_auth_rotate=true" in problem


def test_node_and_wait_refuse_to_run_without_authentication(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    with pytest.raises(NodeError, match="token authentication"):
        require_token_auth()
    for key, value in {"NODE_IP": "10.9.0.11", "HEAD_ADDR": "10.9.0.11", "RAY_PORT": "1"}.items():
        monkeypatch.setenv(key, value)
    # Exit 2 with one line before any connection is tried (port 1 would fail differently).
    assert cli_main(["wait-cluster", "--nodes", "1", "--deadline", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: RAY_AUTH_MODE=(unset)") and len(err.strip().splitlines()) == 1


# --- doctor against a stand-in dashboard -----------------------------------------------------------------------


class Dashboard(http.server.BaseHTTPRequestHandler):
    mode = "token"
    token = TOKEN

    def do_GET(self) -> None:  # noqa: N802 - the http.server hook
        if self.path == "/api/authentication_mode":
            self._send(200, json.dumps({"authentication_mode": self.mode}))
        elif self.path == "/api/jobs/":
            header = self.headers.get("Authorization", "")
            if self.mode != "token":
                self._send(200, "[]")
            elif not header:
                self._send(401, "Unauthorized: Missing authentication token")
            elif header != f"Bearer {self.token}":
                self._send(403, "Forbidden: Invalid authentication token")
            else:
                self._send(200, "[]")
        else:
            self._send(404, "")

    def _send(self, code: int, body: str) -> None:
        self.send_response(code)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def dashboard() -> Iterator[tuple[str, type[Dashboard]]]:
    handler = type("Handler", (Dashboard,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield str(server.server_address[1]), handler
    finally:
        server.shutdown()
        server.server_close()


def doctor_env(token_file: Path, port: str) -> dict[str, str]:
    return auth_env(token_file, HEAD_ADDR="127.0.0.1", RAY_DASHBOARD_PORT=port)


def by_name(checks: list[doctor.Finding]) -> dict[str, doctor.Finding]:
    return {c.name: c for c in checks}


def test_doctor_reports_authentication_on(token_file: Path, dashboard: tuple[str, type[Dashboard]]) -> None:
    checks = by_name(doctor.check_ray_auth(doctor_env(token_file, dashboard[0])))
    assert checks["ray-auth:client"].status == "ok"
    assert checks["ray-auth:cluster"].status == "ok"
    assert "401 without a token, 200 with this host's" in checks["ray-auth:cluster"].detail


def test_doctor_fails_a_cluster_without_authentication(
    token_file: Path, dashboard: tuple[str, type[Dashboard]]
) -> None:
    dashboard[1].mode = "disabled"
    cluster = by_name(doctor.check_ray_auth(doctor_env(token_file, dashboard[0])))["ray-auth:cluster"]
    assert cluster.status == "fail" and "authentication OFF" in cluster.detail and "deploy.yml" in cluster.fix


def test_doctor_fails_a_token_the_cluster_refuses(token_file: Path, dashboard: tuple[str, type[Dashboard]]) -> None:
    dashboard[1].token = "b" * 64
    checks = doctor.check_ray_auth(doctor_env(token_file, dashboard[0]))
    cluster = by_name(checks)["ray-auth:cluster"]
    assert cluster.status == "fail" and "refuses this host's token (403)" in cluster.detail
    assert all(TOKEN not in c.detail + c.fix and "b" * 64 not in c.detail for c in checks)


def test_doctor_without_a_reachable_head_warns(token_file: Path) -> None:
    cluster = by_name(doctor.check_ray_auth(doctor_env(token_file, "1"), timeout_s=1))["ray-auth:cluster"]
    assert cluster.status == "warn" and "cannot tell" in cluster.detail
    alone = doctor.check_ray_auth({})
    assert [(c.name, c.status) for c in alone] == [("ray-auth", "warn")]


def test_doctor_fails_a_client_without_authentication(dashboard: tuple[str, type[Dashboard]]) -> None:
    checks = by_name(doctor.check_ray_auth({"HEAD_ADDR": "127.0.0.1", "RAY_DASHBOARD_PORT": dashboard[0]}))
    assert checks["ray-auth:client"].status == "fail" and checks["ray-auth:client"].fix
    assert checks["ray-auth:cluster"].status == "ok", "the cluster side is still measured"


# --- compose.yaml and the deploy role --------------------------------------------------------------------------


def compose_config(tmp_path: Path, *files: str) -> dict[str, Any]:
    compose = shutil.which("docker-compose", path=str(Path(sys.executable).parent))
    assert compose, "the dev environment installs Compose v2"
    env_file = tmp_path / "node.env"
    env_file.write_text("VERL_RECIPE_IMAGE=verl-recipe:sim\nSHARED_ROOT=/mnt/shared\nNODE_IP=10.9.0.11\n")
    args = [compose, "--env-file", str(env_file), "--profile", "train", "--profile", "tools"]
    for f in files:
        args += ["-f", str(ROOT / f)]
    out = subprocess.run(
        [*args, "config", "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], "VERL_RECIPE_NODE_ENV": str(env_file)},
    )
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


@pytest.mark.parametrize("files", [("compose.yaml",), ("compose.yaml", "compose.sim.yaml")])
def test_every_service_gets_the_token_as_a_read_only_file(tmp_path: Path, files: tuple[str, ...]) -> None:
    doc = compose_config(tmp_path, *files)
    assert doc["secrets"]["ray_auth_token"]["file"] == "/etc/verl-recipe/ray_auth_token"
    assert set(doc["services"]) == SERVICES
    for name, svc in doc["services"].items():
        env = svc["environment"]
        assert env["RAY_AUTH_MODE"] == "token", name
        assert env["RAY_AUTH_TOKEN_PATH"] == "/run/secrets/ray_auth_token", name
        assert "RAY_AUTH_TOKEN" not in env, f"{name}: a token is never an environment value"
        assert {"source": "ray_auth_token", "target": "/run/secrets/ray_auth_token"} in svc["secrets"], name


def test_the_deploy_role_never_logs_the_token() -> None:
    tasks = yaml.safe_load((ROLE / "tasks" / "main.yml").read_text())
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert "/.secrets/" in defaults["ray_node_auth_token_local"] and defaults["ray_node_auth_rotate"] is False
    touching = [
        t for t in tasks if "ansible.builtin.copy" in t and "auth_token" in json.dumps(t["ansible.builtin.copy"])
    ]
    assert len(touching) == 2, "generate on the control node, install on each host"
    for t in touching:
        assert t.get("no_log") is True, t["name"]
        assert t["ansible.builtin.copy"]["mode"] == "0600", t["name"]
    generate, install = touching
    assert generate["delegate_to"] == "localhost" and generate["run_once"] is True
    assert generate["ansible.builtin.copy"]["force"] == "{{ ray_node_auth_rotate | bool }}", "regenerated on demand"
    assert install["ansible.builtin.copy"]["owner"] == "root" and install["register"] == "ray_node_token_installed"
    starts = [t for t in tasks if "community.docker.docker_compose_v2" in t]
    assert starts and all(
        "ray_node_token_installed is changed" in t["community.docker.docker_compose_v2"]["recreate"] for t in starts
    ), "a new token restarts the nodes"


def test_the_token_folder_is_ignored_by_git_and_never_sent_to_an_image_build() -> None:
    assert "**/.secrets" in (ROOT / ".dockerignore").read_text().splitlines(), "the recipe build's context is the repo"
    for path in (
        "ansible/inventory/sample/.secrets/ray_auth_token",
        "ansible/inventory/mysite/.secrets/ray_auth_token",
    ):
        p = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", path], check=False)
        assert p.returncode == 0, f"{path} would be committed"
