"""What `make inventory` was asked: the site, the hosts, how to log in; refused before any host is contacted."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path

from ..inventory.fields import SSH_HOST_RE
from .common import problem, shown

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "ansible" / "inventory" / "sample"
# inventory/sample is the tracked example and inventory/sim is simctl.py's: neither is a site's.
RESERVED_SITES = ("sample", "sim")
SITE_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
USER_RE = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")

# --------------------------------------------------------------------------------------------------------------
# the request


@dataclass
class Request:
    site: str
    hosts: list[str]
    user: str = "deploy"
    port: int = 22
    key: str = ""
    known_hosts: str = ""
    cluster_net: str = ""
    out: str = ""
    force: bool = False
    ssh: str = "ssh"

    @property
    def known_hosts_path(self) -> Path:
        return Path(self.known_hosts or "~/.ssh/known_hosts").expanduser()

    @property
    def out_dir(self) -> Path:
        return Path(self.out) if self.out else REPO / "ansible" / "inventory" / self.site

    @property
    def network(self) -> ipaddress.IPv4Network | None:
        return ipaddress.IPv4Network(self.cluster_net, strict=False) if self.cluster_net else None


def split_hosts(text: str) -> list[str]:
    return [h for h in re.split(r"[\s,]+", text.strip()) if h]


def check_request(req: Request) -> list[str]:
    """Everything wrong with the request itself, before any host is contacted."""
    errors: list[str] = []
    if not req.site:
        errors.append(problem("SITE", "is empty", "SITE=<name>: the inventory goes to ansible/inventory/<name>/"))
    elif not SITE_RE.fullmatch(req.site):
        errors.append(
            problem(
                "SITE",
                f"{shown(req.site)!r} is not a site name",
                "lower-case letters, digits, '-' and '_', starting with a letter or digit (it names the folder "
                "ansible/inventory/<SITE>/)",
            )
        )
    elif req.site in RESERVED_SITES:
        errors.append(
            problem(
                "SITE",
                f"{req.site} is the project's own inventory (inventory/sample is the tracked example, inventory/sim "
                "the simulated cluster's)",
                "name the site (SITE=<your site>)",
            )
        )
    if not req.hosts:
        errors.append(
            problem(
                "HOSTS",
                "is empty",
                'HOSTS="addr1 addr2 ...": the SSH address of every host, the Ray head first',
            )
        )
    seen: set[str] = set()
    for h in req.hosts:
        if not SSH_HOST_RE.fullmatch(h):
            errors.append(
                problem(
                    "HOSTS",
                    f"{shown(h)!r} is not a host name or IP address",
                    "list SSH addresses only (DNS names or IP addresses, separated by spaces)",
                )
            )
        elif h in seen:
            errors.append(problem("HOSTS", f"{h} is listed twice", "list every host once"))
        seen.add(h)
    if not USER_RE.fullmatch(req.user):
        errors.append(problem("SSH_USER", f"{shown(req.user)!r} is not a user name", "the login on every host"))
    if not 1 <= req.port <= 65535:
        errors.append(problem("SSH_PORT", "is not a TCP port number", "the port sshd listens on, 1-65535 (22)"))
    if req.key and not Path(req.key).expanduser().is_file():
        errors.append(problem("SSH_KEY", f"{req.key} is no file", "the private key that logs in to the hosts"))
    kh = req.known_hosts_path
    if not kh.is_file():
        errors.append(
            problem(
                "KNOWN_HOSTS",
                f"{kh} does not exist, so no host key can be checked",
                "`ssh-keyscan -p PORT HOST >> FILE` for every host, compare each `ssh-keygen -lf FILE` fingerprint "
                "with the one the host's console shows, then KNOWN_HOSTS=FILE",
            )
        )
    if req.cluster_net:
        try:
            ipaddress.IPv4Network(req.cluster_net, strict=False)
        except ValueError:
            errors.append(
                problem(
                    "CLUSTER_NET",
                    f"{shown(req.cluster_net)!r} is not an IPv4 network",
                    "the cluster network as a CIDR, e.g. 10.10.0.0/24",
                )
            )
    target = req.out_dir / "hosts.yml"
    if target.exists() and not req.force:
        errors.append(
            problem(
                "SITE",
                f"{target} exists",
                "FORCE=1 to write it anew from the hosts, or another SITE (the file is never merged)",
            )
        )
    return errors
