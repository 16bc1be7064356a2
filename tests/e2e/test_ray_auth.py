"""Ray is locked to the cluster, measured on a deployed 2-host simulated cluster (one cluster for the module):
token authentication on every node and client, refusals from the control machine and from another host, the
rehearsal and the wait with the token, rotation, and what listens where against docs/cluster.md's table."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from verl_recipe.a3facts import RAY_CLIENT_PORT, RAY_DASHBOARD_PORT, RAY_GCS_PORT, RAY_NODE_PORTS

from simkit.cluster import SimCluster
from tests.e2e.test_train_rehearsal import COMPOSE, on_host, scale

REPO = Path(__file__).resolve().parents[2]
IMAGE = "verl-recipe:sim"
NODE_IMAGE = "$(sed -n 's/^VERL_RECIPE_IMAGE=//p' /opt/verl-recipe/node.env)"  # the image deploy.yml loaded there
HOST_TOKEN = "/etc/verl-recipe/ray_auth_token"
ROTATE = "ANSIBLE_ARGS=--tags ray -e ray_node_auth_rotate=true"  # the documented switch, on the Ray play alone
# A client with no token at all: what an attacker on any network the host is attached to would run.
ANONYMOUS_CLIENT = (
    "import sys, ray\n"
    "try:\n"
    "    ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False)\n"
    "    print('CONNECTED', ray.cluster_resources())\n"
    "except Exception as exc:\n"
    "    print('REFUSED', type(exc).__name__)\n"
)


@dataclass
class Deployed:
    c: SimCluster
    head_ip: str
    token_file: Path
    outputs: list[str]  # every deploy.yml output of this module, searched for the token at the end
    tokens: list[str]  # every token the cluster had (rotation adds one)

    def token(self) -> str:
        return self.token_file.read_text().strip()


@pytest.fixture(scope="module")
def deployed(e2e_cluster: tuple[SimCluster, subprocess.CompletedProcess[str]]) -> Deployed:
    c, res = e2e_cluster  # the session's shared cluster (tests/e2e/conftest.py)
    token_file = c.inventory / ".secrets" / "ray_auth_token"
    return Deployed(c, c.ip("a3-01"), token_file, [res.stdout + res.stderr], [token_file.read_text().strip()])


def http_status(url: str, token: str = "", method: str = "GET", body: bytes | None = None) -> int:
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
    req = urllib.request.Request(url, data=body, headers=headers, method=method)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def sudo(d: Deployed, host: str, command: str) -> subprocess.CompletedProcess[str]:
    return d.c.ssh(host, "sudo", "bash", "-c", command)


@pytest.mark.docker
def test_token_is_generated_once_root_only_and_mounted_as_a_file(deployed: Deployed) -> None:
    d = deployed
    assert d.token_file.is_file() and (d.token_file.stat().st_mode & 0o777) == 0o600
    assert (d.token_file.parent.stat().st_mode & 0o777) == 0o700
    token = d.token()
    assert re.fullmatch(r"[a-z0-9]{64}", token)
    for host in ("a3-01", "a3-02"):
        st = sudo(d, host, f"stat -c '%U:%G %a' {HOST_TOKEN} && cat {HOST_TOKEN}")
        assert st.returncode == 0 and st.stdout.split() == ["root:root", "600", token], f"{host}: {st.stderr}"
        unprivileged = d.c.ssh(host, "cat", HOST_TOKEN)
        assert unprivileged.returncode != 0 and "Permission denied" in unprivileged.stderr, host
        service = "ray-head" if host == "a3-01" else "ray-worker"
        inspect = sudo(d, host, f"docker inspect verl-recipe-{service}-1")
        assert inspect.returncode == 0, inspect.stderr
        assert token not in inspect.stdout, f"{host}: the token shows in docker inspect"
        info = json.loads(inspect.stdout)[0]
        env = dict(item.split("=", 1) for item in info["Config"]["Env"])
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"] == "/run/secrets/ray_auth_token"
        assert "RAY_AUTH_TOKEN" not in env
        mount = next(m for m in info["Mounts"] if m["Destination"] == "/run/secrets/ray_auth_token")
        assert mount["Source"] == HOST_TOKEN and mount["RW"] is False, mount


@pytest.mark.docker
def test_client_without_token_is_refused_from_the_control_machine(deployed: Deployed) -> None:
    d = deployed
    jobs = f"http://{d.head_ip}:{RAY_DASHBOARD_PORT}/api/jobs/"
    submit = json.dumps({"entrypoint": "id"}).encode()
    assert http_status(jobs) == 401
    assert http_status(jobs, method="POST", body=submit) == 401, "nobody submits a job without the token"
    assert http_status(jobs, token="0" * 64) == 403
    assert http_status(jobs, token=d.token()) == 200
    # The GCS: Ray's own client, with no token, from this machine's network namespace.
    p = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", "--entrypoint", "python", IMAGE, "-c", ANONYMOUS_CLIENT]
        + [f"{d.head_ip}:{RAY_GCS_PORT}"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "REFUSED" in p.stdout and "CONNECTED" not in p.stdout, p.stdout + p.stderr[-2000:]
    assert "InvalidAuthToken" in p.stderr, p.stderr[-2000:]


@pytest.mark.docker
def test_client_without_token_is_refused_from_another_host(deployed: Deployed) -> None:
    d = deployed
    gcs = f"{d.head_ip}:{RAY_GCS_PORT}"
    p = sudo(
        d,
        "a3-02",
        f"docker run --rm --network host --entrypoint python {NODE_IMAGE} -c {shlex.quote(ANONYMOUS_CLIENT)} {gcs}",
    )
    assert "REFUSED" in p.stdout and "CONNECTED" not in p.stdout, p.stdout + p.stderr[-2000:]
    assert "InvalidAuthToken" in p.stderr, p.stderr[-2000:]
    job_api = (
        "import urllib.error, urllib.request\n"
        f"try: print(urllib.request.urlopen('http://{d.head_ip}:{RAY_DASHBOARD_PORT}/api/jobs/', timeout=10).status)\n"
        "except urllib.error.HTTPError as exc: print(exc.code)\n"
    )
    p = d.c.ssh("a3-02", "python3", "-c", job_api)
    assert p.stdout.strip() == "401", p.stdout + p.stderr


@pytest.mark.docker
def test_rehearsal_wait_and_doctor_with_the_token(deployed: Deployed) -> None:
    d = deployed
    p = on_host(d.c, "a3-01", f"{COMPOSE} run --rm train-397b --rehearse {scale('qwen3.5-397b', 2)}")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "gloo all-reduce" in p.stdout
    # The readiness wait from the other host, in a one-off container attached to its own raylet.
    wait = "wait-cluster --nodes 2 --deadline 120"
    p = on_host(d.c, "a3-02", f"{COMPOSE} run --rm --entrypoint verl-recipe doctor {wait}")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    n = len(d.c.hosts)  # every node of the shared cluster is ready; the wait asked for 2
    assert f"cluster: {n}/2 nodes ready, {16 * n}/32 dies" in p.stderr, p.stderr[-2000:]
    p = on_host(d.c, "a3-02", f"{COMPOSE} run --rm doctor --json")
    checks = {c["name"]: c for c in json.loads(p.stdout)["checks"]}
    assert checks["ray-auth:client"]["status"] == "ok", checks["ray-auth:client"]
    assert checks["ray-auth:cluster"]["status"] == "ok", checks["ray-auth:cluster"]
    assert "401 without a token, 200 with this host's" in checks["ray-auth:cluster"]["detail"]


# --- what listens where --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    ports: tuple[int, int]
    process: re.Pattern[str]
    binds: frozenset[str]
    on: str  # head | every node | while a job runs | simulated hosts
    anonymous: str  # what a client without the token gets


def documented_table() -> list[Row]:
    """The table under "### What listens where" in docs/cluster.md."""
    text = (REPO / "docs" / "cluster.md").read_text()
    section = text.split("### What listens where", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not re.match(r"^\d", cells[0]):
            continue
        lo, _, hi = cells[0].partition("-")
        # `ray::<actor>` stands for any actor's name; a row without a name is a socket no process owns.
        names = [re.escape(n).replace("<actor>", ".+") for n in re.findall(r"`([^`]+)`", cells[1])]
        process = re.compile("^(" + "|".join(names) + ")$" if names else "^$")
        binds = frozenset(re.findall(r"`([^`]+)`", cells[2]))
        rows.append(Row((int(lo), int(hi or lo)), process, binds, cells[3], cells[5]))
    assert len(rows) >= 10, "docs/cluster.md lists what listens where"
    return rows


def listening(d: Deployed, host: str) -> list[tuple[str, int, str]]:
    """(address, port, process) of every TCP listener in the host's network namespace, as `ss` sees them."""
    p = sudo(d, host, "ss -H -ltnp")
    assert p.returncode == 0, p.stderr
    out = []
    for line in p.stdout.splitlines():
        addr, _, port = line.split()[3].rpartition(":")
        procs = sorted(set(re.findall(r'\("([^"]+)",pid=', line)))
        out.append((addr.strip("[]"), int(port), ",".join(procs)))
    return out


# One unauthenticated call per fixed port, from the control machine: a gRPC method or an HTTP path.
PROBES = {
    RAY_GCS_PORT: "grpc /ray.rpc.NodeInfoGcsService/GetClusterId",
    RAY_NODE_PORTS["node-manager-port"]: "grpc /ray.rpc.NodeManagerService/GetNodeStats",
    RAY_NODE_PORTS["object-manager-port"]: "grpc /ray.rpc.ObjectManagerService/FreeObjects",
    RAY_NODE_PORTS["dashboard-agent-grpc-port"]: "grpc /ray.rpc.ReporterService/HealthCheck",
    RAY_CLIENT_PORT: "grpc /ray.rpc.RayletDriver/ClusterInfo",
    RAY_NODE_PORTS["runtime-env-agent-port"]: "http /",
    RAY_DASHBOARD_PORT: "http /api/jobs/",
    RAY_NODE_PORTS["dashboard-agent-listen-port"]: "http /api/job_agent/jobs/",
    RAY_NODE_PORTS["metrics-export-port"]: "http /metrics",
    44217: "http /metrics",
    44227: "http /metrics",
}
PROBE_SCRIPT = """
import json, sys, urllib.error, urllib.request
import grpc
ip, probes = sys.argv[1], json.loads(sys.argv[2])
out = {}
for port, spec in probes.items():
    kind, path = spec.split(" ", 1)
    if kind == "grpc":
        with grpc.insecure_channel(f"{ip}:{port}") as ch:
            try:
                ch.unary_unary(path)(b"", timeout=10)
                out[port] = "answers"
            except grpc.RpcError as exc:
                out[port] = "refused" if exc.code() == grpc.StatusCode.UNAUTHENTICATED else f"error {exc.code()}"
    else:
        try:
            with urllib.request.urlopen(f"http://{ip}:{port}{path}", timeout=10) as resp:
                out[port] = "answers" if resp.status == 200 else f"error {resp.status}"
        except urllib.error.HTTPError as exc:
            out[port] = "refused" if exc.code == 401 else f"error {exc.code}"
        except OSError as exc:
            out[port] = f"error {exc}"
print(json.dumps(out))
"""


@pytest.mark.docker
@pytest.mark.parametrize("host", ["a3-01", "a3-02"])
def test_every_listening_socket_is_in_the_documented_table(deployed: Deployed, host: str) -> None:
    d = deployed
    rows = documented_table()
    role = "head" if host == "a3-01" else "worker"
    node_ip = d.c.ip(host)
    sockets = listening(d, host)
    undocumented = []
    for addr, port, proc in sockets:
        ok = any(
            r.ports[0] <= port <= r.ports[1]
            and r.process.search(proc)
            and addr in {node_ip if b == "NODE_IP" else b for b in r.binds}
            and (r.on != "head" or role == "head")
            for r in rows
        )
        if not ok:
            undocumented.append(f"{addr}:{port} {proc or '(no process)'}")
    assert not undocumented, f"{host}: listening but not in docs/cluster.md: {undocumented}"
    # The table is not stale: every fixed port documented for this role listens, and answers a client without
    # the token the way the table says.
    seen = {port for _, port, _ in sockets}
    fixed = [
        r for r in rows if r.ports[0] == r.ports[1] and (r.on == "every node" or (r.on == "head" and role == "head"))
    ]
    for r in fixed:
        assert r.ports[0] in seen, f"{host}: docs/cluster.md lists port {r.ports[0]} but nothing listens there"
    probed = {str(r.ports[0]): PROBES[r.ports[0]] for r in fixed if r.ports[0] != 22}
    p = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", "--entrypoint", "python", IMAGE, "-c", PROBE_SCRIPT]
        + [node_ip, json.dumps(probed)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    answers = json.loads(p.stdout.strip().splitlines()[-1])
    for r in fixed:
        if r.ports[0] == 22:
            continue
        expected = "refused" if r.anonymous.startswith("refused") else "answers"
        assert answers[str(r.ports[0])] == expected, (
            f"{host}:{r.ports[0]}: {answers[str(r.ports[0])]}, table: {r.anonymous}"
        )


# --- rotation (last: it restarts the cluster) ----------------------------------------------------------------


@pytest.mark.docker
def test_rotation_restarts_the_nodes_and_the_old_token_stops_working(deployed: Deployed) -> None:
    d = deployed
    old = d.token()
    started = {
        h: sudo(d, h, f"docker inspect -f '{{{{.State.StartedAt}}}}' verl-recipe-{s}-1").stdout.strip()
        for h, s in (("a3-01", "ray-head"), ("a3-02", "ray-worker"))
    }
    res = d.c.make_deploy(ROTATE)
    d.outputs.append(res.stdout + res.stderr)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "joined  16   48   ok" in res.stdout, "the readiness wait passed with the new token"
    new = d.token()
    d.tokens.append(new)
    assert new != old and len(new) == 64
    assert old not in res.stdout + res.stderr and new not in res.stdout + res.stderr
    for host, before in started.items():
        service = "ray-head" if host == "a3-01" else "ray-worker"
        now = sudo(d, host, f"docker inspect -f '{{{{.State.StartedAt}}}}' verl-recipe-{service}-1").stdout.strip()
        assert now and now != before, f"{host}: {service} was not restarted with the new token"
        assert sudo(d, host, f"cat {HOST_TOKEN}").stdout.strip() == new
    jobs = f"http://{d.head_ip}:{RAY_DASHBOARD_PORT}/api/jobs/"
    assert http_status(jobs, token=old) == 403, "the old token no longer opens the job API"
    assert http_status(jobs, token=new) == 200
    probe = (
        "import sys; from verl_recipe.cluster.raynode import gcs_token_status, read_token; "
        "print(*(gcs_token_status(sys.argv[1], read_token(f)) for f in sys.argv[2:]))"
    )
    old_file = d.token_file.parent / "old_token_for_test"
    old_file.write_text(old + "\n")
    old_file.chmod(0o600)
    try:
        p = subprocess.run(  # the tokens stay in files: never on a command line
            ["docker", "run", "--rm", "--network", "host", "-v", f"{d.token_file.parent}:/t:ro"]
            + ["--entrypoint", "python", IMAGE, "-c", probe, f"{d.head_ip}:{RAY_GCS_PORT}"]
            + ["/t/old_token_for_test", "/t/ray_auth_token"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        old_file.unlink()
    assert p.stdout.split() == ["refused", "accepted"], p.stdout + p.stderr[-2000:]
    # A second run of the Ray play without the switch keeps the token and restarts nothing.
    res = d.c.make_deploy("ANSIBLE_ARGS=--tags ray")
    d.outputs.append(res.stdout + res.stderr)
    assert res.returncode == 0 and d.token() == new
    assert re.search(r"a3-01\s+: ok=\d+\s+changed=0 ", res.stdout), res.stdout[-3000:]


@pytest.mark.docker
def test_the_token_never_reaches_a_log_or_a_record(deployed: Deployed) -> None:
    d = deployed
    for out in d.outputs:
        assert not any(t in out for t in d.tokens), "deploy.yml printed a token"
    for host in ("a3-01", "a3-02"):
        service = "ray-head" if host == "a3-01" else "ray-worker"
        # Ray's session logs, the node logs, run records and rehearsal reports on shared storage, the install
        # folder, compose's logs. The tokens travel on stdin into a root-only file, never on a command line.
        script = (
            'umask 077; f=$(mktemp); cat >"$f"; '
            'n=$(grep -rlF -f "$f" /var/lib/verl-recipe/ray /mnt/shared /opt/verl-recipe | wc -l); '
            f'm=$(cd /opt/verl-recipe && {COMPOSE} logs {service} 2>&1 | grep -cF -f "$f"); rm -f "$f"; echo "$n $m"'
        )
        p = d.c.ssh(host, "sudo", "bash", "-c", script, stdin="\n".join(d.tokens) + "\n")
        assert p.stdout.split() == ["0", "0"], f"{host}: {p.stdout} {p.stderr[-1000:]}"
