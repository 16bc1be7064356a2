"""The inventory's vocabulary: the host and site keys deploy.yml reads, the shapes their values take, and the one
problem shape (SUBJECT: WHAT; fix: FIX) every inventory check reports in."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from ..contracts.inventory import HOST, PREFIXES, SITE, names
from ..suggest import suggest

HOST_KEYS = names(HOST)
SITE_KEYS = names(SITE)
MISSING = object()
# Every pattern is matched with fullmatch: `$` would also accept a trailing newline ("26.0.RC1\n").
NIC_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")
HDK_RE = re.compile(r"\d+\.\d+\.(rc\d+|\d+)(\.\d+)*", re.IGNORECASE)
IMAGE_RE = re.compile(r"[a-z0-9][a-z0-9._/:@-]{0,254}")
# An inventory host name reaches node.env (NODE_NAME), Ray's node name and a log file name: a DNS label's
# characters and length.
HOST_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
# ansible_host is what ssh is given as its destination: a DNS name or an IP address, never an option (`-...`) or
# words for a shell.
SSH_HOST_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:%-]{0,252}")
# A login name (useradd's rule: lower case, digits, '_' and '-', not starting with a digit or '-').
ACCOUNT_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
# One OpenSSH public key line: its type, then the base64 key (a private key's file starts with "-----BEGIN").
PUBKEY_RE = re.compile(r"(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp\d+|sk-[a-z0-9@.-]+) AAAA[0-9A-Za-z+/]+=*( .*)?$")
# A CPU architecture as `uname -m` prints it (aarch64, x86_64).
ARCH_RE = re.compile(r"[a-z0-9_]{1,32}")
# The CPU frequency governor os_tuning writes to sysfs (the kernel's names: performance, schedutil, ...).
GOVERNOR_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
# Folders deploy.yml must never take as site_install_dir (it makes that folder root-owned, mode 0755, and writes
# compose.yaml, node.env and .env into it) or as site_shared_root (`/` is always "mounted").
OS_DIRS = frozenset(
    (
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/lib",
        "/lib32",
        "/lib64",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/sys",
        "/tmp",
        "/usr",
        "/usr/bin",
        "/usr/lib",
        "/usr/lib64",
        "/usr/local",
        "/usr/local/bin",
        "/usr/local/lib",
        "/usr/local/sbin",
        "/usr/sbin",
        "/usr/share",
        "/var",
        "/var/lib",
        "/var/log",
        "/var/run",
        "/var/tmp",
    )
)
# Parents of many folders: a shared mount may sit there, an install folder needs one of its own below them.
PARENT_DIRS = frozenset(("/home", "/media", "/mnt", "/opt", "/srv"))
# Kernel, volatile or world-writable trees: nothing of the deploy belongs anywhere below them.
VOLATILE_TREES = ("/dev", "/proc", "/run", "/sys", "/tmp", "/var/tmp")
INVENTORY = "inventory"
CONTROL = "control node"


def problem(subject: str, what: str, fix: str) -> str:
    """One problem line, shaped like the launch validator's (`SUBJECT: WHAT; fix: FIX`): SUBJECT is `inventory`,
    `inventory: HOST` or `control node`, FIX names what to change."""
    return f"{subject}: {what}; fix: {fix}"


def _host(name: Any) -> str:
    """The subject of a host's problems; a name that is not a plain host name is shown quoted and cut short so the
    problem stays one line (the name's own problem says what is wrong with it)."""
    return f"{INVENTORY}: {name if _plain_host_name(name) else _show(name)}"


def _plain_host_name(name: Any) -> bool:
    return isinstance(name, str) and HOST_NAME_RE.fullmatch(name) is not None


def _text(value: Any) -> str:
    """A value as the problem line shows it unquoted: printable text of reasonable length as it is, else quoted."""
    if isinstance(value, str) and value.isprintable() and len(value) <= 120:
        return value
    return _show(value)


def _show(value: Any) -> str:
    """repr of a value, cut to a length that keeps the problem line readable (a name of hundreds of characters,
    a nested list); repr never holds a newline."""
    if value is MISSING:
        return "<unset>"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}...({len(text)} characters)"


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _ipv4(value: Any) -> str | None:
    """The address as text when `value` is a plain IPv4 address, else None."""
    if not isinstance(value, str):
        return None
    try:
        return str(ipaddress.IPv4Address(value))
    except ValueError:
        return None


def _unusable(ip: str) -> str:
    """Why a host cannot own this IPv4 address ("" when it can): another host could never reach it there."""
    addr = ipaddress.IPv4Address(ip)
    for kind, hit in (
        ("the unspecified address", addr.is_unspecified),
        ("a loopback address", addr.is_loopback),
        ("the broadcast address", addr == ipaddress.IPv4Address("255.255.255.255")),
        ("a multicast address", addr.is_multicast),
        ("a reserved address (240.0.0.0/4)", addr.is_reserved),
    ):
        if hit:
            return kind
    return ""


def _port(value: Any) -> int | None:
    """A TCP port (1-65535) given as an integer or as ASCII digits (an INI inventory's text), else None."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 5:
        value = int(value)
    if _is_int(value) and 1 <= value <= 65535:
        return int(value)
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _per_die(dies: Any, what: str) -> str:
    """'16 NPU addresses', or 'NPU addresses, one per die' when site_expected_dies is not a count (it is
    reported on its own, and its raw text, a newline included, must not reach another host's line)."""
    return f"{dies} {what}" if _is_int(dies) and dies > 0 else f"{what}, one per die"


def _hccn_fix(dies: Any) -> str:
    """The fix of a wrong a3_npu_ips: the host's /etc/hccn.conf holds one address_N per die (a bad
    site_expected_dies is reported on its own, so the count is left out then)."""
    if _is_int(dies) and dies > 0:
        return f"list the {dies} address_N values of that host's /etc/hccn.conf, address_0..address_{dies - 1} in order"
    return "list the address_N values of that host's /etc/hccn.conf, one per die, address_0 first"


WORD = {SITE: "site setting", HOST: "host variable"}


def check_names(variables: dict[str, Any], scope: str, subject: str) -> list[str]:
    """Names with the project's prefix for `scope` (site_, a3_) that are not fields: a misspelling leaves the
    default in use or the field unset, so it is refused with the closest field's name."""
    prefix = PREFIXES[scope]
    known = names(scope)
    errors: list[str] = []
    for key in sorted(k for k in variables if isinstance(k, str) and k.startswith(prefix) and k not in known):
        hint = suggest(key, [k for k in known if k.startswith(prefix)], prefix=prefix)
        errors.append(
            problem(
                subject,
                f"{_text(key)} is not a {WORD[scope]}" + (f" (did you mean {hint}?)" if hint else ""),
                f"rename it to {hint}" if hint else f"remove it; the {WORD[scope]}s are listed in docs/contracts.md",
            )
        )
    return errors
