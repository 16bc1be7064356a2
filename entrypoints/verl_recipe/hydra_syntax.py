"""Hydra override syntax, both ways: a value written as an override, and an override's text read back.

The one place for quoting, list brackets and the + key prefix; render.py writes with it, the memory plan's
knobs and validate's extra overrides read with it.
"""

from __future__ import annotations

import re
from typing import Any

_PLAIN = re.compile(r"^[A-Za-z0-9_./\-]+$")


class Raw(str):
    """A value already in Hydra override syntax."""


def quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def hydra_value(value: Any) -> str:
    """A Python value as the right-hand side of a Hydra override."""
    if isinstance(value, Raw):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(quote(str(item)) for item in value) + "]"
    text = str(value)
    # Recipe authors may write Hydra list syntax directly ("[4,12,24]").
    if text.startswith("[") and text.endswith("]"):
        return text
    return text if _PLAIN.match(text) else quote(text)


def bare_key(key: str) -> str:
    """A key without its +/++ prefix: the same key to Hydra whatever the prefix."""
    return key.lstrip("+")


def override_key(arg: str) -> str:
    """The bare key of a `key=value` override."""
    return bare_key(arg.split("=", 1)[0])


def unquoted(raw: str) -> str:
    """An override's value text without surrounding space and quotes."""
    return raw.strip().strip("'\"")


def list_text(raw: str) -> str:
    """A Hydra list's items as comma-separated text: `['a','b']` -> `a,b`."""
    return unquoted(raw).strip("[]").replace("'", "").replace('"', "")


def parse_value(value: Any) -> Any:
    """An override's text as the value Hydra would give it (bool, null, int, float, else the text)."""
    if not isinstance(value, str):
        return value
    text = unquoted(value)
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "none", "~", ""):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text
