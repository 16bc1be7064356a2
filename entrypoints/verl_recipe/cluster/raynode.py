"""Start this host's Ray node: the right resources, the environment exported first, deadlines, clean stop.

No broad kills or wipes: the node stops the one `ray start --block` process it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

from ..exitcodes import EXIT_FAILED, EXIT_NOT_READY, EXIT_OK
from ..problems import error
from ..topology import CPUS_PER_DIE, RAY_CLIENT_PORT, RAY_NODE_PORTS, SIM_CPU_RANKS_PER_NODE
from .evidence import node_cann_env, start_request_thread
from .hostsample import start_sampler
from .nodeenv import NodeEnv

# Ray 2.54 prints a FutureWarning in every worker that it will stop overriding the accelerator variables of
# zero-accelerator tasks; verl sets NOSET for the dies anyway, so the new behaviour changes nothing here and the
# operator cannot act on the warning. Opting in (Ray's own switch) silences it at the source.
QUIET_RAY = {"RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO": "0"}
SIM_OBJECT_STORE_BYTES = 256 * 1024 * 1024  # per simulated node: 16 of them share one small machine
_DIE = re.compile(r"^davinci(\d+)$")


class NodeError(RuntimeError):
    """A one-line reason this node cannot start, with the fix."""


# Token authentication (Ray >= 2.52): every node and client of this project runs with it. The token is a root-only
# file deploy.yml installs on each host; compose.yaml mounts it read-only here and points RAY_AUTH_TOKEN_PATH at it.
MIN_TOKEN_CHARS = 32


def auth_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """Why this process would talk to Ray without its cluster's token, or None. Never includes the token."""
    e = os.environ if environ is None else environ
    fix_compose = "start it through compose.yaml, which sets it (deploy.yml installs the token on every host)"
    mode = e.get("RAY_AUTH_MODE", "")
    if mode != "token":
        return (
            f"RAY_AUTH_MODE={mode or '(unset)'}: this project runs Ray only with token authentication "
            f"(RAY_AUTH_MODE=token); fix: {fix_compose}"
        )
    if e.get("RAY_AUTH_TOKEN"):
        return (
            "RAY_AUTH_TOKEN is set: a token in an environment variable shows in `docker inspect` and /proc; fix: "
            "unset it and let RAY_AUTH_TOKEN_PATH name the mounted token file"
        )
    path = e.get("RAY_AUTH_TOKEN_PATH", "")
    if not path:
        return f"RAY_AUTH_TOKEN_PATH is not set, so Ray would look for ~/.ray/auth_token; fix: {fix_compose}"
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        return (
            f"Ray token file {path} cannot be read ({exc.strerror or type(exc).__name__}); fix: run deploy.yml, "
            "which installs the cluster's token on every host and compose mounts it here"
        )
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token):
        return (
            f"Ray token file {path} holds {len(token)} characters, not one token of at least {MIN_TOKEN_CHARS}; "
            "fix: re-run deploy.yml with -e ray_node_auth_rotate=true to write a new one"
        )
    return None


def require_token_auth(environ: Mapping[str, str] | None = None) -> None:
    problem = auth_problem(environ)
    if problem:
        raise NodeError(problem)


def read_token(path: str) -> str:
    """Ray reads the first line of the token file, whitespace trimmed (AuthenticationTokenLoader)."""
    with open(path) as f:
        return f.readline().strip()


TOKEN_ACCEPTED, TOKEN_REFUSED, GCS_UNREACHABLE = "accepted", "refused", "unreachable"


def gcs_token_status(address: str, token: str, timeout_s: float = 5.0) -> str:
    """One GCS call with this token (empty: none): accepted, refused or unreachable. Ray's own client retries an
    authentication failure for 20 s and then reports only a ConnectionError; this tells the two apart at once."""
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    metadata = [("authorization", f"Bearer {token}")] if token else []
    with grpc.insecure_channel(address) as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        try:
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s, metadata=metadata)
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]  # grpc's call errors are also grpc.Call
            return TOKEN_REFUSED if code == grpc.StatusCode.UNAUTHENTICATED else GCS_UNREACHABLE
    return TOKEN_ACCEPTED


def token_refused_message(who: str, address: str, path: str) -> str:
    return (
        f"{who}: the Ray cluster at {address} refuses the token in {path} (it runs with another one); fix: re-run "
        "deploy.yml, which installs the cluster's one token on every host and restarts the nodes that changed"
    )


def check_token_accepted(who: str, address: str) -> None:
    """Raise NodeError when the GCS answers and refuses this container's token; anything else is left to the
    caller's own deadline (a head still starting is not an error)."""
    path = os.environ.get("RAY_AUTH_TOKEN_PATH", "")
    if gcs_token_status(address, read_token(path)) == TOKEN_REFUSED:
        raise NodeError(token_refused_message(who, address, path))


def count_dies(dev_dir: str) -> list[int]:
    """Die ids with a device node. Ray's own fallback globs /dev/davinci? and so misses dies 10-15."""
    try:
        names = os.listdir(dev_dir)
    except OSError:
        return []
    return sorted(int(m.group(1)) for n in names if (m := _DIE.match(n)))


def node_resources(ne: NodeEnv) -> tuple[int, int]:
    dies = count_dies(ne.dev_dir)
    if len(dies) < ne.dies:
        absent = sorted(set(range(ne.dies)) - set(dies))
        raise NodeError(
            f"{ne.name}: {len(dies)} NPU dies visible in {ne.dev_dir}, {ne.dies} expected (missing "
            f"{', '.join(f'davinci{i}' for i in absent[:4])}); fix: check `npu-smi info` on {ne.name} and "
            "the devices handed to the container"
        )
    cpus = ne.num_cpus if ne.num_cpus is not None else (os.cpu_count() or 1)
    if cpus < CPUS_PER_DIE * ne.dies:
        raise NodeError(
            f"{ne.name}: {cpus} CPUs for Ray, but verl needs {CPUS_PER_DIE} per die ({CPUS_PER_DIE * ne.dies}) "
            "or its placement group waits forever; fix: give the node more CPUs or set RAY_NUM_CPUS"
        )
    return ne.dies, cpus


def node_custom_resources(ne: NodeEnv, dies: int) -> dict[str, int]:
    """The dies as Ray's NPU resource; on the simulated cluster also its CPU rank slots (topology.py)."""
    res = {"NPU": dies}
    if ne.simulated:
        res["cpu"] = SIM_CPU_RANKS_PER_NODE
    return res


def ray_start_argv(role: str, ne: NodeEnv, dies: int, cpus: int, dashboard: bool) -> list[str]:
    argv = [
        "ray",
        "start",
        "--block",
        f"--node-ip-address={ne.ip}",
        f"--num-cpus={cpus}",
        f"--resources={json.dumps(node_custom_resources(ne, dies), separators=(',', ':'))}",
        f"--node-name={ne.name}",
        "--disable-usage-stats",
    ]
    # Fixed ports, so the firewall list in docs/deploy.md is complete (Ray picks random ones otherwise).
    argv += [f"--{name}={port + ne.port_offset}" for name, port in RAY_NODE_PORTS.items()]
    if ne.simulated:
        argv += [f"--object-store-memory={SIM_OBJECT_STORE_BYTES}"]
    if role == "head":
        argv += ["--head", f"--port={ne.ray_port}", f"--ray-client-server-port={RAY_CLIENT_PORT + ne.port_offset}"]
        # Listen on the cluster interface only, never 0.0.0.0.
        argv += [
            f"--include-dashboard={'true' if dashboard else 'false'}",
            f"--dashboard-host={ne.ip}",
            f"--dashboard-port={ne.dashboard_port}",
        ]
    else:
        argv += [f"--address={ne.gcs_address}"]
    return argv


def node_environment(ne: NodeEnv, dies: int) -> dict[str, str]:
    """Exported before `ray start`: Ray workers inherit the raylet's environment, not the driver's."""
    env = dict(os.environ)
    env["RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"] = "1"
    env.update(QUIET_RAY)
    env["ASCEND_RT_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(dies))
    # CANN's plogs of every process on this node (verl's workers inherit it) on shared storage, beside the node log:
    # by default they go to ~/ascend/log inside the container and are lost with it (cluster/evidence.py).
    env.update(node_cann_env(env.get("LOG_DIR"), ne.name))
    if ne.simulated:
        # 48 logical CPUs per simulated host on a 2-core machine: Ray would prestart 48 idle workers per node.
        env["RAY_enable_worker_prestart"] = "0"
        env["RAY_prestart_worker_first_driver"] = "0"
    return env


def tcp_reachable(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def dashboard_available() -> bool:
    try:
        import aiohttp  # noqa: F401  - the dashboard needs ray[default]'s extras
    except ImportError:
        return False
    return True


def node_log_path(ne: NodeEnv, environ: dict[str, str] | None = None) -> Path | None:
    """Each node's Ray log lands on shared storage beside the runs, so one place holds a run's story."""
    root = (environ if environ is not None else os.environ).get("LOG_DIR")
    return Path(root) / "nodes" / f"{ne.name}.log" if root else None


def _pump(proc: subprocess.Popen[bytes], log: Path | None) -> int:
    assert proc.stdout is not None
    sink = None
    if log is not None:
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            sink = open(log, "ab")  # noqa: SIM115 - closed below, after the process ends
        except OSError as exc:
            print(f"warning: cannot write the node log {log}: {exc}", file=sys.stderr)
    try:
        for chunk in iter(proc.stdout.readline, b""):
            sys.stderr.buffer.write(chunk)
            sys.stderr.flush()
            if sink is not None:
                sink.write(chunk)
                sink.flush()
        return proc.wait()
    finally:
        if sink is not None:
            sink.close()


HEAD_LOST = -1000  # our own marker: the worker stopped its raylet because the head stayed unreachable
HEAD_LOST_AFTER_S = 30.0


def _supervise(proc: subprocess.Popen[bytes], role: str, ne: NodeEnv, stopping: threading.Event) -> int:
    """Wait for `ray start --block`; a worker also watches its head, since Ray leaves an orphaned worker blocked."""
    unreachable_since: float | None = None
    while True:
        try:
            return proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if role != "worker" or stopping.is_set():
            continue
        if tcp_reachable(ne.head_addr, ne.ray_port):
            unreachable_since = None
            continue
        unreachable_since = unreachable_since or time.monotonic()
        if time.monotonic() - unreachable_since > HEAD_LOST_AFTER_S:
            print(
                f"{ne.name}: head {ne.gcs_address} unreachable for {HEAD_LOST_AFTER_S:.0f} s; leaving to rejoin",
                file=sys.stderr,
                flush=True,
            )
            proc.send_signal(signal.SIGINT)
            proc.wait()
            return HEAD_LOST


def _end_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_node(role: str, ne: NodeEnv, join_deadline_s: float, log: Path | None = None) -> int:
    require_token_auth()
    dies, cpus = node_resources(ne)
    env = node_environment(ne, dies)
    argv = ray_start_argv(role, ne, dies, cpus, dashboard_available())
    log = log or node_log_path(ne)
    deadline = time.monotonic() + join_deadline_s
    delay = 1.0
    stopping = threading.Event()
    proc: subprocess.Popen[bytes] | None = None

    def stop(signum: int, _frame: FrameType | None) -> None:
        stopping.set()
        if proc is not None and proc.poll() is None:
            # `ray start --block` ignores SIGTERM; SIGINT makes it stop the raylet and its other children cleanly.
            proc.send_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # npu-smi snapshots at each run's start and end, and the job's Ray logs at its end (cluster/evidence.py)
    start_request_thread(os.environ.get("LOG_DIR"), ne.name, ne.simulated, stopping)
    # this host's memory and process states for the launcher's health rules, every 5 s (cluster/hostsample.py)
    start_sampler(ne.name)
    print(f"{ne.name}: starting Ray {role} with {dies} NPU and {cpus} CPU at {ne.ip}", file=sys.stderr, flush=True)
    while not stopping.is_set():
        if role == "worker" and not tcp_reachable(ne.head_addr, ne.ray_port):
            if time.monotonic() > deadline:
                error(
                    f"{ne.name}: Ray head {ne.gcs_address} not reachable after {join_deadline_s:.0f} s; fix: "
                    f"start ray-head on the head host and check the firewall for port {ne.ray_port}"
                )
                return EXIT_NOT_READY
            time.sleep(delay)
            delay = min(delay * 2, 15.0)
            continue
        if role == "worker":
            check_token_accepted(ne.name, ne.gcs_address)
        started = time.monotonic()
        # Its own process group: whatever a failed start leaves behind (an orphaned GCS holding the port) is ended
        # by group id, and only what this node started.
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        pump = threading.Thread(target=_pump, args=(proc, log), daemon=True)
        pump.start()
        rc = _supervise(proc, role, ne, stopping)
        _end_group(proc.pid)
        pump.join(timeout=5)
        if stopping.is_set():
            break
        # A worker whose head went away, a worker that raced the head's start-up, or a start-up that timed out on a
        # loaded host: start again until the deadline.
        if rc == HEAD_LOST or (time.monotonic() < deadline and time.monotonic() - started < 120):
            if rc == HEAD_LOST:
                deadline = time.monotonic() + join_deadline_s
            print(f"{ne.name}: ray start exited ({rc}); joining again in {delay:.0f} s", file=sys.stderr, flush=True)
            time.sleep(delay)
            delay = min(delay * 2, 15.0)
            continue
        return rc if rc else EXIT_FAILED
    if proc is not None:
        proc.wait()
    print(f"{ne.name}: Ray node stopped", file=sys.stderr)
    return EXIT_OK
