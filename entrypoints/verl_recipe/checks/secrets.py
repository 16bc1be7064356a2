"""Secrets in extra Hydra overrides: no override form may put a secret into the workers' environment.

The workers' environment is `ray_kwargs.ray_init.runtime_env.env_vars`; an override reaches it by naming one
variable under it (`+...env_vars.WANDB_API_KEY=x`), or by giving a mapping or list at that key or any key above it
(`++...env_vars={X_TOKEN: x}`, `++ray_kwargs.ray_init={runtime_env: {env_vars: {X_TOKEN: x}}}`). Whatever the form,
the value would be written into launch.json, command.sh and the driver's argv, so a name that looks like a secret
(layers.secret_looking) anywhere in it is refused; the fix is the site file's secret_files.

Values are scanned as text, not parsed: Hydra's grammar nests dicts and lists, quotes keys and values either way
and escapes quotes, and a scan that finds every `NAME:` and `NAME=` in the text over-reports rather than misses.
"""

from __future__ import annotations

import re

from ..hydra_syntax import bare_key
from ..layers import secret_looking

# Where Ray's runtime_env takes the workers' environment (render.RUNTIME_ENV_PREFIX, without its + and dot).
ENV_VARS_PATH = ("ray_kwargs", "ray_init", "runtime_env", "env_vars")
# A name used as a mapping key (`NAME:`, `'NAME':`, `"NAME" :`) or as a `NAME=VALUE` list item, in any nesting.
_NAMED = re.compile(r"(?<![A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)['\"]?\s*[:=]")


def reaches_env(key: str) -> bool:
    """Whether an override of `key` (without its +/++/~ prefix) can set a variable of the workers' environment: a key
    at or under env_vars, or one of its ancestors (ray_kwargs, ray_kwargs.ray_init, ...)."""
    parts = tuple(bare_key(key).lstrip("~").split("."))
    depth = min(len(parts), len(ENV_VARS_PATH))
    return parts[:depth] == ENV_VARS_PATH[:depth]


def secret_names(arg: str) -> list[str]:
    """The secret-looking variable names an extra override `key=value` would put into the workers' environment."""
    key, sep, raw = arg.partition("=")
    if not reaches_env(key):
        return []
    parts = bare_key(key).lstrip("~").split(".")
    found: list[str] = []
    if len(parts) > len(ENV_VARS_PATH):  # `...env_vars.NAME=value`: the variable is named by the key
        found.append(parts[len(ENV_VARS_PATH)])
    if sep:  # a mapping or list value at or above env_vars: every name in it
        found += [m.group(1) for m in _NAMED.finditer(raw)]
    return list(dict.fromkeys(name for name in found if secret_looking(name)))


# Hydra reads these unquoted values as a number, a boolean or null (its override grammar), and Ray's runtime_env
# takes only strings in env_vars: the job fails at submission with a TypeError, after the wait and validation.
_NOT_TEXT = re.compile(r"[+-]?(\d[\d_]*(\.\d*)?([eE][+-]?\d+)?|\.\d+|inf|nan)|true|false|null", re.IGNORECASE)


def non_text_env_value(arg: str) -> str | None:
    """The value of `...env_vars.NAME=VALUE` when Hydra would hand Ray something other than a string, else None."""
    key, sep, raw = arg.partition("=")
    parts = bare_key(key).lstrip("~").split(".")
    if not sep or len(parts) != len(ENV_VARS_PATH) + 1 or tuple(parts[:-1]) != ENV_VARS_PATH:
        return None
    return raw if _NOT_TEXT.fullmatch(raw.strip()) else None


def kind_of(value: str) -> str:
    low = value.strip().lower()
    return "a boolean" if low in ("true", "false") else "null" if low == "null" else "a number"
