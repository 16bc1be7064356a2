"""The image record (`--record DIR`, at image build time): installed packages and build metadata."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from ..exitcodes import EXIT_OK
from ..manifest import load_manifest, manifest_path
from .findings import DIST_NAMES, FREEZE_FILE, RECORD_FILE
from .probes import installed_version

# ---------------------------------------------------------------------------------------------------------------
# record (image build)


def installed_packages() -> dict[str, str]:
    out: dict[str, str] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name:
            out[name] = dist.version
    return dict(sorted(out.items(), key=lambda kv: kv[0].lower()))


def write_record(dest: Path, meta: dict[str, str]) -> int:
    path = manifest_path()
    manifest = load_manifest(str(path))
    dest.mkdir(parents=True, exist_ok=True)
    pkgs = installed_packages()
    if importlib.util.find_spec("pip") is not None:
        tool = "pip freeze --all"
        freeze = subprocess.run(
            [sys.executable, "-m", "pip", "freeze", "--all"], check=True, capture_output=True, text=True
        ).stdout
    else:  # an environment without pip (uv-made venvs): the same name==version list from the metadata
        tool = "importlib.metadata"
        freeze = "".join(f"{name}=={version}\n" for name, version in pkgs.items())
    (dest / FREEZE_FILE).write_text(freeze)
    pins = {}
    for key, pin in manifest.get("python_packages", {}).items():
        dist = DIST_NAMES.get(key, key.replace("_", "-"))
        pins[key] = {"pin": str(pin), "installed": installed_version(dist)}
    record = {
        "schema": 1,
        "manifest_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "python": ".".join(str(x) for x in sys.version_info[:3]),
        "meta": dict(sorted(meta.items())),
        "pins": pins,
        "packages": pkgs,
        "pip_freeze_sha256": hashlib.sha256(freeze.encode()).hexdigest(),
        "freeze_tool": tool,
    }
    (dest / RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"recorded {len(pkgs)} packages in {dest / RECORD_FILE} and {dest / FREEZE_FILE}")
    return EXIT_OK
