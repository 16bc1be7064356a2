"""Alerts out to a person: each alert of the health rules, as JSON, to the site's command (ALERT_COMMAND, on its
standard input, never through a shell) and webhook (ALERT_WEBHOOK, a POST; a bearer token only from
ALERT_WEBHOOK_TOKEN_FILE). One thread delivers from a bounded queue, so a slow or hung receiver never holds up the
watch; every delivery is bounded in time (contracts/alerts.py), and a failure is one line that names the receiver,
never its token, and the run goes on (docs/watch.md)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..contracts.alerts import COMMAND_TIMEOUT_S, QUEUE_MAX, WEBHOOK_TIMEOUT_S, shown_url, webhook_problem

_STOP = object()
_TOKEN_MAX_BYTES = 4096


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is refused: urllib would carry the Authorization header (the token) to wherever it points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def read_token(path: str) -> str:
    """The token file's first line, trimmed; OSError or ValueError (said without its content) when unusable."""
    with open(path, "rb") as f:
        raw = f.read(_TOKEN_MAX_BYTES)
    token = raw.decode("utf-8", errors="strict").splitlines()[0].strip() if raw.strip() else ""
    if not token or any(c.isspace() or ord(c) < 32 for c in token):
        raise ValueError("its first line is not one token")
    return token


def alert_payload(alert: dict[str, Any], run_dir: Path | None) -> bytes:
    """The JSON a receiver gets: the alert as alerts.json holds it, and the run it belongs to. No setting and no
    environment goes in, so no secret can."""
    body = {"source": "verl-recipe", **alert}
    if run_dir is not None:
        body["run_dir"] = str(run_dir)
    return json.dumps(body, sort_keys=True, default=str).encode()


def run_command(argv: list[str], payload: bytes, timeout_s: float = COMMAND_TIMEOUT_S) -> str | None:
    """The site command with the alert on its stdin; None when it exited 0, else why not (one phrase). A command
    still running at the bound is killed with everything it started (its own process group)."""
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
    except OSError as exc:
        return f"could not start ({exc.strerror or type(exc).__name__})"
    try:
        _, err = proc.communicate(payload, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return f"did not end within {timeout_s:g} s (killed)"
    if proc.returncode:
        said = err.decode(errors="replace").strip().splitlines()
        return f"exited {proc.returncode}" + (f": {said[-1][:160]}" if said else "")
    return None


def post_webhook(url: str, payload: bytes, token: str | None, timeout_s: float = WEBHOOK_TIMEOUT_S) -> str | None:
    """POST the alert; None on a 2xx answer, else why not. TLS is verified (urllib's default context)."""
    headers = {"Content-Type": "application/json", "User-Agent": "verl-recipe-alert"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=payload, headers=headers, method="POST")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=timeout_s) as answer:
            status = answer.status
    except urllib.error.HTTPError as exc:
        return f"answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"not reached ({type(reason).__name__}: {str(reason)[:120]})"
    return None if 200 <= status < 300 else f"answered HTTP {status}"


class Notifier:
    """Sends each alert to the site's command and webhook from one thread. `send` never blocks; `close` waits a
    bounded time for what is queued (the last alert of a run that a rule stopped still goes out)."""

    def __init__(
        self,
        command: list[str],
        webhook: str,
        token_file: str,
        run_dir: Path | None = None,
        say: Callable[[str], None] = print,
        command_timeout_s: float = COMMAND_TIMEOUT_S,
        webhook_timeout_s: float = WEBHOOK_TIMEOUT_S,
    ) -> None:
        self.command, self.webhook, self.token_file = list(command), webhook, token_file
        self.run_dir, self._say = run_dir, say
        self.command_timeout_s, self.webhook_timeout_s = command_timeout_s, webhook_timeout_s
        self.queue: queue.Queue[Any] = queue.Queue(QUEUE_MAX)
        self.dropped = 0
        self._thread: threading.Thread | None = None
        if webhook and webhook_problem(webhook):  # validate refuses it; a launch without validate is told once
            what, _fix = webhook_problem(webhook) or ("", "")
            say(f"alert webhook {shown_url(webhook)}: not used ({what})")
            self.webhook = ""

    @classmethod
    def from_values(cls, values: dict[str, Any], run_dir: Path | None, say: Callable[[str], None]) -> Notifier:
        return cls(
            list(values.get("ALERT_COMMAND") or []),
            str(values.get("ALERT_WEBHOOK") or ""),
            str(values.get("ALERT_WEBHOOK_TOKEN_FILE") or ""),
            run_dir,
            say,
        )

    def say(self, line: str) -> None:
        """One line through the launcher's own (stderr and train.log); a log already closed loses only the line."""
        with contextlib.suppress(ValueError, OSError):
            self._say(line)

    @property
    def active(self) -> bool:
        return bool(self.command or self.webhook)

    def send(self, alert: dict[str, Any]) -> None:
        if not self.active:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._deliver_all, name="alert-delivery", daemon=True)
            self._thread.start()
        try:
            self.queue.put_nowait(alert)
        except queue.Full:
            self.dropped += 1
            self.say(f"alert delivery: {QUEUE_MAX} alerts still waiting; alert {alert.get('rule')} not sent")

    def close(self, wait_s: float | None = None) -> None:
        """Let the queued alerts go out, waiting at most `wait_s` (default: one command and one webhook bound)."""
        if self._thread is None:
            return
        with contextlib.suppress(queue.Full):
            self.queue.put(_STOP, timeout=1.0)
        limit = self.command_timeout_s + self.webhook_timeout_s + 1 if wait_s is None else wait_s
        self._thread.join(limit)
        if self._thread.is_alive():
            self.say(f"alert delivery: still busy after {limit:g} s at the end of the run; the rest is not sent")

    def _deliver_all(self) -> None:
        while True:
            alert = self.queue.get()
            if alert is _STOP:
                return
            try:
                self.deliver(alert)
            except Exception as exc:  # noqa: BLE001 - a receiver's failure never ends the watch or the run
                self.say(f"alert delivery: failed ({type(exc).__name__})")

    def deliver(self, alert: dict[str, Any]) -> None:
        payload = alert_payload(alert, self.run_dir)
        rule = alert.get("rule", "?")
        if self.command:
            why = run_command(self.command, payload, self.command_timeout_s)
            if why:
                self.say(f"alert command {os.path.basename(self.command[0])}: alert {rule} not delivered, it {why}")
        if self.webhook:
            token = None
            if self.token_file:
                try:
                    token = read_token(self.token_file)
                except (OSError, ValueError, UnicodeDecodeError) as exc:
                    why = exc.strerror if isinstance(exc, OSError) else str(exc)
                    self.say(f"alert webhook: token file {self.token_file} unusable ({why}); alert {rule} not sent")
                    return
            why = post_webhook(self.webhook, payload, token, self.webhook_timeout_s)
            if why:
                self.say(f"alert webhook {shown_url(self.webhook)}: alert {rule} not delivered, it {why}")
