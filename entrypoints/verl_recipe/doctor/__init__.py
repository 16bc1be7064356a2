"""`verl-recipe doctor`: check that this container can run the recipe, and say how to fix what it cannot.

Checks, in order: the versions manifest; installed packages against its pins; the image record (packages changed
since the build); torch_npu (import and version only); the dies and the driver's control nodes, counted by name in
the host's /dev (VERL_RECIPE_DEV_DIR; compose.yaml mounts it read-only at /host-dev); the driver (HDK) version
against what CANN needs (host.hdk_min);
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
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .. import a3facts
from ..exitcodes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from ..layers import default_site_file, read_site_yaml
from ..manifest import load_manifest, manifest_path
from ..settingtypes import SettingsError
from ..topology import RAY_DASHBOARD_PORT

DRIVER_INFO = Path("/usr/local/Ascend/driver/version.info")
IMAGE_RECORD_DIR = Path("/opt/verl-recipe")
RECORD_FILE = "image-manifest.json"
FREEZE_FILE = "pip-freeze.txt"
# Free space for checkpoints. A Qwen3.5-397B checkpoint with optimizer state takes several TB on shared
# storage; 500 GB is the floor below which even one save fails. The simulated cluster saves tiny checkpoints.
MIN_FREE_GB_REAL = 500.0
MIN_FREE_GB_SIM = 1.0

# Manifest key -> distribution name. Only the packages that the simulated runtime also carries are checked
# strictly there; the rest exist only in the NPU image.
DIST_NAMES = {
    "torch": "torch",
    "torchvision": "torchvision",
    "torch_npu": "torch-npu",
    "triton_ascend": "triton-ascend",
    "ray": "ray",
    "transfer_queue": "TransferQueue",
    "flash_linear_attention": "flash-linear-attention",
    "hydra_core": "hydra-core",
    "omegaconf": "omegaconf",
    "pyyaml": "PyYAML",
    "megatron_core": "megatron-core",
}
SIM_STRICT = ("ray", "hydra_core", "omegaconf", "pyyaml")
# git_sources entries installed as distributions (with their release version) in the NPU image.
GIT_DISTS = {"verl": "verl", "vllm": "vllm", "vllm_ascend": "vllm-ascend"}
NIC_VARS = ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")
PATH_VARS = ("SHARED_ROOT", "MODEL_PATH", "TRAIN_FILES", "VAL_FILES")
# The driver's control nodes a3-tools T11 lists beside the dies /dev/davinci0..15.
CONTROL_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")
_DIE_NODE = re.compile(r"^davinci(\d+)$")


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail | expected
    detail: str
    fix: str = ""


class UsageError(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------------
# helpers


def simulated_from_env(env: dict[str, str]) -> bool:
    raw = env.get("VERL_RECIPE_SIMULATED", "0").strip()
    if raw not in ("0", "1", ""):
        raise UsageError(f"VERL_RECIPE_SIMULATED={raw!r}: use 1 (simulated cluster) or 0 (real A3)")
    return raw == "1"


def installed_version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def same_version(installed: str, pin: str) -> bool:
    """Exact match; a local build tag (`+cpu`) on the installed side is ignored."""
    return installed == pin or installed.split("+", 1)[0] == pin


def hdk_key(version: str) -> tuple[int, ...]:
    """Order Ascend HDK versions (a3facts.hdk_key): 25.5.0 < 26.0.RC1 < 26.0.RC2 < 26.0.0 < 26.0.1."""
    return a3facts.hdk_key(version)


def read_driver_version(path: Path) -> str | None:
    """The HDK release a driver version.info names, None when the file is absent."""
    if not path.is_file():
        return None
    return a3facts.hdk_version(a3facts.parse_version_info(path.read_text(errors="replace"))) or None


def local_addresses() -> set[str]:
    """IPv4 addresses of this network namespace, from /proc/net/fib_trie (stdlib only, no ioctl)."""
    addrs: set[str] = set()
    try:
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
    except OSError:
        return addrs
    for prev, line in zip(lines, lines[1:], strict=False):
        if "/32 host LOCAL" in line:
            addrs.add(prev.split()[-1])
    return addrs


def interfaces(sys_net: Path) -> list[str]:
    try:
        return sorted(p.name for p in sys_net.iterdir())
    except OSError:
        return []


# ---------------------------------------------------------------------------------------------------------------
# checks


def check_packages(manifest: dict[str, Any], simulated: bool) -> list[Check]:
    out: list[Check] = []
    pins: dict[str, Any] = manifest.get("python_packages", {})
    for key, pin in pins.items():
        dist = DIST_NAMES.get(key, key.replace("_", "-"))
        have = installed_version(dist)
        name = f"package:{dist}"
        if simulated and key not in SIM_STRICT:
            if key == "torch" and have:
                out.append(Check(name, "expected", f"CPU stand-in {have} (the NPU image pins {pin})"))
            elif have and same_version(have, str(pin)):
                out.append(Check(name, "ok", f"{have}"))
            else:
                out.append(Check(name, "expected", f"{have or 'not installed'}: NPU image only (pin {pin})"))
            continue
        if have is None:
            out.append(Check(name, "fail", f"not installed (pin {pin})", "rebuild the image with `make image-npu`"))
        elif not same_version(have, str(pin)):
            out.append(
                Check(
                    name,
                    "fail",
                    f"installed {have}, manifest pins {pin}",
                    f"rebuild the image from docker/versions.yaml; never `pip install {dist}` in a container",
                )
            )
        else:
            out.append(Check(name, "ok", have))
    for key, dist in GIT_DISTS.items():
        src = manifest.get("git_sources", {}).get(key)
        if not src:
            continue
        pin = str(src.get("version", ""))
        have = installed_version(dist)
        name = f"package:{dist}"
        if simulated and key != "verl":
            out.append(Check(name, "expected", f"{have or 'not installed'}: NPU image only (pin {pin})"))
        elif have is None:
            out.append(Check(name, "fail", f"not installed (pin {pin})", "rebuild the image with `make image-npu`"))
        elif not same_version(have, pin) and not have.startswith(pin):
            out.append(Check(name, "fail", f"installed {have}, manifest pins {pin}", "rebuild the image"))
        else:
            out.append(Check(name, "ok", have))
    return out


def check_record(record_dir: Path) -> Check:
    record = record_dir / RECORD_FILE
    if not record.is_file():
        return Check("image-record", "warn", f"{record} not found (not running in a verl-recipe image)")
    try:
        data = json.loads(record.read_text())
        recorded: dict[str, str] = data["packages"]
    except (ValueError, KeyError, TypeError):
        return Check("image-record", "fail", f"{record} is unreadable", "rebuild the image")
    now = installed_packages()
    changed = sorted({k for k in recorded.keys() | now.keys() if recorded.get(k) != now.get(k) and k != "verl-recipe"})
    if changed:
        shown = ", ".join(f"{k} {recorded.get(k, '-')}->{now.get(k, '-')}" for k in changed[:8])
        return Check(
            "image-record",
            "fail",
            f"{len(changed)} package(s) differ from the image build: {shown}",
            "packages were changed inside the container: recreate it from the image (`docker compose up` again)",
        )
    return Check(
        "image-record", "ok", f"{len(recorded)} packages as built ({data.get('meta', {}).get('vcs_ref', '?')})"
    )


def expected_dies(manifest: dict[str, Any], env: dict[str, str]) -> tuple[str, int]:
    """(the setting it comes from, dies per node): node.env's NODE_DIES (as for the Ray node), a recipe's
    NDEVICES_PER_NODE, else the manifest's A3 figure. ValueError names the variable and its bad value."""
    for var in ("NODE_DIES", "NDEVICES_PER_NODE"):
        raw = env.get(var, "").strip()
        if raw:
            if not raw.isdigit() or int(raw) < 1:
                raise ValueError(f"{var}={raw!r} is not a whole number of dies >= 1")
            return var, int(raw)
    return "host.dies_per_node.a3", int(manifest.get("host", {}).get("dies_per_node", {}).get("a3", 16))


def list_device_nodes(dev_dir: Path) -> tuple[dict[int, Path], dict[str, Path]]:
    """The dies (davinciN) and the driver's control nodes named in dev_dir. Names and stat only: nothing is opened."""
    dies: dict[int, Path] = {}
    control: dict[str, Path] = {}
    for name in os.listdir(dev_dir):
        m = _DIE_NODE.match(name)
        if m:
            dies[int(m.group(1))] = dev_dir / name
        elif name in CONTROL_NODES:
            control[name] = dev_dir / name
    return dies, control


def _not_char_devices(paths: list[Path]) -> list[str]:
    out = []
    for p in paths:
        try:
            if not stat.S_ISCHR(p.stat().st_mode):
                out.append(p.name)
        except OSError:
            out.append(p.name)
    return out


def _names(items: list[str], most: int = 6) -> str:
    return ", ".join(items[:most]) + (f" and {len(items) - most} more" if len(items) > most else "")


def check_dies(manifest: dict[str, Any], env: dict[str, str], simulated: bool, dev_dir: Path) -> Check:
    """Count this host's dies by their device nodes, as the Ray node does, without opening one.

    compose.yaml gives the doctor no device at all and mounts the host's /dev read-only at /host-dev
    (VERL_RECIPE_DEV_DIR): the Ray node holds every die, and with device sharing off (the driver's default) a second
    container that opens one gets -8020 "device is used". The container's device cgroup refuses an open of any
    node there, so listing the names is all the doctor can do with them, and all it does.
    """
    try:
        source, want = expected_dies(manifest, env)
    except ValueError as exc:
        return Check(
            "npu-dies",
            "fail",
            str(exc),
            "set NODE_DIES in node.env to the dies per host (16 on an A3 node; "
            "deploy.yml writes it from site_expected_dies)",
        )
    try:
        dies, control = list_device_nodes(dev_dir)
    except OSError as exc:
        return Check(
            "npu-dies",
            "fail",
            f"cannot list the device nodes in {dev_dir} ({exc.strerror or type(exc).__name__})",
            "run it as `docker compose run --rm doctor`: compose.yaml mounts the host's /dev read-only at /host-dev "
            "and sets VERL_RECIPE_DEV_DIR=/host-dev",
        )
    if simulated and not dies and not control:
        return Check(
            "npu-dies",
            "expected",
            f"no device nodes in {dev_dir}: not a simulated host's /dev (compose.sim.yaml mounts it at /host-dev)",
        )
    missing = [f"davinci{i}" for i in range(want) if i not in dies]
    extra = sorted(i for i in dies if i >= want)
    absent_control = [n for n in CONTROL_NODES if n not in control]
    if missing:
        return Check(
            "npu-dies",
            "fail",
            f"{want - len(missing)} of {want} dies in {dev_dir} ({source}={want}): {_names(missing)} missing",
            "the host lost a die or its driver: check `npu-smi info` on this host (deploy.yml's preflight row "
            "device_nodes names the same), reload or reinstall the driver, then restart the Ray node",
        )
    if extra:
        return Check(
            "npu-dies",
            "fail",
            f"{len(dies)} dies in {dev_dir}, {source}={want} (extra: {_names([f'davinci{i}' for i in extra])})",
            "set site_expected_dies to the dies this host has (16 on an A3 node) and re-run deploy.yml",
        )
    if absent_control:
        return Check(
            "npu-dies",
            "fail",
            f"{_names(absent_control)} missing in {dev_dir}: no die can be opened without the driver's control nodes",
            "reload or reinstall the Ascend driver on this host (its install creates them), then restart the Ray node",
        )
    if not simulated:
        # The simulated hosts may lack CAP_MKNOD and write empty files instead; a real host has character devices.
        bad = _not_char_devices([*dies.values(), *control.values()])
        if bad:
            return Check(
                "npu-dies",
                "fail",
                f"{_names(bad)} in {dev_dir} is not a character device",
                "something replaced the driver's device nodes: reload the Ascend driver (or reboot) on this host",
            )
    return Check("npu-dies", "ok", f"{want} dies and {', '.join(CONTROL_NODES)} in {dev_dir} (not opened)")


def has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ValueError:  # in sys.modules without a spec
        return True


def import_torch_npu() -> Any:
    """Import torch_npu with anything its native libraries print sent to stderr, so `--json` stays parseable.

    Only the import: torch_npu initialises ACL on a die lazily (device_count, set_device, the first tensor), and the
    doctor calls none of those.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        return importlib.import_module("torch_npu")
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def check_npu(manifest: dict[str, Any], simulated: bool) -> Check:
    """torch_npu: that it imports and is the manifest's version. It opens no die (check_dies counts them)."""
    pin = str(manifest.get("python_packages", {}).get("torch_npu", ""))
    if simulated:
        present = has_module("torch_npu")
        detail = "torch_npu present, NPU not used (simulated)" if present else "no NPU (simulated runtime)"
        return Check("npu", "expected", detail)
    fix_driver = "mount the host driver (/usr/local/Ascend/driver) and source CANN set_env.sh in the container"
    try:
        module = import_torch_npu()
    except ModuleNotFoundError as exc:
        if exc.name != "torch_npu":
            return Check("npu", "fail", f"torch_npu import failed: {type(exc).__name__}: {exc}", fix_driver)
        return Check("npu", "fail", "torch_npu is not installed", "use the NPU image (`make image-npu`)")
    except Exception as exc:  # noqa: BLE001 - any import/driver error is the finding itself
        return Check("npu", "fail", f"torch_npu import failed: {type(exc).__name__}: {exc}", fix_driver)
    version = str(getattr(module, "__version__", "") or "")
    where = getattr(module, "__file__", None) or "?"
    if not version or not same_version(version, pin):
        return Check(
            "npu",
            "fail",
            f"torch_npu {version or '(no __version__)'} imported from {where}, the manifest pins {pin}",
            "rebuild the image from docker/versions.yaml; put no other torch_npu on PYTHONPATH",
        )
    return Check("npu", "ok", f"torch_npu {version} imports (no die opened: the Ray node holds them)")


def check_driver(manifest: dict[str, Any], simulated: bool, info: Path) -> Check:
    need = str(manifest.get("host", {}).get("hdk_min", ""))
    have = read_driver_version(info)
    if have is None:
        if simulated:
            return Check("driver", "expected", f"no driver ({info} absent; simulated runtime)")
        return Check(
            "driver",
            "fail",
            f"{info} not found",
            f"install the Ascend HDK >= {need} on the host and mount /usr/local/Ascend/driver read-only",
        )
    try:
        ok = hdk_key(have) >= hdk_key(need)
    except ValueError as exc:
        return Check("driver", "fail", f"{info}: {exc}", f"install HDK >= {need} (driver + firmware)")
    if not ok:
        return Check(
            "driver",
            "fail",
            f"driver {have} is older than {need}, which CANN {manifest['base']['cann']['version']} needs",
            f"upgrade driver + firmware to HDK >= {need} on this host (firmware first when a driver is present)",
        )
    return Check("driver", "ok", f"driver {have} >= {need}")


def nic_matches(value: str, names: list[str]) -> bool:
    """HCCL_SOCKET_IFNAME syntax: `eth` prefix, `=eth0` exact, `^...` exclusions, comma lists."""
    for item in value.split(","):
        item = item.strip()
        if not item or item.startswith("^"):
            return True  # an exclusion list leaves the choice to HCCL
        if item.startswith("="):
            if item[1:] in names:
                return True
        elif any(n.startswith(item) for n in names):
            return True
    return False


def check_nics(env: dict[str, str], sys_net: Path) -> list[Check]:
    out: list[Check] = []
    names = interfaces(sys_net)
    for var in NIC_VARS:
        value = env.get(var, "")
        if not value:
            out.append(
                Check(
                    f"env:{var}",
                    "fail",
                    "not set",
                    f"set {var} to the cluster NIC in node.env (deploy.yml writes it from a3_cluster_nic)",
                )
            )
        elif names and not nic_matches(value, names):
            out.append(
                Check(
                    f"env:{var}",
                    "fail",
                    f"{value!r} matches no interface here ({', '.join(names)})",
                    f"set {var} to this host's cluster NIC (a3_cluster_nic in the inventory) and redeploy",
                )
            )
        else:
            out.append(Check(f"env:{var}", "ok", value))
    if_ip = env.get("HCCL_IF_IP", "")
    node_ip = env.get("NODE_IP", "")
    if if_ip:
        local = local_addresses()
        if local and if_ip not in local:
            out.append(
                Check(
                    "env:HCCL_IF_IP",
                    "fail",
                    f"{if_ip} is not an address of this host ({', '.join(sorted(local))})",
                    "set HCCL_IF_IP to this host's a3_cluster_ip and redeploy",
                )
            )
        elif node_ip and node_ip != if_ip:
            out.append(Check("env:HCCL_IF_IP", "fail", f"{if_ip} != NODE_IP {node_ip}", "both must be a3_cluster_ip"))
        else:
            out.append(Check("env:HCCL_IF_IP", "ok", if_ip))
    return out


def with_site_paths(env: dict[str, str]) -> dict[str, str]:
    """The path settings the environment lacks, from the site file's site-wide part (deploy.yml's site.yaml holds
    TRAIN_FILES and VAL_FILES; node.env holds the rest)."""
    site = default_site_file(env)
    if site is None or not site.is_file():
        return env
    try:
        data = read_site_yaml(site)
    except SettingsError:
        return env  # the launch's own validation names what is wrong with the site file
    if not isinstance(data, dict):
        return env
    merged = dict(env)
    for var in PATH_VARS:
        value = data.get(var)
        if var not in merged and isinstance(value, (str, list)):
            merged[var] = value if isinstance(value, str) else ",".join(str(v) for v in value)
    return merged


def check_paths(env: dict[str, str]) -> list[Check]:
    out: list[Check] = []
    env = with_site_paths(env)
    for var in PATH_VARS:
        value = env.get(var, "")
        if not value:
            fix = f"set {var} in node.env or the site file (deploy.yml writes both)"
            out.append(Check(f"path:{var}", "fail", "not set", fix))
            continue
        missing = [p for p in value.split(",") if p and not Path(p).exists()]
        if missing:
            out.append(
                Check(
                    f"path:{var}",
                    "fail",
                    f"{', '.join(missing)} not found",
                    f"mount the shared storage at the same path on every host and put the files there ({var})",
                )
            )
        else:
            out.append(Check(f"path:{var}", "ok", value))
    return out


def nearest_existing(path: Path) -> Path:
    return Path(a3facts.nearest_existing(str(path)))


def check_ckpt_space(env: dict[str, str], min_free_gb: float) -> Check:
    value = env.get("CKPT_DIR", "")
    if not value:
        return Check("ckpt-space", "fail", "CKPT_DIR not set", "set CKPT_DIR (on the shared storage) in node.env")
    base = nearest_existing(Path(value))
    if not os.access(base, os.W_OK):
        return Check("ckpt-space", "fail", f"{base} is not writable", f"make {value} writable for the container user")
    free_gb = shutil.disk_usage(base).free / 1e9
    if free_gb < min_free_gb:
        return Check(
            "ckpt-space",
            "fail",
            f"{free_gb:.1f} GB free at {base}, need {min_free_gb:g} GB",
            "free space on the shared storage or lower --min-free-gb for a smaller model",
        )
    return Check("ckpt-space", "ok", f"{free_gb:.1f} GB free at {base}")


def _http_status(url: str, token: str, timeout_s: float) -> int:
    """HTTP status of a GET (no proxy: the cluster address is local), with a bearer token when one is given."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with opener.open(req, timeout=timeout_s) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def check_ray_auth(env: dict[str, str], timeout_s: float = 3.0) -> list[Check]:
    """Whether this container talks to Ray with a token, and whether the cluster it can reach demands one.

    The cluster side goes through the head's dashboard: its authentication mode, then the job API once without
    a token (must be 401) and once with this host's token (must be 200; 403 = the cluster runs with another one).
    """
    from ..cluster.raynode import auth_problem, read_token

    head = env.get("HEAD_ADDR", "")
    if not head:
        return [
            Check(
                "ray-auth",
                "warn",
                "HEAD_ADDR not set: no cluster in this environment, Ray authentication not checked",
                "run it on a deployed host: docker compose run --rm doctor",
            )
        ]
    out: list[Check] = []
    token = ""
    problem = auth_problem(env)
    if problem:
        detail, _, fix = problem.partition("; fix: ")
        out.append(Check("ray-auth:client", "fail", detail, fix or "start it through compose.yaml"))
    else:
        path = env["RAY_AUTH_TOKEN_PATH"]
        token = read_token(path)
        out.append(Check("ray-auth:client", "ok", f"RAY_AUTH_MODE=token, token file {path}"))
    port = env.get("RAY_DASHBOARD_PORT") or str(RAY_DASHBOARD_PORT)
    base = f"http://{head}:{port}"
    try:
        import urllib.request

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"{base}/api/authentication_mode", timeout=timeout_s) as resp:
            mode = str(json.loads(resp.read())["authentication_mode"])
        anonymous = _http_status(f"{base}/api/jobs/", "", timeout_s)
        mine = _http_status(f"{base}/api/jobs/", token, timeout_s) if token else None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        out.append(
            Check(
                "ray-auth:cluster",
                "warn",
                f"the head's dashboard {base} does not answer ({exc}): cannot tell whether the cluster demands a token",
                "start ray-head on the head host (docker compose up -d ray-head) and run doctor again",
            )
        )
        return out
    redeploy = "re-run deploy.yml: it starts every node with RAY_AUTH_MODE=token and the cluster's token"
    if mode != "token" or anonymous != 401:
        out.append(
            Check(
                "ray-auth:cluster",
                "fail",
                f"authentication OFF: the cluster at {base} runs with mode {mode!r} and its job API answers "
                f"{anonymous} without a token, so anyone who reaches its ports can run code on every node",
                redeploy,
            )
        )
    elif mine == 403:
        out.append(
            Check(
                "ray-auth:cluster",
                "fail",
                f"authentication on, but the cluster at {base} refuses this host's token (403)",
                "re-run deploy.yml: it installs the cluster's one token on every host and restarts what changed",
            )
        )
    elif mine is not None and mine != 200:
        out.append(Check("ray-auth:cluster", "warn", f"authentication on; the job API answered {mine} with this token"))
    else:
        shown = "401 without a token" + (", 200 with this host's" if mine == 200 else "")
        out.append(Check("ray-auth:cluster", "ok", f"authentication on: {base} demands a token (job API: {shown})"))
    return out


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


# ---------------------------------------------------------------------------------------------------------------
# main


def run_checks(args: argparse.Namespace, env: dict[str, str], simulated: bool) -> list[Check]:
    try:
        manifest = load_manifest(str(manifest_path()))
    except (FileNotFoundError, ValueError) as exc:
        return [Check("manifest", "fail", str(exc), "set VERL_RECIPE_MANIFEST to the image's versions.yaml")]
    checks = [Check("manifest", "ok", str(manifest_path()))]
    checks += check_packages(manifest, simulated)
    checks.append(check_record(Path(args.record_dir)))
    checks.append(check_npu(manifest, simulated))
    checks.append(check_dies(manifest, env, simulated, Path(args.dev_dir or env.get("VERL_RECIPE_DEV_DIR") or "/dev")))
    checks.append(check_driver(manifest, simulated, Path(args.driver_info)))
    checks += check_nics(env, Path(args.sys_net))
    checks += check_paths(env)
    min_free = (
        args.min_free_gb if args.min_free_gb is not None else (MIN_FREE_GB_SIM if simulated else MIN_FREE_GB_REAL)
    )
    checks.append(check_ckpt_space(env, min_free))
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
