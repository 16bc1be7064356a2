"""Asking every host at once over SSH (host keys checked) and naming what SSH said when a host did not answer."""

from __future__ import annotations

import concurrent.futures
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .common import problem, shown, utc_now
from .request import Request
from .script import ANSWER_TIMEOUT_S, CONNECT_TIMEOUT_S, FACT_SCRIPT

# --------------------------------------------------------------------------------------------------------------
# SSH: one round trip per host, all hosts at once


@dataclass
class Reply:
    address: str
    rc: int | None  # None: no answer in time
    stdout: str
    stderr: str
    read_at: str


def ssh_argv(req: Request, address: str) -> list[str]:
    argv = [
        req.ssh,
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        f"UserKnownHostsFile={req.known_hosts_path}",
        "-o",
        f"ConnectTimeout={CONNECT_TIMEOUT_S}",
        "-p",
        str(req.port),
        "-l",
        req.user,
    ]
    if req.key:
        argv += ["-i", str(Path(req.key).expanduser()), "-o", "IdentitiesOnly=yes"]
    return [*argv, "--", address, "sh -s"]


def ask(req: Request, address: str) -> Reply:
    try:
        p = subprocess.run(
            ssh_argv(req, address),
            input=FACT_SCRIPT,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=ANSWER_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Reply(address, None, "", "", utc_now())
    except FileNotFoundError:
        return Reply(address, 255, "", f"{req.ssh}: command not found", utc_now())
    return Reply(address, p.returncode, p.stdout, p.stderr, utc_now())


def ask_all(req: Request) -> list[Reply]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(64, len(req.hosts))) as pool:
        return list(pool.map(lambda a: ask(req, a), req.hosts))


def ssh_said(stderr: str) -> str:
    """The line of ssh's complaint that names the cause (the last one that is not a banner)."""
    lines = [ln.strip() for ln in stderr.replace("\r", "\n").splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith(("@", "Warning: Permanently added"))]
    return shown(lines[-1] if lines else "no message", 160)


def ssh_problem(req: Request, r: Reply) -> str | None:
    """The one line for a host SSH did not run the script on (None: it ran)."""
    kh = req.known_hosts_path
    scan = f"ssh-keyscan -p {req.port} {r.address} >> {kh}"
    spec = r.address if req.port == 22 else f"[{r.address}]:{req.port}"
    verify = (
        f"and compare `ssh-keygen -l -F {spec} -f {kh}` with the fingerprint the host's console shows "
        "(`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` there) before trusting it, or KNOWN_HOSTS=<a file "
        "that holds its key>"
    )
    if r.rc is None:
        return problem(
            r.address,
            f"no complete answer within {ANSWER_TIMEOUT_S} s",
            "log in by hand and see what hangs (`hccn_tool` and `sudo -n` are called there)",
        )
    if r.rc == 0:
        return None
    if r.rc == 255:
        if "REMOTE HOST IDENTIFICATION HAS CHANGED" in r.stderr:
            return problem(
                r.address,
                f"its host key is not the one {kh} holds for it (ssh: Host key verification failed)",
                f"only if the host was reinstalled: `ssh-keygen -R {spec} -f {kh}`, then `{scan}` {verify}; "
                "otherwise something may be in between",
            )
        if "Host key verification failed" in r.stderr:
            return problem(
                r.address,
                f"its host key is not in {kh} (ssh: Host key verification failed)",
                f"`{scan}` {verify}",
            )
        if "Permission denied" in r.stderr:
            return problem(
                r.address,
                f"SSH refused the login as {req.user} (ssh: {ssh_said(r.stderr)})",
                "SSH_USER=<an account whose authorized_keys hold your key> and SSH_KEY=<that key>",
            )
        return problem(
            r.address,
            f"unreachable over SSH (ssh: {ssh_said(r.stderr)})",
            f"check that the host is up and sshd listens on {r.address} port {req.port} (the address in HOSTS, "
            "SSH_PORT, a firewall)",
        )
    return problem(
        r.address,
        f"the fact script exited {r.rc} (sh: {ssh_said(r.stderr)})",
        "a POSIX sh on the host, and `ssh HOST sh -s` working for SSH_USER",
    )
