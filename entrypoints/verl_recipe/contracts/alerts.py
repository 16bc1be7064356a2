"""Where the health rules' alerts go besides stderr and alerts.json: a site command (ALERT_COMMAND) and a webhook
(ALERT_WEBHOOK, with a bearer token only from ALERT_WEBHOOK_TOKEN_FILE). What these settings may be, as validate
checks them and watch/notify.py relies on them, and the fixed bounds of each delivery (docs/watch.md)."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import parse_qsl, urlsplit

# Each delivery is bounded: a command that has not ended is killed, a webhook that has not answered is given up.
COMMAND_TIMEOUT_S = 30.0
WEBHOOK_TIMEOUT_S = 10.0
# Alerts wait in a bounded queue for the one delivery thread; beyond it an alert is dropped with one line.
QUEUE_MAX = 64
# A query parameter with any of these in its name carries a credential: it belongs in the token file.
_SECRET_PARAMS = ("token", "key", "secret", "password", "passwd", "sig", "auth", "credential")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def shown_url(url: str) -> str:
    """The URL as a line may show it: no user part, no query values (either could hold a credential)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        # unparsable: its text without a user part or query, cut short
        text = re.sub(r"//[^/@]*@", "//", url).split("?", 1)[0]
        return text[:80] + ("?..." if "?" in url else "")
    host = f"[{host}]" if ":" in host else host
    query = "?" + "&".join(f"{k}=..." for k, _ in parse_qsl(parts.query, keep_blank_values=True)) if parts.query else ""
    return f"{parts.scheme}://{host}{port}{parts.path}{query}"


def webhook_problem(url: str) -> tuple[str, str] | None:
    """Why ALERT_WEBHOOK cannot be used, as (what is wrong, fix), or None."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        _ = parts.port  # a port that is no number raises here
    except ValueError as exc:
        return f"is not a URL ({exc})", "give an https URL such as https://alerts.example.org/hook"
    if parts.username is not None or parts.password is not None:
        return (
            "carries a user or password in the URL, which the run record and logs would show",
            "put the token in a root-only file named by ALERT_WEBHOOK_TOKEN_FILE (sent as a bearer token)",
        )
    secret = [
        k for k, _ in parse_qsl(parts.query, keep_blank_values=True) if any(w in k.lower() for w in _SECRET_PARAMS)
    ]
    if secret:
        return (
            f"carries a credential in its query ({', '.join(sorted(set(secret)))}), which the run record would show",
            "put the token in a root-only file named by ALERT_WEBHOOK_TOKEN_FILE (sent as a bearer token)",
        )
    if not host:
        return "names no host", "give an https URL such as https://alerts.example.org/hook"
    if parts.scheme == "https":
        return None
    if parts.scheme == "http" and is_loopback(host):
        return None
    if parts.scheme == "http":
        return (
            "is plain http to another host: the alert and its token would cross the network unencrypted",
            "use https (its certificate is verified); plain http is only for a receiver on this host (127.0.0.1)",
        )
    return f"has scheme {parts.scheme or '(none)'!r}", "use an https URL (or http to 127.0.0.1 for a local receiver)"


def alert_problems(values: dict[str, object]) -> list[tuple[str, str, str]]:
    """The alert settings' problems as (subject, what is wrong, fix); validate refuses any."""
    out: list[tuple[str, str, str]] = []
    url = str(values.get("ALERT_WEBHOOK") or "")
    token_file = str(values.get("ALERT_WEBHOOK_TOKEN_FILE") or "")
    raw = values.get("ALERT_COMMAND")
    command = [str(c) for c in raw] if isinstance(raw, list) else []
    if url:
        problem = webhook_problem(url)
        if problem:
            out.append((f"ALERT_WEBHOOK={shown_url(url)}", *problem))
    if token_file and not url:
        out.append(
            (
                f"ALERT_WEBHOOK_TOKEN_FILE={token_file}",
                "names a token for a webhook, but ALERT_WEBHOOK is empty",
                "set ALERT_WEBHOOK to the receiver's https URL, or leave ALERT_WEBHOOK_TOKEN_FILE empty",
            )
        )
    if token_file and not token_file.startswith("/"):
        out.append(
            (
                f"ALERT_WEBHOOK_TOKEN_FILE={token_file}",
                "must be an absolute path (the launcher reads it wherever it runs)",
                "give the absolute path of a root-only file holding the token",
            )
        )
    program = command[0] if command else ""
    if "/" in program and not program.startswith("/"):
        out.append(
            (
                f"ALERT_COMMAND={','.join(command)}",
                f"runs {program}, a relative path that depends on the folder the launcher starts in",
                "give the program as an absolute path (or a name on PATH), e.g. /usr/local/bin/page-oncall",
            )
        )
    return out
