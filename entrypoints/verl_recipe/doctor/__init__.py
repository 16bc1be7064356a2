"""`verl-recipe doctor`: check that this container can run the recipe, and say how to fix what it cannot.

Checks, in order: the versions manifest; installed packages against its pins; the image record (packages changed
since the build); torch_npu (import and version only); the dies and the driver's control nodes, counted by name in
the host's /dev (VERL_RECIPE_DEV_DIR; compose.yaml mounts it read-only at /host-dev); the driver (HDK) version
against what CANN needs (host.hdk_min);
whether verl's rollout can sync weights over IPC (the driver's and CANN's versions, verl 0.8.0's rule);
the HCCL / Gloo / TensorPipe NIC variables; the shared paths; free space for checkpoints; Ray token
authentication (this container's settings, and whether the cluster at HEAD_ADDR demands a token).

The doctor opens no die: the Ray node on the host holds all of them, and with device sharing off (the driver's
default) a second container opening one gets -8020 "device is used". compose.yaml hands it no device at all, and
nothing here calls torch.npu.device_count / set_device or runs npu-smi.

With VERL_RECIPE_SIMULATED=1 (the simulated cluster) a missing NPU, driver or NPU-only package is an expected
finding, reported as such, not a failure; the simulated host's dies are counted as a real host's are.

Exit codes: 0 = no check failed (warnings and expected findings allowed); 1 = at least one check failed (each
failure carries its fix); 2 = usage error (bad option or bad VERL_RECIPE_SIMULATED value).

`--json` prints {"ok", "exit_code", "simulated", "checks": [{"name", "status", "detail", "fix"}]}, with status one
of ok | warn | fail | expected. `--record DIR` (used by the image build) writes DIR/image-manifest.json and
DIR/pip-freeze.txt instead of checking.

Stdlib + PyYAML only, so it runs on the image's Python with nothing else installed.

By part: findings (Finding, the paths and names every check shares), probes (what this container reads of itself),
packages (pins and the image record), devices (dies, torch_npu, driver), ipc (weight sync over IPC), network (NIC
variables), storage (shared paths and checkpoint space), rayauth (Ray token authentication), record (the image
record written at build time)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from ..exitcodes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from ..manifest import load_manifest, manifest_path
from .devices import check_dies, check_driver, check_npu
from .findings import (
    DIST_NAMES,
    DRIVER_INFO,
    IMAGE_RECORD_DIR,
    MIN_FREE_GB_SIM,
    SIM_STRICT,
    Finding,
    UsageError,
)
from .ipc import check_ipc
from .network import check_nics, nic_matches
from .packages import check_packages, check_record
from .probes import hdk_key, local_addresses, simulated_from_env
from .rayauth import check_ray_auth
from .record import write_record
from .storage import check_ckpt_space, check_paths, check_recipes_space

# What callers and tests use of the checks' modules, besides main.
__all__ = [
    "DIST_NAMES",
    "SIM_STRICT",
    "Finding",
    "check_packages",
    "check_ray_auth",
    "hdk_key",
    "local_addresses",
    "main",
    "nic_matches",
    "run_checks",
]

# ---------------------------------------------------------------------------------------------------------------
# main


def run_checks(args: argparse.Namespace, env: dict[str, str], simulated: bool) -> list[Finding]:
    try:
        manifest = load_manifest(str(manifest_path()))
    except (FileNotFoundError, ValueError) as exc:
        return [Finding("manifest", "fail", str(exc), "set VERL_RECIPE_MANIFEST to the image's versions.yaml")]
    checks = [Finding("manifest", "ok", str(manifest_path()))]
    checks += check_packages(manifest, simulated)
    checks.append(check_record(Path(args.record_dir)))
    checks.append(check_npu(manifest, simulated))
    checks.append(check_dies(manifest, env, simulated, Path(args.dev_dir or env.get("VERL_RECIPE_DEV_DIR") or "/dev")))
    checks.append(check_driver(manifest, simulated, Path(args.driver_info)))
    checks.append(check_ipc(simulated, Path(args.driver_info), env))
    checks += check_nics(env, Path(args.sys_net))
    checks += check_paths(env)
    if args.min_free_gb is not None or simulated:
        # the simulated cluster's stand-in saves are tiny; a site's own figure for a smaller model or CKPT_KEEP
        checks.append(check_ckpt_space(env, args.min_free_gb if args.min_free_gb is not None else MIN_FREE_GB_SIM))
    else:
        checks.append(check_recipes_space(env))  # every recipe's kept saves, the figure validate refuses on
    checks += check_ray_auth(env)
    return checks


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="verl-recipe doctor",
        description="Check this container against the versions manifest and the cluster contract.",
        epilog="Exit codes: 0 ok, 1 a check failed (each failure prints its fix), 2 usage error.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--min-free-gb", type=float, default=None, help="free space needed at CKPT_DIR")
    p.add_argument("--driver-info", default=str(DRIVER_INFO), help=argparse.SUPPRESS)
    p.add_argument("--dev-dir", default=None, help=argparse.SUPPRESS)  # default: $VERL_RECIPE_DEV_DIR or /dev
    p.add_argument("--sys-net", default="/sys/class/net", help=argparse.SUPPRESS)
    p.add_argument("--record-dir", default=str(IMAGE_RECORD_DIR), help=argparse.SUPPRESS)
    p.add_argument("--record", metavar="DIR", help="write the image record to DIR (image build) and exit")
    p.add_argument("--record-meta", action="append", default=[], metavar="KEY=VALUE", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on bad options and 0 on --help
        return int(exc.code) if isinstance(exc.code, int) else EXIT_BAD_INPUT
    env = dict(os.environ)
    try:
        simulated = simulated_from_env(env)
        if args.min_free_gb is not None and args.min_free_gb < 0:
            raise UsageError(f"--min-free-gb {args.min_free_gb:g}: must be >= 0")
        if args.record:
            meta: dict[str, str] = {}
            for item in args.record_meta:
                key, sep, value = item.partition("=")
                if not sep or not key:
                    raise UsageError(f"--record-meta {item!r}: expected KEY=VALUE")
                meta[key] = value
            return write_record(Path(args.record), meta)
    except UsageError as exc:
        print(f"verl-recipe doctor: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    checks = run_checks(args, env, simulated)
    failed = [c for c in checks if c.status == "fail"]
    code = EXIT_FAILED if failed else EXIT_OK
    if args.json:
        doc = {"ok": not failed, "exit_code": code, "simulated": simulated, "checks": [asdict(c) for c in checks]}
        print(json.dumps(doc, indent=2))
    else:
        marks = {"ok": " ok ", "warn": "warn", "fail": "FAIL", "expected": "expd"}
        for c in checks:
            print(f"[{marks[c.status]}] {c.name}: {c.detail}")
            if c.fix:
                print(f"       fix: {c.fix}")
        print(f"{len(failed)} failed, {len(checks) - len(failed)} passed ({'simulated' if simulated else 'real'} mode)")
    return code
