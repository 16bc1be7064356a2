"""The site's variables (group_vars/all) and the control node: each value's shape, the paths and ports, the secret
files, and unknown site_* names refused with "did you mean"."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from ..a3facts import DIES_PER_NODE, RAY_DASHBOARD_PORT, RAY_GCS_PORT
from ..contracts.inventory import ALWAYS, OPTIONAL, SECRET_NAME_RE, SITE, WHEN_TARBALL, InventoryField, fields
from ..recipes import recipe_names
from ..suggest import suggest
from .fields import (
    ACCOUNT_RE,
    ARCH_RE,
    CONTROL,
    GOVERNOR_RE,
    HDK_RE,
    IMAGE_RE,
    INVENTORY,
    MISSING,
    OS_DIRS,
    PARENT_DIRS,
    PUBKEY_RE,
    VOLATILE_TREES,
    _is_int,
    _show,
    _text,
    check_names,
    problem,
    version_tuple,
)


def _unset(value: Any) -> bool:
    return value is MISSING or value is None or value == ""


def _required(field: InventoryField, site: dict[str, Any]) -> bool:
    if field.when == ALWAYS:
        return True
    if field.when == WHEN_TARBALL:
        return site.get("site_image_source") == "tarball"
    return False


def check_site(site: dict[str, Any], control: dict[str, Any]) -> list[str]:
    """Every site field of the table by its kind (after every unset one, then every value with a control
    character), the relations between fields, the control node, and unknown site_* names."""
    errors: list[str] = []
    values: dict[str, Any] = {}
    for field in fields(SITE):
        value = site.get(field.name, MISSING)
        # A required field that is empty is unset; an optional one is absent only when not written at all (a null
        # the roles would take as the value is checked as one).
        if _unset(value) if field.when != OPTIONAL else value is MISSING:
            if _required(field, site):
                errors.append(
                    problem(INVENTORY, f"{field.name} is not set", "set it in group_vars/all, see inventory/sample")
                )
            value = None
        values[field.name] = value
    for name, value in values.items():
        # one line per problem and one line per node.env entry: a newline or other control character in a
        # value would break both (it passes a `$`-anchored pattern, and `26.0.RC1\n` reads as a version)
        if isinstance(value, str) and not value.isprintable():
            errors.append(
                problem(INVENTORY, f"{name}={_show(value)} holds a control character", "write it on one line, plain")
            )
            values[name] = None
    for field in fields(SITE):
        if values[field.name] is not None or field.kind == "secret_files":
            errors += KINDS[field.kind.split(":")[0]](field, values[field.name], values, control)
    ports = [values[k] for k in ("site_ray_port", "site_dashboard_port")]
    if all(_is_int(p) and 1 <= p <= 65535 for p in ports) and ports[0] == ports[1]:
        errors.append(
            problem(
                INVENTORY,
                f"site_ray_port and site_dashboard_port are both {ports[0]}",
                f"give them different ports, by default {RAY_GCS_PORT} and {RAY_DASHBOARD_PORT}",
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
    errors += check_names(site, SITE, INVENTORY)
    return errors


# The checks by kind (contracts/inventory.py's `kind`): each takes the field, its value (set, one line), every site
# value (for relations to other fields) and the control node's facts, and returns problem lines.
Check = Callable[[InventoryField, Any, dict[str, Any], dict[str, Any]], list[str]]


def _wrong(field: InventoryField, value: Any, what: str, fix: str) -> list[str]:
    return [problem(INVENTORY, f"{field.name}={_show(value)} {what}", field.fix or fix)]


def _boolean(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
    return [] if isinstance(value, bool) else _wrong(field, value, "is not a boolean", "write true or false, unquoted")


def _die_count(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
    if _is_int(value) and value >= 1:
        return []
    return _wrong(field, value, "is not a positive integer", f"{DIES_PER_NODE} on A3 (8 modules x 2 dies)")


def _matching(pattern: re.Pattern[str], what: str, fix: str) -> Check:
    def check(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
        if isinstance(value, str) and pattern.fullmatch(value):
            return []
        return _wrong(field, value, f"is not {what}", fix)

    return check


def _folder(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
    """An absolute path; a mount point or a folder deploy.yml owns must not be a system folder; a path on shared
    storage must be under site_shared_root."""
    if not isinstance(value, str) or not os.path.isabs(value):
        return [problem(INVENTORY, f"{field.name}={_show(value)} is not an absolute path", "start it with /")]
    norm = os.path.normpath(value)
    if field.kind == "shared_path":
        root = values.get("site_shared_root")
        if isinstance(root, str) and os.path.isabs(root):
            root = os.path.normpath(root)
            if os.path.commonpath([norm, root]) != root:
                return [
                    problem(
                        INVENTORY,
                        f"{field.name}={_text(value)} is not under site_shared_root={_text(root)}",
                        f"keep it on shared storage: a path under {_text(root)}",
                    )
                ]
        return []
    why = ""
    if norm in OS_DIRS or (field.kind == "own_folder" and norm in PARENT_DIRS):
        why = "a system folder"
    for tree in VOLATILE_TREES:
        if norm.startswith(tree + "/"):
            why = f"under {tree}"
    return [problem(INVENTORY, f"{field.name}={_text(value)} is {why}", field.fix)] if why else []


def _model_map(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
    """Recipe name -> checkpoint folder: known recipe names, each folder a path on shared storage."""
    example = "site_models: {qwen3.5-397b: /mnt/shared/models/Qwen3.5-397B-A17B}"
    if not isinstance(value, dict) or not value:
        return _wrong(field, value, "is not a map of recipe: checkpoint folder", f"write {example}")
    errors: list[str] = []
    known = recipe_names()
    for recipe, path in value.items():
        if recipe not in known:
            hint = suggest(str(recipe), known)
            errors.append(
                problem(
                    INVENTORY,
                    f"site_models: {_show(recipe)} is not a recipe" + (f" (did you mean {hint}?)" if hint else ""),
                    f"rename it to {hint}" if hint else f"one of {', '.join(known)}",
                )
            )
            continue
        entry = InventoryField(f"site_models.{recipe}", SITE, "shared_path", ALWAYS, "")
        errors += _folder(entry, path, values, control)
    return errors


def _accounts(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
    if isinstance(value, list) and all(isinstance(v, str) and ACCOUNT_RE.fullmatch(v) for v in value):
        return []
    return _wrong(field, value, "is not a list of account names", "write site_operators: [alice, bob]")


def _operator_keys(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
    """site_operator_keys: each operator's public key file on the control node, one key (deploy.yml installs it)."""
    fix = "write site_operator_keys: {alice: /home/alice/.ssh/id_ed25519.pub} (a file on the control node)"
    if not isinstance(value, dict):
        return _wrong(field, value, "is not a map of account: public key file", fix)
    operators = values.get("site_operators") or []
    errors = []
    for account, path in value.items():
        where = f"{field.name}.{_text(account)}"
        if account not in operators:
            errors.append(problem(INVENTORY, f"{where}: {_text(account)} is not in site_operators", fix))
        elif not isinstance(path, str) or not os.path.isabs(path):
            errors.append(problem(INVENTORY, f"{where}={_show(path)} is not an absolute path", fix))
        elif not os.path.isfile(path):
            errors.append(problem(CONTROL, f"{where}={_text(path)} does not exist on the control node", fix))
        else:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = [ln for ln in f.read().splitlines() if ln.strip() and not ln.startswith("#")]
            if len(lines) != 1 or not PUBKEY_RE.match(lines[0]):
                errors.append(
                    problem(
                        CONTROL,
                        f"{where}={_text(path)} is not one SSH public key",
                        "name the .pub file `ssh-keygen` wrote (one line: ssh-ed25519 AAAA... comment), never a "
                        "private key",
                    )
                )
    return errors


def _choice(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
    options = field.kind.split(":", 1)[1].split(",")
    if isinstance(value, str) and value in options:
        return []
    return _wrong(field, value, "must be " + " or ".join(options), "")


def _control_file(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
    """The image tarball, where this run distributes the image: `--tags preflight` checks the hosts before the
    image exists."""
    if values.get("site_image_source") != "tarball" or not control.get("image_stage", True):
        return []
    if isinstance(value, str) and os.path.isfile(value):
        return []
    ref = values.get("site_image_ref")
    return [
        problem(
            CONTROL,
            f"{field.name}={_text(value)} does not exist",
            f"`docker save {ref if isinstance(ref, str) else 'IMAGE'} -o {_text(value)}` (a check that "
            "contacts no host: deploy.yml --tags preflight)",
        )
    ]


def _port(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
    if _is_int(value) and 1 <= value <= 65535:
        return []
    return _wrong(field, value, "is not a TCP port number", f"a port number 1-65535, default {field.default}")


def _mapping(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
    if isinstance(value, dict):
        return []
    return _wrong(field, value, "is not a map", "write it as NAME: value lines under it (docs/contracts.md, section 1)")


def _secret_files(field: InventoryField, value: Any, values: dict[str, Any], control: dict[str, Any]) -> list[str]:
    return check_secret_files(value)


KINDS: dict[str, Check] = {
    "boolean": _boolean,
    "die_count": _die_count,
    "hdk_version": _matching(HDK_RE, "an HDK version like 26.0.RC1", ""),
    "mount_folder": _folder,
    "own_folder": _folder,
    "shared_path": _folder,
    "image_ref": _matching(IMAGE_RE, "an image reference", "name:tag or name@sha256:..."),
    "choice": _choice,
    "accounts": _accounts,
    "operator_keys": _operator_keys,
    "model_map": _model_map,
    "control_file": _control_file,
    "port": _port,
    "text": _matching(ARCH_RE, "a CPU architecture name", "aarch64 on A3 (what `uname -m` prints)"),
    "secret_files": _secret_files,
    "mapping": _mapping,
    "governor": _matching(
        GOVERNOR_RE,
        "a CPU frequency governor name",
        "one of the names in /sys/devices/system/cpu/cpu0/cpufreq/scaling_available_governors, e.g. performance",
    ),
}


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
