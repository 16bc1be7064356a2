"""Secrets kept out of anything this project copies off a host: the values to look for, and a redacting stream.

The values are the contents of the site's secret files (secretfiles.py: root-only files, one value each, named in
site.yaml's `secret_files` and installed in VERL_RECIPE_SECRETS_DIR) and the Ray cluster's token (the file
RAY_AUTH_TOKEN_PATH names). Each occurrence becomes `[REDACTED:<name>]`; the name never is a value. The stream is
redacted in blocks with an overlap one byte shorter than the longest value, so a value split across two reads is
still found, and a value cut in two by a tail read (`skip`) is masked whole rather than left half there.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
TOKEN_DEFAULT = "/etc/verl-recipe/ray_auth_token"  # compose.yaml's secret file on every host (deploy.yml)
SECRETS_DIR_ENV = "VERL_RECIPE_SECRETS_DIR"
SECRETS_DIR_DEFAULT = "/etc/verl-recipe/secrets"  # deploy.yml's site_secret_files folder (node_env)
MAX_SECRET_BYTES = 64 * 1024  # secretfiles.MAX_BYTES: a bigger file is not a secret file


class RedactError(RuntimeError):
    """A secret that exists but cannot be read: without its value nothing may be copied (one line, the fix)."""


@dataclass
class Secrets:
    """The values to redact, by a name that says where each came from (never the value)."""

    values: dict[str, bytes] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)  # what was looked at, for the MANIFEST

    def add(self, name: str, raw: bytes) -> None:
        # Readers trim the final newline (secretfiles.read_secret) or all whitespace (Ray's token loader): the
        # value that reaches a log is the trimmed one; both forms are searched.
        for value in {raw.rstrip(b"\r\n"), raw.strip()}:
            if value and value not in self.values.values():
                self.values[name if name not in self.values else f"{name}#{len(self.values)}"] = value

    def pattern(self) -> re.Pattern[bytes] | None:
        if not self.values:
            return None
        ordered = sorted(self.values.values(), key=len, reverse=True)  # the longest value at a position wins
        return re.compile(b"|".join(re.escape(v) for v in ordered))

    def name_of(self, value: bytes) -> str:
        return next(n for n, v in self.values.items() if v == value)


def _read_secret(path: Path) -> bytes | None:
    """The file's bytes; None when it does not exist or is no regular file; RedactError when it cannot be read."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RedactError(_unreadable(path, exc)) from None
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SECRET_BYTES:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RedactError(_unreadable(path, exc)) from None


def _unreadable(path: Path, exc: OSError) -> str:
    return (
        f"secret file {path} cannot be read ({exc.strerror or type(exc).__name__}), so its value could not be kept "
        "out of the archive; fix: run as root (`make logs` does, through the head's `runs` service)"
    )


def load_secrets(named: dict[str, str], environ: dict[str, str] | None = None) -> Secrets:
    """Every secret value this host knows: the Ray token, each file of the secrets folder, and `named` (the run's
    settings.json `secret_files`, NAME -> path). A path that exists and cannot be read raises RedactError."""
    env = dict(os.environ) if environ is None else environ
    found = Secrets()
    token = Path(env.get(TOKEN_PATH_ENV) or TOKEN_DEFAULT)
    raw = _read_secret(token)
    found.sources.append(f"Ray token {token}: {'read' if raw is not None else 'absent here'}")
    if raw is not None:
        found.add("ray-token", raw)
    folder = Path(env.get(SECRETS_DIR_ENV) or SECRETS_DIR_DEFAULT)
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        names = []
        found.sources.append(f"secrets folder {folder}: absent here")
    except OSError as exc:
        raise RedactError(_unreadable(folder, exc)) from None
    else:
        found.sources.append(f"secrets folder {folder}: {len(names)} file(s)")
    for name in names:
        raw = _read_secret(folder / name)
        if raw is not None:
            found.add(name, raw)
    for name, path in sorted(named.items()):
        raw = _read_secret(Path(path))
        found.sources.append(f"secret file {name} ({path}): {'read' if raw is not None else 'absent here'}")
        if raw is not None:
            found.add(name, raw)
    return found


@dataclass
class Redactor:
    """Redacts a byte stream; `count` says how many values it replaced."""

    secrets: Secrets
    block: int = 1 << 20
    count: int = 0
    overlap: int = field(init=False, default=0)  # bytes held back between blocks: the longest value, less one
    _pattern: re.Pattern[bytes] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self._pattern = self.secrets.pattern()
        self.overlap = max((len(v) for v in self.secrets.values.values()), default=1) - 1

    def text(self, data: bytes) -> bytes:
        return b"".join(self.stream([data]))

    def stream(self, chunks: Iterable[bytes], skip: int = 0) -> Iterator[bytes]:
        """The chunks with every value replaced, less their first `skip` bytes; a value that starts inside the
        skipped part and ends after it is replaced by its marker, so no part of it comes out."""
        pos = 0  # absolute offset of buf[0] in the stream
        buf = b""
        for chunk in chunks:
            buf += chunk
            if len(buf) < self.block + self.overlap:
                continue
            out, done = self._emit(buf, pos, skip, final=False)
            yield out
            pos += done
            buf = buf[done:]
        out, _ = self._emit(buf, pos, skip, final=True)
        yield out

    def _emit(self, buf: bytes, pos: int, skip: int, final: bool) -> tuple[bytes, int]:
        """What of `buf` can be written now, and how many of its bytes that consumed. Not final: the last
        `overlap` bytes wait for the next chunk, unless a match that starts before them covers them."""
        safe = len(buf) if final else len(buf) - self.overlap
        parts: list[bytes] = []
        at = 0
        if self._pattern is not None:
            for m in self._pattern.finditer(buf):
                if m.start() >= safe:
                    break
                parts.append(_after(buf[at : m.start()], pos + at, skip))
                if pos + m.end() > skip:
                    parts.append(f"[REDACTED:{self.secrets.name_of(m.group())}]".encode())
                    self.count += 1
                at = m.end()
        end = max(at, safe)
        parts.append(_after(buf[at:end], pos + at, skip))
        return b"".join(parts), end


def _after(piece: bytes, start: int, skip: int) -> bytes:
    """The part of `piece` (at absolute offset `start`) past the first `skip` bytes of the stream."""
    return piece[max(0, skip - start) :] if start < skip else piece
