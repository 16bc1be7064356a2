"""Alerts that reach a person (watch/notify.py): the site command gets each alert as JSON on its standard input, the
webhook gets it as a POST (a server on 127.0.0.1 here) with the token from its file as a bearer token; a failure,
a timeout or a full queue is one line and never holds up the watch or the run; no token in any line or payload."""

from __future__ import annotations

import http.server
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from verl_recipe.contracts.alerts import QUEUE_MAX, shown_url
from verl_recipe.watch.notify import Notifier, alert_payload, post_webhook, run_command

from tests.unit.fixtures import install_fake_verl, make_shared, set_args
from tests.unit.helpers import run

ALERT = {
    "rule": "stall",
    "metric": "time since the last step",
    "value": 61.0,
    "threshold": "HEALTH_STALL_FACTOR=5 x median step 2.4 s = 12 s",
    "step": 3,
    "time_utc": "2026-01-01T00:00:00Z",
    "line": "alert stall: no step for 61 s after step 3; stopped making progress: a3-02 rank 1 (WorkerDict_0:1)",
    "stops_run": True,
}
TOKEN = "tok-" + "7" * 40


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "hook.py"
    path.write_text(body)
    return [sys.executable, str(path)]


# The site command the issue asks for: it writes its standard input to a file.
WRITES_STDIN = "import sys, pathlib\npathlib.Path(sys.argv[1]).write_bytes(sys.stdin.buffer.read())\n"


def test_the_command_gets_the_alert_as_json_on_stdin(tmp_path: Path) -> None:
    out = tmp_path / "got.json"
    said: list[str] = []
    n = Notifier([*script(tmp_path, WRITES_STDIN), str(out)], "", "", tmp_path / "run", said.append)
    n.send(ALERT)
    n.close()
    got = json.loads(out.read_text())
    assert got["rule"] == "stall" and got["step"] == 3 and got["stops_run"] is True
    assert got["run_dir"] == str(tmp_path / "run") and got["source"] == "verl-recipe"
    assert "a3-02 rank 1" in got["line"] and said == []


def test_a_failing_or_hanging_command_is_one_line_and_bounded(tmp_path: Path) -> None:
    said: list[str] = []
    fails = Notifier(
        script(tmp_path, "import sys\nprint('pager down', file=sys.stderr)\nsys.exit(3)\n"), "", "", None, said.append
    )
    fails.send(ALERT)
    fails.close()
    exe = Path(sys.executable).name
    assert said == [f"alert command {exe}: alert stall not delivered, it exited 3: pager down"]
    said.clear()
    hangs = Notifier(
        script(tmp_path, "import time\ntime.sleep(60)\n"), "", "", None, said.append, command_timeout_s=0.5
    )
    start = time.monotonic()
    hangs.send(ALERT)  # returns at once: the watch is never held up
    assert time.monotonic() - start < 0.2
    hangs.close()
    assert time.monotonic() - start < 10
    assert len(said) == 1 and "did not end within 0.5 s (killed)" in said[0]
    said.clear()
    missing = Notifier(["/nonexistent/page-oncall"], "", "", None, said.append)
    missing.send(ALERT)
    missing.close()
    assert len(said) == 1 and "page-oncall: alert stall not delivered, it could not start" in said[0]


def test_run_command_never_uses_a_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # one argument holding shell syntax reaches the program as text; no shell runs it
    argv = [*script(tmp_path, WRITES_STDIN), "x; touch shell-ran"]
    assert run_command(argv, b"{}") is None
    assert not (tmp_path / "shell-ran").exists() and (tmp_path / "x; touch shell-ran").read_bytes() == b"{}"


class Receiver:
    """An HTTP server on 127.0.0.1 in a thread: what it got, and the answer it gives."""

    def __init__(self, status: int = 200, location: str = "") -> None:
        self.got: list[dict[str, Any]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.got.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST  # noqa: N815 - a followed redirect would arrive as a GET

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def token_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "alert_token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    yield path


def test_the_webhook_gets_the_alert_with_the_token_from_its_file(tmp_path: Path, token_file: Path) -> None:
    said: list[str] = []
    with Receiver() as rx:
        n = Notifier([], f"{rx.url}/hook", str(token_file), tmp_path, said.append)
        n.send(ALERT)
        n.close()
    (req,) = rx.got
    assert req["path"] == "/hook" and req["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert req["headers"]["Content-Type"] == "application/json"
    body = json.loads(req["body"])
    assert body["rule"] == "stall" and TOKEN not in req["body"].decode(), "the alert JSON holds no secret"
    assert said == []


def test_a_webhook_that_fails_is_one_line_without_the_token(tmp_path: Path, token_file: Path) -> None:
    said: list[str] = []
    with Receiver(status=500) as rx:
        n = Notifier([], f"{rx.url}/hook?team=ml", str(token_file), None, said.append)
        n.send(ALERT)
        n.close()
    assert len(rx.got) == 1 and len(said) == 1
    assert said[0] == f"alert webhook {rx.url}/hook?team=...: alert stall not delivered, it answered HTTP 500"
    # nobody listening: refused at once, one line
    said.clear()
    n = Notifier([], "http://127.0.0.1:9/hook", str(token_file), None, said.append)
    n.send(ALERT)
    n.close()
    assert len(said) == 1 and "not reached" in said[0] and TOKEN not in said[0]


def test_a_redirect_is_not_followed_so_the_token_goes_nowhere_else(tmp_path: Path, token_file: Path) -> None:
    with Receiver() as elsewhere, Receiver(status=302, location="") as first:
        said: list[str] = []
        redirecting = Receiver(status=307, location=f"{elsewhere.url}/stolen")
        with redirecting:
            assert post_webhook(f"{redirecting.url}/hook", b"{}", TOKEN) == "answered HTTP 307"
        n = Notifier([], f"{first.url}/hook", str(token_file), None, said.append)
        n.send(ALERT)
        n.close()
    assert elsewhere.got == [], "nothing reached the redirect's target"
    assert len(said) == 1 and "answered HTTP 302" in said[0]


def test_an_unusable_token_file_is_said_and_nothing_is_sent(tmp_path: Path) -> None:
    said: list[str] = []
    with Receiver() as rx:
        n = Notifier([], f"{rx.url}/hook", str(tmp_path / "absent"), None, said.append)
        n.send(ALERT)
        n.close()
    assert rx.got == [] and len(said) == 1 and "token file" in said[0] and "not sent" in said[0]


def test_a_webhook_that_validate_would_refuse_is_not_used(tmp_path: Path) -> None:
    said: list[str] = []
    n = Notifier([], "http://alerts.example.org/hook", "", None, said.append)
    assert not n.active and said == [
        "alert webhook http://alerts.example.org/hook: not used (is plain http to another host: the alert and its "
        "token would cross the network unencrypted)"
    ]


def test_the_queue_is_bounded_and_a_full_one_drops_with_a_line(tmp_path: Path) -> None:
    said: list[str] = []
    gate = tmp_path / "gate"
    slow = script(tmp_path, f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)\n")
    n = Notifier(slow, "", "", None, said.append)
    start = time.monotonic()
    for _ in range(QUEUE_MAX + 5):
        n.send(ALERT)
    assert time.monotonic() - start < 1.0, "sending never waits for the receiver"
    gate.touch()
    n.close(wait_s=120)  # 65 short commands to run once the gate opens
    dropped = [line for line in said if "alerts still waiting" in line]
    # the thread holds one, the queue QUEUE_MAX: the rest (4, or 5 before the thread took its first) are dropped
    assert 4 <= len(dropped) <= 5 and n.dropped == len(dropped) and len(said) == len(dropped)


def test_the_end_of_a_run_waits_a_bounded_time_for_what_is_queued(tmp_path: Path) -> None:
    said: list[str] = []
    n = Notifier(script(tmp_path, "import time\ntime.sleep(30)\n"), "", "", None, said.append, command_timeout_s=2)
    n.send(ALERT)
    start = time.monotonic()
    n.close(wait_s=0.3)
    assert time.monotonic() - start < 2
    assert said == ["alert delivery: still busy after 0.3 s at the end of the run; the rest is not sent"]


def test_the_payload_is_the_alert_and_the_run() -> None:
    body = json.loads(alert_payload(ALERT, Path("/runs/x")))
    assert set(body) == {*ALERT, "source", "run_dir"}
    assert shown_url("https://u:p@h.example:8443/a?key=v") == "https://h.example:8443/a?key=..."


# verl's stand-in: a NaN loss at step 3, then waits to be stopped.
FAKE_NAN = """
import json, os, time
with open(os.environ["VERL_FILE_LOGGER_PATH"], "w") as f:
    for k in range(1, 5):
        data = {"timing_s/step": 0.1, "actor/pg_loss": None if k == 3 else 0.1}
        f.write(json.dumps({"step": k, "data": data}) + "\\n")
        f.flush()
time.sleep(120)
"""


def test_a_launch_sends_its_alerts_to_the_site_command_and_webhook(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, token_file: Path
) -> None:
    install_fake_verl(tmp_path, monkeypatch, FAKE_NAN)
    paths = make_shared(tmp_path / "shared")
    out = tmp_path / "paged.json"
    hook = tmp_path / "page.py"
    hook.write_text(WRITES_STDIN)
    with Receiver() as rx:
        res = run(
            capsys, "launch", "qwen3.5-397b", *set_args(paths), "--set", "HEALTH_STOP=nan",
            "--set", f"ALERT_COMMAND={sys.executable},{hook},{out}",
            "--set", f"ALERT_WEBHOOK={rx.url}/hook", "--set", f"ALERT_WEBHOOK_TOKEN_FILE={token_file}",
        )  # fmt: skip
    assert res.rc == 5, res.err
    paged = json.loads(out.read_text())
    assert paged["rule"] == "nan" and paged["metric"] == "actor/pg_loss" and paged["stops_run"] is True
    (req,) = rx.got
    assert json.loads(req["body"])["rule"] == "nan" and req["headers"]["Authorization"] == f"Bearer {TOKEN}"
    (run_dir,) = (Path(paths["LOG_DIR"]) / "verl_grpo_qwen3_5" / "qwen3.5-397b" / "runs").iterdir()
    for f in run_dir.iterdir():
        if f.is_file():
            assert TOKEN not in f.read_text(errors="replace"), f"the token is in {f.name}"
    assert TOKEN not in res.out + res.err
