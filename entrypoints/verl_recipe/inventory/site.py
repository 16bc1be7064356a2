"""The site's variables (group_vars/all) and the control node: each value's shape, the paths and ports, the secret
files, and unknown site_* names refused with "did you mean"."""

from __future__ import annotations

import difflib
import os
from typing import Any

from ..a3facts import DIES_PER_NODE, RAY_DASHBOARD_PORT, RAY_GCS_PORT
from .fields import (
    CONTROL,
    GOVERNOR_RE,
    HDK_RE,
    IMAGE_RE,
    INVENTORY,
    KNOWN_SITE_KEYS,
    LINK_MODES,
    MISSING,
    OS_DIRS,
    PARENT_DIRS,
    PORT_DEFAULTS,
    SECRET_NAME_RE,
    SITE_KEYS,
    VOLATILE_TREES,
    _is_int,
    _show,
    _text,
    problem,
    version_tuple,
)


def check_site(site: dict[str, Any], control: dict[str, Any]) -> list[str]:
    errors: list[str] = []

    def need(key: str) -> Any:
        value = site.get(key, MISSING)
        if value is MISSING or value is None or value == "":
            if key == "site_image_tarball" and site.get("site_image_source") != "tarball":
                return None
            errors.append(problem(INVENTORY, f"{key} is not set", "set it in group_vars/all, see inventory/sample"))
            return None
        return value

    values = {k: need(k) for k in SITE_KEYS}
    for key, value in values.items():
        # one line per problem and one line per node.env entry: a newline or other control character in a
        # value would break both (it passes a `$`-anchored pattern, and `26.0.RC1\n` reads as a version)
        if isinstance(value, str) and not value.isprintable():
            errors.append(
                problem(INVENTORY, f"{key}={_show(value)} holds a control character", "write it on one line, plain")
            )
            values[key] = None
    if values["site_simulated"] is not None and not isinstance(values["site_simulated"], bool):
        errors.append(
            problem(
                INVENTORY,
                f"site_simulated={_show(values['site_simulated'])} is not a boolean",
                "write true or false, unquoted",
            )
        )
    dies = values["site_expected_dies"]
    if dies is not None and (not _is_int(dies) or dies < 1):
        errors.append(
            problem(
                INVENTORY,
                f"site_expected_dies={_show(dies)} is not a positive integer",
                f"{DIES_PER_NODE} on A3 (8 modules x 2 dies)",
            )
        )
    hdk = values["site_hdk_min"]
    if hdk is not None and not (isinstance(hdk, str) and HDK_RE.fullmatch(hdk)):
        errors.append(
            problem(
                INVENTORY,
                f"site_hdk_min={_show(hdk)} is not an HDK version like 26.0.RC1",
                "host.hdk_min of docker/versions.yaml, as inventory/sample reads it",
            )
        )
    root = values["site_shared_root"]
    for key in ("site_shared_root", "site_model_path", "site_data_path", "site_ckpt_root", "site_install_dir"):
        path = values[key]
        if path is None:
            continue
        if not isinstance(path, str) or not os.path.isabs(path):
            errors.append(problem(INVENTORY, f"{key}={_show(path)} is not an absolute path", "start it with /"))
            if key == "site_shared_root":
                root = None  # the paths under it cannot be compared with a relative root
            continue
        norm = os.path.normpath(path)
        system = _system_dir(key, norm)
        if system:
            errors.append(problem(INVENTORY, f"{key}={_text(path)} is {system}", _dir_fix(key)))
        elif (
            key in ("site_model_path", "site_data_path", "site_ckpt_root")
            and isinstance(root, str)
            and os.path.commonpath([norm, os.path.normpath(root)]) != os.path.normpath(root)
        ):
            errors.append(
                problem(
                    INVENTORY,
                    f"{key}={_text(path)} is not under site_shared_root={_text(root)}",
                    f"keep it on shared storage: a path under {_text(root)}",
                )
            )
    ref = values["site_image_ref"]
    if ref is not None and not (isinstance(ref, str) and IMAGE_RE.fullmatch(ref)):
        errors.append(
            problem(INVENTORY, f"site_image_ref={_show(ref)} is not an image reference", "name:tag or name@sha256:...")
        )
    source = values["site_image_source"]
    if source is not None and source not in ("registry", "tarball"):
        errors.append(
            problem(
                INVENTORY,
                f"site_image_source={_show(source)} must be registry or tarball",
                "registry (every host pulls site_image_ref) or tarball (site_image_tarball, a `docker save` file "
                "on the control node)",
            )
        )
    tarball = values["site_image_tarball"]
    # Only where this run distributes the image: `--tags preflight` checks the hosts before the image exists.
    if (
        source == "tarball"
        and tarball is not None
        and control.get("image_stage", True)
        and not (isinstance(tarball, str) and os.path.isfile(tarball))
    ):
        errors.append(
            problem(
                CONTROL,
                f"site_image_tarball={_text(tarball)} does not exist",
                f"`docker save {ref if isinstance(ref, str) else 'IMAGE'} -o {_text(tarball)}` (a check that "
                "contacts no host: deploy.yml --tags preflight)",
            )
        )
    ports = []
    for key in ("site_ray_port", "site_dashboard_port"):
        port = values[key]
        if port is None:
            continue
        if not _is_int(port) or not 1 <= port <= 65535:
            errors.append(
                problem(
                    INVENTORY,
                    f"{key}={_show(port)} is not a TCP port number",
                    f"a port number 1-65535, default {PORT_DEFAULTS[key]}",
                )
            )
        else:
            ports.append(port)
    if len(ports) == 2 and ports[0] == ports[1]:
        errors.append(
            problem(
                INVENTORY,
                f"site_ray_port and site_dashboard_port are both {ports[0]}",
                f"give them different ports, by default {RAY_GCS_PORT} and {RAY_DASHBOARD_PORT}",
            )
        )

    link = site.get("site_inter_server_link", "roce")
    if not (isinstance(link, str) and link in LINK_MODES):
        errors.append(
            problem(
                INVENTORY,
                f"site_inter_server_link={_show(link)} must be roce or hccs",
                "roce unless the hosts are one A3 SuperPoD whose HCCS carries the traffic between servers",
            )
        )

    lo, hi = control["ansible_min"], control["ansible_max"]
    have = version_tuple(control["ansible_version"])
    if not version_tuple(lo) <= have < version_tuple(hi):
        errors.append(
            problem(
                CONTROL,
                f"ansible-core {control['ansible_version']} is outside [{lo}, {hi})",
                "`make venv` installs the pinned toolchain",
            )
        )
    for path in control.get("required_files", []):
        if not os.path.isfile(path):
            errors.append(problem(CONTROL, f"{_text(path)} is missing", "check out the whole repository"))
    errors += check_names(site)
    errors += check_secret_files(site.get("site_secret_files"))
    return errors


def check_secret_files(files: Any) -> list[str]:
    """site_secret_files: a map of variable names to absolute paths of files on the control node (root-only)."""
    if files is None or files == {}:
        return []
    fix = "write site_secret_files: {WANDB_API_KEY: /path/on/the/control/node} (docs/cluster.md, secrets)"
    if not isinstance(files, dict):
        return [problem(INVENTORY, f"site_secret_files={_show(files)} is not a map of NAME: file", fix)]
    errors = []
    for name, path in files.items():
        if not (isinstance(name, str) and SECRET_NAME_RE.fullmatch(name)):
            errors.append(
                problem(INVENTORY, f"site_secret_files: {_show(name)} is not a variable name", "use A-Z, 0-9 and _")
            )
        elif not (isinstance(path, str) and path.isprintable() and os.path.isabs(path)):
            errors.append(problem(INVENTORY, f"site_secret_files.{name}={_show(path)} is not an absolute path", fix))
        elif not os.path.isfile(path):
            errors.append(
                problem(
                    INVENTORY,
                    f"site_secret_files.{name}={_text(path)} does not exist on the control node",
                    "put the secret there (one line, chmod 600) or drop the entry",
                )
            )
        elif os.stat(path).st_mode & 0o077:
            errors.append(
                problem(
                    INVENTORY,
                    f"site_secret_files.{name}={_text(path)} is readable by group or others",
                    f"chmod 600 {_text(path)}",
                )
            )
    return errors


def _system_dir(key: str, norm: str) -> str:
    """Why `norm` cannot be this setting's folder ("" when it can)."""
    if key not in ("site_install_dir", "site_shared_root"):
        return ""
    if norm in OS_DIRS or (key == "site_install_dir" and norm in PARENT_DIRS):
        return "a system folder"
    for tree in VOLATILE_TREES:
        if norm.startswith(tree + "/"):
            return f"under {tree}"
    return ""


def _dir_fix(key: str) -> str:
    if key == "site_install_dir":
        return "a folder of its own that deploy.yml may own, e.g. /opt/verl-recipe"
    return "the mount point of the shared file system, e.g. /mnt/shared"


def check_names(site: dict[str, Any]) -> list[str]:
    """site_* names nothing reads (a misspelling leaves the default in use), and other settings' values that
    reach a root shell."""
    errors: list[str] = []
    for key in sorted(k for k in site if isinstance(k, str) and k.startswith("site_") and k not in KNOWN_SITE_KEYS):
        # compared without the common `site_` prefix, which would make every name look close
        tails = difflib.get_close_matches(key[5:], sorted(k[5:] for k in KNOWN_SITE_KEYS), n=1, cutoff=0.6)
        hint = ["site_" + t for t in tails]
        errors.append(
            problem(
                INVENTORY,
                f"{_text(key)} is not a site setting" + (f" (did you mean {hint[0]}?)" if hint else ""),
                f"rename it to {hint[0]}" if hint else "remove it; the site settings are listed in docs/contracts.md",
            )
        )
    governor = site.get("os_tuning_cpu_governor", MISSING)
    if governor is not MISSING and not (isinstance(governor, str) and GOVERNOR_RE.fullmatch(governor)):
        errors.append(
            problem(
                INVENTORY,
                f"os_tuning_cpu_governor={_show(governor)} is not a CPU frequency governor name",
                "one of the names in /sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors, e.g. "
                "performance",
            )
        )
    return errors
