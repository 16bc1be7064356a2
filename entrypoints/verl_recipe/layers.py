"""Layers of settings and how they merge: the recipe's defaults < site file < environment < --set KEY=VALUE
(< extra Hydra overrides, folded in by validate). Upstream's spellings are accepted with a warning naming the
canonical one; a key that looks like a typo of a known one is refused with "did you mean". The site file's
sections (env, recipes, secret_files) and the secret-name rule live here too."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .contracts.inventory import SECRET_NAME_RE
from .settings import ALIASES, BY_NAME
from .settingtypes import SettingsError
from .suggest import suggest

ENV_SECTION = "env"  # site-file section / --set prefix for the launch environment ("env.HCCL_BUFFSIZE=400")
RECIPES_SECTION = "recipes"  # site-file section: settings for one recipe only, over the site's own
# Site-file section: NAME -> a root-only file whose content each Ray worker gets as $NAME (secretfiles.py); the
# content never enters a setting, the launch environment, a record or a command line.
SECRET_FILES_SECTION = "secret_files"

# A site file is a few dozen lines of SETTING: value, env and recipes sections (three levels). Anything far
# larger or deeper is not one; refusing it early keeps the YAML composer's recursion and memory out of reach.
SITE_FILE_MAX_BYTES = 1024 * 1024
SITE_FILE_MAX_DEPTH = 8
ENV_VALUE_MAX_CHARS = 32 * 1024  # one exec argument may be at most 128 KiB (Linux MAX_ARG_STRLEN)
INT_MAX_DIGITS = 18  # every whole-number setting fits a signed 64-bit integer, as verl and torch need
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT_TEXT = re.compile(r"[+-]?[0-9]+")  # ASCII digits only: int() also takes other scripts' digits
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # every control character but tab
# Names a secret goes by: any of these words as a part of the name (WANDB_API_KEY, RAY_AUTH_TOKEN, AWS_SECRET_...),
# or the last part ending in one (HFTOKEN, OPENAI_APIKEY). A last part naming where a secret is (…_TOKEN_PATH,
# …_KEY_FILE) or how it is used (…_MODE) is not a secret itself.
SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY")
SECRET_SUFFIXES = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY")
NOT_SECRET_LAST = ("PATH", "FILE", "DIR", "MODE")


@dataclass
class Layer:
    """One source of settings, kept so the run record can say where each value came from."""

    source: str
    values: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    secret_files: dict[str, str] = field(default_factory=dict)  # NAME -> path (never the content)


@dataclass
class Resolved:
    values: dict[str, Any]
    origin: dict[str, str]
    env_overrides: dict[str, str]
    env_origin: dict[str, str]
    warnings: list[str]
    secret_files: dict[str, str] = field(default_factory=dict)
    secret_origin: dict[str, str] = field(default_factory=dict)


def secret_looking(name: str) -> bool:
    """Whether an environment variable's name says it carries a secret (SECRET_WORDS)."""
    parts = [p for p in name.upper().split("_") if p]
    if not parts or parts[-1] in NOT_SECRET_LAST:
        return False
    return any(p in SECRET_WORDS for p in parts) or parts[-1].endswith(SECRET_SUFFIXES)


def secret_refusal(name: str, source: str) -> SettingsError:
    return SettingsError(
        f"{source}: {name} looks like a secret and would be written in plain text into the run record "
        f"(launch.json, command.sh) and the driver's command line; fix: put it in a root-only file and name it in "
        f"the site file's {SECRET_FILES_SECTION}: {{{name}: /path/to/file}} (docs/cluster.md, secrets), not as a value"
    )


def env_entry(name: Any, raw: Any, source: str) -> tuple[str, str]:
    """One launch-environment entry checked: a variable name, a one-line scalar value, and no secret."""
    key = str(name)
    if not ENV_NAME.fullmatch(key):
        raise SettingsError(
            f"{source}: {key!r} is not a secret's variable name; fix: use A-Z, 0-9 and '_' only, "
            "not starting with a digit"
        )
    if secret_looking(key):
        raise secret_refusal(key, source)
    if raw is None or isinstance(raw, bool | list | tuple | dict):
        shown = "null" if raw is None else type(raw).__name__
        raise SettingsError(
            f"{source}: {key}={raw!r} is a {shown}, not a text or number; fix: give the value itself, quoted "
            f'if it looks like something else ({key}: "1")'
        )
    if isinstance(raw, float) and (raw != raw or raw in (float("inf"), float("-inf"))):
        raise SettingsError(f"{source}: {key}={raw!r} is not a finite number; fix: give the value as text")
    value = str(raw)
    if _CONTROL.search(value):
        raise SettingsError(f"{source}: {key}={value!r} contains a control character; fix: give a one-line value")
    if len(value) > ENV_VALUE_MAX_CHARS:
        raise SettingsError(
            f"{source}: {key} is {len(value)} characters long; fix: keep it under {ENV_VALUE_MAX_CHARS} "
            "(a launch's exec refuses longer arguments)"
        )
    return key, value


def secret_file_entry(name: Any, raw: Any, source: str) -> tuple[str, str]:
    """One `secret_files` entry checked: a variable name and an absolute path the record may show."""
    key = str(name)
    where = f"{source} ({SECRET_FILES_SECTION}.{key})"
    if not SECRET_NAME_RE.fullmatch(key):
        raise SettingsError(f"{where}: {key!r} is not a secret's variable name; fix: use A-Z, 0-9 and '_' only")
    path = raw if isinstance(raw, str) else ""
    if not path.startswith("/") or _CONTROL.search(path) or any(c in path for c in ",= \t"):
        raise SettingsError(
            f"{where}: {raw!r} is not an absolute file path; fix: give the path of a root-only file every node "
            "mounts read-only (no spaces, ',' or '=' in it)"
        )
    return key, path


def canonical_key(key: str, source: str, warnings: list[str]) -> str:
    if key in BY_NAME:
        return key
    if key in ALIASES:
        canon = ALIASES[key]
        warnings.append(f"warning: {source}: '{key}' is upstream's spelling; use '{canon}' (value applied to {canon})")
        return canon
    if key.upper() in BY_NAME:
        canon = key.upper()
        warnings.append(f"warning: {source}: '{key}' read as '{canon}'")
        return canon
    hint = suggest(key[:100], list(BY_NAME) + list(ALIASES))
    if hint is not None:
        hint = ALIASES.get(hint, hint)
    did = f"; did you mean '{hint}'?" if hint else f"; fix: use one of the known settings: {', '.join(sorted(BY_NAME))}"
    raise SettingsError(f"{source}: unknown setting {key[:80]!r}{did}")


def coerce(name: str, raw: Any, source: str) -> Any:
    spec = BY_NAME[name]
    if raw is None:
        # `NAME:` or `NAME: null` in a site file is the line emptied, as `--set NAME=` is: the checks then name it
        raw = ""
    if isinstance(raw, dict) or (isinstance(raw, list | tuple) and spec.kind != "list"):
        raise SettingsError(
            f"{source}: {name} is given a {type(raw).__name__} ({str(raw)[:60]}); fix: give one {spec.kind} value"
        )
    if spec.kind == "int":
        text = str(raw).strip()
        if isinstance(raw, bool) or not _INT_TEXT.fullmatch(text):
            raise SettingsError(f"{source}: {name}={raw!r} is not an integer; fix: give a whole number in ASCII digits")
        if len(text.lstrip("+-")) > INT_MAX_DIGITS:
            raise SettingsError(
                f"{source}: {name}={text[:24]}... has more than {INT_MAX_DIGITS} digits; fix: give a whole number "
                f"of at most {INT_MAX_DIGITS} digits"
            )
        return int(text)
    if spec.kind == "float":
        text = str(raw).strip()
        if isinstance(raw, bool) or not _FLOAT_TEXT.fullmatch(text):
            raise SettingsError(
                f"{source}: {name}={raw!r} is not a number; fix: give a number in ASCII digits such as 1e-6"
            )
        number = float(text)
        if number in (float("inf"), float("-inf")):
            raise SettingsError(f"{source}: {name}={raw!r} is not a finite number; fix: give a number such as 1e-6")
        return text  # kept as written, so the rendered launch shows the user's spelling
    if spec.kind == "bool":
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise SettingsError(f"{source}: {name}={raw!r} is not a boolean; fix: use true or false")
    if spec.kind == "list":
        items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
        if any(isinstance(i, list | tuple | dict) or i is None for i in items):
            raise SettingsError(f"{source}: {name}={raw!r} holds a non-text item; fix: give a list of plain values")
        out = [str(i).strip() for i in items if str(i).strip()]
        if any(_CONTROL.search(i) for i in out):
            raise SettingsError(f"{source}: {name}={raw!r} contains a control character; fix: give plain values")
        return out
    value = str(raw).strip()
    if _CONTROL.search(value):
        raise SettingsError(f"{source}: {name}={value!r} contains a control character; fix: give a plain {spec.kind}")
    if spec.choices and value not in spec.choices:
        raise SettingsError(f"{source}: {name}={value!r} is not one of {', '.join(spec.choices)}; fix: use one of them")
    return value


def layer_from_mapping(data: Mapping[str, Any], source: str, warnings: list[str]) -> Layer:
    layer = Layer(source)
    for key, raw in data.items():
        if key == ENV_SECTION:
            if not isinstance(raw, Mapping):
                raise SettingsError(f"{source}: '{ENV_SECTION}' must map variable names to values; fix: NAME: value")
            layer.env.update(env_entry(k, v, f"{source} ({ENV_SECTION})") for k, v in raw.items())
            continue
        if key == SECRET_FILES_SECTION:
            if not isinstance(raw, Mapping):
                raise SettingsError(
                    f"{source}: '{SECRET_FILES_SECTION}' must map variable names to file paths; fix: NAME: /path"
                )
            layer.secret_files.update(secret_file_entry(k, v, source) for k, v in raw.items())
            continue
        name = canonical_key(str(key), source, warnings)
        layer.values[name] = coerce(name, raw, source)
    return layer


def read_site_yaml(path: Path) -> Any:
    """A site file's plain YAML data, or one SettingsError naming the file, what is wrong and the fix."""
    where = f"site file {path}"
    try:
        if not path.is_file():
            raise SettingsError(f"{where} does not exist; fix: pass an existing --site file (or VERL_RECIPE_SITE)")
        size = path.stat().st_size
        if size > SITE_FILE_MAX_BYTES:
            raise SettingsError(f"{where} is {size} bytes; fix: a site file is SETTING: value lines, under 1 MiB")
        raw = path.read_bytes()
    except OSError as exc:
        raise SettingsError(f"{where} cannot be read ({exc.strerror}); fix: pass a readable --site file") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{where}: byte {exc.start} is not UTF-8; fix: save the file as UTF-8") from None
    try:
        # The parser is iterative; only the composer recurses. Depth and aliases are checked on the events first.
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise SettingsError(f"{where}: uses a YAML alias (*name); fix: write the value out")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > SITE_FILE_MAX_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else "?"
                    raise SettingsError(
                        f"{where}: line {line} nests deeper than {SITE_FILE_MAX_DEPTH} levels; fix: a site file "
                        f"holds SETTING: value, {ENV_SECTION}:, {SECRET_FILES_SECTION}: and {RECIPES_SECTION}: only"
                    )
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SettingsError(
            f"{where}: not plain YAML ({at}{problem}); fix: write SETTING: value lines, with no tags (!!python/...)"
        ) from None


def layers_from_site_file(path: Path, warnings: list[str], recipe: str | None = None) -> list[Layer]:
    data = read_site_yaml(path) or {}
    if not isinstance(data, dict):
        raise SettingsError(f"site file {path}: expected a mapping of SETTING: value; fix: write SETTING: value lines")
    return site_layers(data, f"site file {path}", warnings, recipe)


def site_layers(data: dict[str, Any], source: str, warnings: list[str], recipe: str | None) -> list[Layer]:
    """A site's settings for every recipe, then its `recipes: {NAME: {...}}` section for this one on top (its own
    layer, so the run record says which part of the site file a value came from)."""
    data = dict(data)
    sections = data.pop(RECIPES_SECTION, None) or {}
    if not isinstance(sections, dict) or not all(isinstance(v, dict) for v in sections.values()):
        raise SettingsError(
            f"{source}: '{RECIPES_SECTION}' must map recipe names to SETTING: value mappings; fix: "
            f"{RECIPES_SECTION}: {{RECIPE: {{SETTING: value}}}}"
        )
    layers = [layer_from_mapping(data, source, warnings)]
    if recipe is not None and recipe in sections:
        layers.append(layer_from_mapping(sections[recipe], f"{source} ({RECIPES_SECTION}.{recipe})", warnings))
    return layers


def layer_from_environ(environ: Mapping[str, str], env_keys: set[str], warnings: list[str]) -> Layer:
    """Canonical names and upstream aliases found in the process environment, plus launch-env overrides."""
    layer = Layer("environment")
    for name in BY_NAME:
        if name in environ:
            layer.values[name] = coerce(name, environ[name], "environment")
    for alias, canon in ALIASES.items():
        if alias in environ and canon not in environ:
            warnings.append(f"warning: environment: '{alias}' is upstream's spelling; use '{canon}'")
            layer.values[canon] = coerce(canon, environ[alias], "environment")
    for key in env_keys:
        if key in environ:
            layer.env[key] = environ[key]
    return layer


def layer_from_sets(pairs: list[str], warnings: list[str]) -> Layer:
    layer = Layer("--set")
    for pair in pairs:
        if "=" not in pair:
            raise SettingsError(f"--set {pair[:80]!r}: expected KEY=VALUE; fix: e.g. --set TP=4")
        key, raw = pair.split("=", 1)
        key = key.strip()
        if key.startswith(ENV_SECTION + "."):
            var, value = env_entry(key[len(ENV_SECTION) + 1 :], raw, f"--set {key}")
            layer.env[var] = value
            continue
        name = canonical_key(key, f"--set {key}", warnings)
        layer.values[name] = coerce(name, raw, f"--set {key}")
    return layer


def merge(layers: list[Layer], warnings: list[str]) -> Resolved:
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    env: dict[str, str] = {}
    env_origin: dict[str, str] = {}
    secrets: dict[str, str] = {}
    secret_origin: dict[str, str] = {}
    for layer in layers:
        for k, v in layer.values.items():
            values[k] = v
            origin[k] = layer.source
        for k, v in layer.env.items():
            env[k] = v
            env_origin[k] = layer.source
        for k, v in layer.secret_files.items():
            secrets[k] = v
            secret_origin[k] = layer.source
    for k in set(env) & set(secrets):
        raise SettingsError(
            f"{env_origin[k]}: {k} is both a launch-environment value and a secret file ({secret_origin[k]}); "
            f"fix: keep it in {SECRET_FILES_SECTION} only"
        )
    return Resolved(values, origin, env, env_origin, warnings, secrets, secret_origin)


def default_site_file(environ: Mapping[str, str] = os.environ) -> Path | None:
    raw = environ.get("VERL_RECIPE_SITE")
    return Path(raw) if raw else None
