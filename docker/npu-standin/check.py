#!/usr/bin/env python3
"""The rehearsal's checks on the image built from docker/npu/Dockerfile over the stand-in base
(`make image-npu-rehearsal`).

Usage: check.py IMAGE
For the train-397b, doctor, prepare-data and ray-head services of compose.yaml, runs through that service's own
entrypoint (the x-cann-env wrapper): the environment it gives (CANN's three set_env.sh files sourced, the venv first
on PATH, PATH and PYTHONPATH extending the base's), then `verl-recipe doctor --json` (VERL_RECIPE_SIMULATED=1: the
stand-in has no NPU and no driver, which the doctor reports as expected). `pip check` and the import smoke test ran
inside the build already. Exit 0 when every check holds, 1 otherwise; one line per failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("train-397b", "doctor", "prepare-data", "ray-head")
# Set by the stand-in's three set_env.sh files (docker/npu-standin/rootfs).
MARKERS = ("VERL_RECIPE_STANDIN_TOOLKIT_ENV", "VERL_RECIPE_STANDIN_ASCENDNPU_IR_ENV", "VERL_RECIPE_STANDIN_NNAL_ENV")
DOCTOR_ENV = {
    "VERL_RECIPE_SIMULATED": "1",
    "HCCL_SOCKET_IFNAME": "eth0",
    "GLOO_SOCKET_IFNAME": "eth0",
    "TP_SOCKET_IFNAME": "eth0",
    "SHARED_ROOT": "/mnt/shared",
    "MODEL_PATH": "/mnt/shared/models/m",
    "TRAIN_FILES": "/mnt/shared/data/train.parquet",
    "VAL_FILES": "/mnt/shared/data/test.parquet",
    "CKPT_DIR": "/mnt/shared/checkpoints",
}


def wrapper_of(service: str) -> list[str]:
    """The part of the service's entrypoint before the recipe command: [bash, -c, SCRIPT, NAME], $$ unescaped."""
    data = yaml.safe_load((ROOT / "compose.yaml").read_text())
    svc = data["services"][service]
    entry = svc.get("entrypoint") or data["x-ascend-node"]["entrypoint"]
    return [part.replace("$$", "$") for part in entry[:4]]


def run(image: str, service: str, command: list[str], shared: Path) -> subprocess.CompletedProcess[str]:
    first, *rest = wrapper_of(service)
    flags = [x for k, v in DOCTOR_ENV.items() for x in ("-e", f"{k}={v}")]
    mount = ["-v", f"{shared}:/mnt/shared"]
    cmd = ["docker", "run", "--rm", *mount, *flags, "--entrypoint", first, image, *rest, *command]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)


def check_service(image: str, service: str, shared: Path) -> list[str]:
    errors = []
    env_out = run(image, service, ["env"], shared)
    if env_out.returncode != 0:
        return [f"{service}: its entrypoint failed: {env_out.stderr.strip()[-300:]}"]
    env = dict(line.split("=", 1) for line in env_out.stdout.splitlines() if "=" in line)
    for marker in MARKERS:
        if env.get(marker) != "1":
            errors.append(f"{service}: {marker} not set: the entrypoint did not source that set_env.sh")
    path = env.get("PATH", "").split(":")
    if not path or path[0] != "/opt/venv/bin":
        errors.append(f"{service}: PATH does not start with /opt/venv/bin: {env.get('PATH')}")
    if not any(p.startswith("/usr/local/Ascend/") for p in path):
        errors.append(f"{service}: PATH lost the CANN directories of the base image: {env.get('PATH')}")
    pythonpath = env.get("PYTHONPATH", "").split(":")
    if "/opt/megatron-bridge/src" not in pythonpath or not any("/python/site-packages" in p for p in pythonpath):
        errors.append(f"{service}: PYTHONPATH should hold Megatron-Bridge and CANN's Python: {env.get('PYTHONPATH')}")
    if "" in pythonpath:
        errors.append(f"{service}: PYTHONPATH has an empty entry (the current directory): {env.get('PYTHONPATH')}")
    doc = run(image, service, ["verl-recipe", "doctor", "--json"], shared)
    try:
        report = json.loads(doc.stdout)
    except json.JSONDecodeError:
        return [*errors, f"{service}: doctor --json printed no JSON (rc {doc.returncode}): {doc.stderr.strip()[-300:]}"]
    failed = [c["name"] for c in report.get("checks", []) if c.get("status") == "fail"]
    if doc.returncode != 0 or failed:
        errors.append(f"{service}: doctor exit {doc.returncode}, failed checks {failed}")
    return errors


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: check.py IMAGE", file=sys.stderr)
        return 2
    image = argv[0]
    labels = subprocess.run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image],
                            capture_output=True, text=True, check=False)  # fmt: skip
    if labels.returncode != 0:
        print(f"check: image {image} not found: run make image-npu-rehearsal", file=sys.stderr)
        return 2
    if json.loads(labels.stdout).get("io.verl-recipe.rehearsal") != "standin":
        print(f"check: {image} is not a rehearsal image (label io.verl-recipe.rehearsal != standin)", file=sys.stderr)
        return 2
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="verl-recipe-rehearsal-") as tmp:
        shared = Path(tmp)
        for d in ("models/m", "data", "checkpoints"):
            (shared / d).mkdir(parents=True)
        for f in ("data/train.parquet", "data/test.parquet"):
            (shared / f).write_text("x")
        for service in SERVICES:
            found = check_service(image, service, shared)
            print(f"rehearsal: {service}: {'ok' if not found else 'FAILED'}")
            errors += found
    for e in errors:
        print(f"rehearsal: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
