"""Secret files: how a tracker key (or any secret) reaches verl's workers without entering a record.

A site names them in its site file, `secret_files: {WANDB_API_KEY: /run/verl-recipe/secrets/wandb_api_key}`: a
variable name and a root-only file that every node mounts read-only at that path (as the Ray token is). The launch
carries only the names and paths: one environment entry, VERL_RECIPE_SECRET_FILES, and Ray's
`worker_process_setup_hook` naming `worker_setup` below, both in the job's runtime_env. Ray 2.54.1 runs that hook in
every worker process of the job before it takes its first task or actor (ray/_private/workers/default_worker.py,
`load_and_execute_setup_hook`), so verl's TaskRunner, its trainer and rollout workers and what they start find $NAME
in their environment; the driver never reads the content. launch.json, settings.json, command.sh, the driver's
argv, verl's "ray init kwargs" line and Ray's job record show the names and paths only. docs/cluster.md (secrets)
says what is still exposed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .settingtypes import SettingsError

SECRET_FILES_ENV = "VERL_RECIPE_SECRET_FILES"  # NAME=/path,NAME=/path: where each worker reads its secrets
SETUP_HOOK = "verl_recipe.secretfiles.worker_setup"
HOOK_KEY = "+ray_kwargs.ray_init.runtime_env.worker_process_setup_hook"
MAX_BYTES = 64 * 1024  # a key or token is well under this; a bigger file is not the one meant
FIX_MODE = "chmod 600 it (root-only, as /etc/verl-recipe/ray_auth_token)"


class SecretFileError(SettingsError):
    """A secret file that cannot be used; the message names the variable and the path, never the content."""


def encode(files: dict[str, str]) -> str:
    return ",".join(f"{name}={path}" for name, path in sorted(files.items()))


def decode(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        name, _, path = item.partition("=")
        out[name] = path
    return out


def read_secret(name: str, path: Path) -> str:
    """The file's content without its final newline, or SecretFileError with the fix."""
    where = f"secret file {path} ({name})"
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise SecretFileError(f"{where}: is not a regular file; fix: name the file itself in secret_files")
        if st.st_mode & 0o077:
            raise SecretFileError(
                f"{where}: is readable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); fix: {FIX_MODE}"
            )
        if st.st_size > MAX_BYTES:
            raise SecretFileError(f"{where}: is {st.st_size} bytes; fix: the file holds the secret alone, one line")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SecretFileError(
            f"{where}: does not exist here; fix: install it at that path on every node (root-only, mounted "
            "read-only into the containers), or drop it from secret_files"
        ) from None
    except OSError as exc:
        raise SecretFileError(
            f"{where}: cannot be read ({exc.strerror}); fix: {FIX_MODE}, owned by the user Ray runs as"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretFileError(f"{where}: is not UTF-8 text; fix: write the secret as one line of text") from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise SecretFileError(f"{where}: is empty; fix: write the secret into it")
    if any(c in text for c in "\0\n\r"):
        raise SecretFileError(f"{where}: holds more than one line; fix: the file holds the secret alone, one line")
    return text


def problems(files: dict[str, str]) -> list[str]:
    """What is wrong with the site's secret files on this host (the launching node), one line each."""
    found = []
    for name, path in sorted(files.items()):
        try:
            read_secret(name, Path(path))
        except SecretFileError as exc:
            found.append(str(exc))
    return found


def worker_setup() -> None:
    """Ray's worker_process_setup_hook: each secret file into this worker's own environment. A file that cannot
    be read stops the worker, and Ray reports the line (it names the path, never the content)."""
    for name, path in decode(os.environ.get(SECRET_FILES_ENV, "")).items():
        os.environ[name] = read_secret(name, Path(path))
