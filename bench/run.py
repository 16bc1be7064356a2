#!/usr/bin/env python3
"""`make bench`: deploy, image distribution, preflight, launch, rebuild and simulation cost on the simulated
cluster, each figure a ratio or a count measured in this run, with its ideal beside it.

Writes bench/results.json (every figure with its method and raw timings) and bench/results.md (the table).
Figures of sections not run this time are kept from the earlier run and labelled with that run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (  # noqa: E402
    Figure,
    build_steps,
    changed_total,
    cpu_ticks,
    faults_named,
    layers_rebuilt,
    median,
    merge,
    named_lost,
    nodeloss_figures,
    ping_coverage,
    ratio,
    ray_dead_after,
    recap,
    rfc3339_epoch,
    role_times,
    table,
    validate_runs,
    verl_check_share,
)

REPO = Path(__file__).resolve().parents[1]
ANSIBLE = REPO / "ansible"
VENV_BIN = Path(sys.executable).parent
IMAGE = "verl-recipe:sim"
# gzip: 16 hosts each hold the staged tarball and the loaded image at once during the fan-out (disk, not speed).
TARBALL = REPO / "build" / "images" / "verl-recipe-sim.tar.gz"
RECIPE = "qwen3.5-397b"
PLAN_NODES = 16
SERVICE = "train-397b"  # its service in compose.yaml
COMPOSE = "docker compose"  # deploy.yml's .env in the install folder carries the rest
SECTIONS = ("deploy", "preflight", "launch", "image", "cli", "verl", "rebuild", "simcost", "nodeloss")
# (fault, preflight check that must name it): one per kind of problem a site meets.
FAULTS = [
    ("link-down:3", "npu_link"),
    ("health-alarm:5", "chip_health"),
    ("driver-old", "driver_version"),
    ("dev-missing:7", "device_nodes"),
    ("ip-missing:9", "npu_ip"),
    ("no-shared", "shared_storage_mounted"),
    ("net-health:11", "npu_net_health"),
    ("firmware-old", "firmware_version"),
]


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run(cmd: list[str], timeout: float = 3600, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **kw)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


def must(p: subprocess.CompletedProcess[str], what: str) -> subprocess.CompletedProcess[str]:
    if p.returncode != 0:
        raise RuntimeError(f"{what} failed (rc {p.returncode}): {(p.stdout + p.stderr)[-3000:]}")
    return p


def machine() -> dict[str, Any]:
    mem = Path("/proc/meminfo").read_text().split("\n")[0].split()[1]
    return {
        "nproc": os.cpu_count(),
        "mem_total_gib": round(int(mem) / 2**20, 1),
        "loadavg": list(os.getloadavg()),
        "platform": platform.platform(),
    }


class Cluster:
    """A simulated cluster of this bench under its own name (SIM_SUBNET=auto)."""

    def __init__(self, name: str, nodes: int) -> None:
        self.name, self.nodes = name, nodes
        self.inv = ANSIBLE / "inventory" / name
        self.hosts = [f"a3-{i:02d}" for i in range(1, nodes + 1)]

    def make(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run(["make", "--no-print-directory", *args, f"SIM_NAME={self.name}"], cwd=REPO)

    def up(self) -> float:
        self.make("sim-down")
        secs, p = timed(lambda: self.make("sim-up", f"NODES={self.nodes}", "SIM_SUBNET=auto"))
        must(p, f"sim-up {self.name}")
        return float(secs)

    def down(self) -> None:
        self.make("sim-down")

    def fault(self, host: str, fault: str) -> None:
        must(self.make("sim-fault", f"HOST={host}", f"FAULT={fault}"), f"sim-fault {host} {fault}")

    def ssh(self, host: str, command: str, timeout: float = 900, data: bytes | None = None) -> Any:
        cmd = ["ssh", "-F", str(self.inv / "ssh_config"), host, command]
        if data is not None:
            return subprocess.run(cmd, input=data, capture_output=True, timeout=timeout, check=False)
        return run(cmd, timeout=timeout)

    def popen(self, host: str, command: str) -> subprocess.Popen[str]:
        cmd = ["ssh", "-F", str(self.inv / "ssh_config"), host, command]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def on_all(self, command: str) -> list[subprocess.CompletedProcess[str]]:
        with ThreadPoolExecutor(len(self.hosts)) as ex:
            return list(ex.map(lambda h: self.ssh(h, command), self.hosts))

    def hostvars(self) -> dict[str, Any]:
        data = yaml.safe_load((self.inv / "hosts.yml").read_text())
        hosts: dict[str, Any] = data["all"]["children"]["a3_nodes"]["hosts"]
        return hosts

    def seed(self) -> None:
        """The site's placeholder model and data on the shared storage, as `make demo` does."""
        must(self.make("sim-seed"), "make sim-seed")

    def playbook(self, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
        env = dict(os.environ)
        env.update(
            PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
            ANSIBLE_CONFIG=str(ANSIBLE / "ansible.cfg"),
            ANSIBLE_NOCOLOR="1",
            ANSIBLE_FORCE_COLOR="0",
        )
        cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(self.inv), "deploy.yml"]
        cmd += ["-e", f"site_image_tarball={TARBALL}", *args]
        secs, p = timed(lambda: run(cmd, cwd=ANSIBLE, env=env, timeout=3600))
        return float(secs), p

    def bridge(self) -> Path:
        p = must(run(["docker", "network", "inspect", self.name, "-f", "{{json .}}"]), "network inspect")
        info = json.loads(p.stdout)
        name = (info.get("Options") or {}).get("com.docker.network.bridge.name") or "br-" + info["Id"][:12]
        return Path("/sys/class/net") / name / "statistics"

    def tx(self) -> int:
        return int((self.bridge() / "tx_bytes").read_text())


# ----------------------------------------------------------------------------------------------------------------
# 1. deploy scaling


def cpu_sample() -> tuple[int, int]:
    return cpu_ticks(Path("/proc/stat").read_text())


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """Share of the machine's CPU time that was busy between two samples (1.0: every core busy throughout)."""
    return ratio(after[0] - before[0], after[1] - before[1], 3)


def deploy_pair(c: Cluster) -> dict[str, Any]:
    hz = os.sysconf("SC_CLK_TCK")
    s0 = cpu_sample()
    first_s, first = c.playbook()
    s1 = cpu_sample()
    must(first, f"deploy.yml first run on {c.nodes} hosts")
    rerun_s, second = c.playbook()
    s2 = cpu_sample()
    must(second, f"deploy.yml re-run on {c.nodes} hosts")
    return {
        "hosts": c.nodes,
        "first_s": round(first_s, 1),
        "rerun_s": round(rerun_s, 1),
        # Whole machine: control node, every simulated host and anything else running (load is in meta).
        "first_busy_share": busy_share(s0, s1),
        "rerun_busy_share": busy_share(s1, s2),
        "first_cpu_s": round((s1[0] - s0[0]) / hz, 1),
        "rerun_cpu_s": round((s2[0] - s1[0]) / hz, 1),
        "rerun_changed": changed_total(recap(second.stdout)),
        "first_changed": changed_total(recap(first.stdout)),
        "first_roles_s": role_times(first.stdout),
        "rerun_roles_s": role_times(second.stdout),
    }


def deploy_figures(one: dict[str, Any], big: dict[str, Any], run_id: str) -> list[Figure]:
    n = big["hosts"]
    how = (
        f"wall time of `ansible-playbook deploy.yml` (all plays, ansible.cfg forks=32) on {n} fresh simulated hosts "
        f"divided by the same on 1 fresh host, same run; the first run includes the image fan-out and docker load"
    )
    return [
        Figure(
            "1",
            f"deploy first run: {n} hosts / 1 host",
            ratio(big["first_s"], one["first_s"]),
            "1.0 (hosts in parallel)",
            how,
            run_id,
            {"1": one, str(n): big},
        ),
        Figure(
            "1",
            f"deploy re-run: {n} hosts / 1 host",
            ratio(big["rerun_s"], one["rerun_s"]),
            "1.0",
            "as above, the second run right after the first",
            run_id,
        ),
        Figure(
            "1",
            f"deploy re-run changed count ({n} hosts)",
            big["rerun_changed"],
            "0 (must)",
            "sum of changed= over the re-run's PLAY RECAP",
            run_id,
        ),
        Figure(
            "1",
            "deploy re-run changed count (1 host)",
            one["rerun_changed"],
            "0 (must)",
            "sum of changed= over the re-run's PLAY RECAP",
            run_id,
        ),
        Figure(
            "1",
            f"deploy first run on {n} hosts: busy share of this machine's CPU",
            big.get("first_busy_share"),
            "1.0 = CPU-bound: N / 1 above is this machine's limit, not serialisation",
            "busy jiffies / all jiffies of /proc/stat's cpu line over the run (all cores; includes ansible, every "
            f"simulated host and anything else running); 1 host: {one.get('first_busy_share')}",
            run_id,
        ),
        Figure(
            "1",
            f"deploy first run: machine CPU-seconds per host, {n} hosts / 1 host",
            ratio(big["first_cpu_s"] / n, one["first_cpu_s"]) if one.get("first_cpu_s") else None,
            "1.0 (per-host work does not grow with the cluster)",
            f"busy CPU-seconds of the whole machine over the run / hosts ({big.get('first_cpu_s')} s on {n}, "
            f"{one.get('first_cpu_s')} s on 1); on real hosts each brings its own cores, so this ratio, not the "
            "wall-time one, carries over",
            run_id,
        ),
        Figure(
            "1",
            f"deploy re-run / first run ({n} hosts)",
            ratio(big["rerun_s"], big["first_s"]),
            "small (a re-run only checks)",
            "wall time of the re-run / the first run, same hosts",
            run_id,
        ),
    ]


# ----------------------------------------------------------------------------------------------------------------
# 2. image distribution


def bridge_experiment(c: Cluster) -> dict[str, Any]:
    """Does the bridge's tx counter see host-to-host frames? 32 MiB each way, measured."""
    size = 32 * 2**20
    ip2 = c.hostvars()["a3-02"]["a3_cluster_ip"]
    tx0 = c.tx()
    must(c.ssh("a3-02", "cat > /dev/null", data=os.urandom(size)), "control->a3-02 copy")
    control = c.tx() - tx0
    server = (
        "import socket;s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);"
        f"s.bind(('{ip2}',18999));s.listen(1);k,_=s.accept();n=0\nwhile True:\n d=k.recv(1<<20)\n"
        " if not d: break\n n+=len(d)\nprint(n)"
    )
    srv = subprocess.Popen(
        ["docker", "exec", f"{c.name}-a3-02", "python3", "-c", server], stdout=subprocess.PIPE, text=True
    )
    time.sleep(3)
    client = (
        f"import socket;s=socket.create_connection(('{ip2}',18999));b=bytes(1<<20)\n"
        f"for _ in range({size >> 20}): s.sendall(b)\ns.close()"
    )
    tx0 = c.tx()
    must(run(["docker", "exec", f"{c.name}-a3-01", "python3", "-c", client], timeout=300), "a3-01->a3-02 copy")
    got = srv.communicate(timeout=120)[0].strip()
    between = c.tx() - tx0
    return {
        "sent_bytes": size,
        "control_to_host_tx": control,
        "host_to_host_tx": between,
        "host_to_host_received": int(got or 0),
    }


def image_section(c: Cluster, run_id: str) -> list[Figure]:
    size = TARBALL.stat().st_size
    exp = bridge_experiment(c)
    log(f"bridge experiment: {exp}")
    # Nothing may use the image while it is removed: stop the Ray services first.
    c.on_all(f"cd /opt/verl-recipe && {COMPOSE} down")
    for p in c.on_all(f"docker rmi {IMAGE}"):
        must(p, "docker rmi")
    tx0 = c.tx()
    fan_s, p = c.playbook("--tags", "image")
    fan_bytes = c.tx() - tx0
    must(p, "deploy.yml --tags image")
    fan_role = role_times(p.stdout).get("image_dist", fan_s)
    ids = {r.stdout.strip() for r in c.on_all(f"docker image inspect -f '{{{{.Id}}}}' {IMAGE}")}
    # The naive way, same image: scp from the control node to every host at once, then docker load on each.
    for p in c.on_all(f"docker rmi {IMAGE}"):
        must(p, "docker rmi")
    stage = "/var/tmp/bench-naive.tar.gz"

    def naive(host: str) -> None:
        must(
            run(["scp", "-q", "-F", str(c.inv / "ssh_config"), str(TARBALL), f"{host}:{stage}"], timeout=3600),
            f"scp to {host}",
        )
        must(c.ssh(host, f"docker load -q -i {stage} && rm -f {stage}"), f"docker load on {host}")

    tx0 = c.tx()
    naive_s, _ = timed(lambda: list(ThreadPoolExecutor(c.nodes).map(naive, c.hosts)))
    naive_bytes = c.tx() - tx0
    ids_naive = {r.stdout.strip() for r in c.on_all(f"docker image inspect -f '{{{{.Id}}}}' {IMAGE}")}
    n = c.nodes
    detail = {
        "tarball_bytes": size,
        "fanout_tx_bytes": fan_bytes,
        "naive_tx_bytes": naive_bytes,
        "fanout_play_s": round(fan_s, 1),
        "fanout_image_role_s": fan_role,
        "naive_s": round(naive_s, 1),
        "image_ids_fanout": sorted(ids),
        "image_ids_naive": sorted(ids_naive),
        "bridge_experiment": exp,
    }
    counter = (
        f"bytes = delta of tx_bytes of the cluster network's Linux bridge on this machine around the run: it counts "
        f"what this machine (the control node) sends into the network, not frames forwarded between hosts "
        f"(checked in this run: {exp['sent_bytes']} B control->a3-02 moved it by {exp['control_to_host_tx']} B, "
        f"a3-01->a3-02 by {exp['host_to_host_tx']} B)"
    )
    return [
        Figure(
            "2",
            f"image fan-out to {n} hosts: control-node bytes / tarball",
            ratio(fan_bytes, size),
            f"1.0 (naive: {n})",
            counter + "; the whole `deploy.yml --tags image` run (validate, preflight, "
            "image) after `docker rmi` on every host",
            run_id,
            detail,
        ),
        Figure(
            "2",
            f"naive copy to {n} hosts: control-node bytes / tarball",
            ratio(naive_bytes, size),
            f"{n} (one copy per host)",
            counter + "; scp to every host at once, then docker load",
            run_id,
        ),
        Figure(
            "2",
            f"image fan-out time / naive scp+load time ({n} hosts)",
            ratio(fan_role, naive_s),
            "< 1 where the control node's uplink is the limit",
            "profile_roles time of the image_dist role / wall time of parallel scp + docker load, same image, "
            "same hosts, one after the other",
            run_id,
        ),
        Figure(
            "2",
            f"distinct image IDs on {n} hosts after the fan-out",
            len(ids),
            "1 (must)",
            "`docker image inspect` on every host",
            run_id,
        ),
    ]


# ----------------------------------------------------------------------------------------------------------------
# 3. preflight with faults


def preflight_section(c: Cluster, run_id: str, deploy_s: float | None = None) -> list[Figure]:
    ok_s, p = c.playbook("--tags", "preflight")
    must(p, "healthy preflight")
    healthy = json.loads((ANSIBLE / ".cache" / "reports" / f"preflight-{c.name}.json").read_text())
    cov = ping_coverage(healthy)
    false_alarms = [f"{r['host']} {r['check']}" for r in healthy["rows"] if not r.get("ok", True)]
    targets = c.hosts[1:] or c.hosts
    injected: list[tuple[str, str]] = []
    plan = []
    for i, (fault, check) in enumerate(FAULTS):
        host = targets[i % len(targets)]
        plan.append((host, fault))
        injected.append((host, check))
    try:
        for host, fault in plan:
            c.fault(host, fault)
        bad_s, p = c.playbook("--tags", "preflight")
        report = ANSIBLE / ".cache" / "reports" / f"preflight-{c.name}.json"
        rows = json.loads(report.read_text())["rows"] if report.is_file() else []
    finally:
        for host in sorted({h for h, _ in plan}):
            c.fault(host, "clear")
    named = faults_named(rows, injected)
    missed = [x for x in injected if x not in named]
    detail = {
        "healthy_s": round(ok_s, 1),
        "faulted_s": round(bad_s, 1),
        "rc": p.returncode,
        "injected": [f"{h} {f}" for h, f in plan],
        "missed": missed,
    }
    n = c.nodes
    return [
        Figure(
            "3",
            f"NPU ping host pairs covered in one healthy preflight / all pairs ({n} hosts)",
            ratio(cov["host_pairs"], cov["host_pairs_total"]),
            "1.0",
            f"the report's ping plan: {cov['host_pairs']} of {cov['host_pairs_total']} host pairs and "
            f"{cov['dies_pinged']} dies receiving a ping of {n} hosts' {cov['pings']} (one ping per die, one after "
            f"another per host, as the same-index plan before it sent); healthy preflight {ok_s:.0f} s",
            run_id,
            {**cov, "healthy_s": round(ok_s, 1)},
        ),
        Figure(
            "3",
            f"failed rows in a healthy preflight ({n} hosts)",
            len(false_alarms),
            "0",
            "rows with ok=false in the healthy run's report (false alarms): " + (", ".join(false_alarms) or "none"),
            run_id,
        ),
        Figure(
            "3",
            f"preflight faults named / injected ({n} hosts)",
            len(named),
            f"{len(injected)} of {len(injected)}",
            f"{len(injected)} faults on {len(targets)} hosts ({', '.join(f'{h} {f}' for h, f in plan)}); "
            "a fault is named when the report JSON has a failed row for its host and check",
            run_id,
            detail,
        ),
        Figure(
            "3",
            f"preflight time with faults / healthy ({n} hosts; full report after {bad_s:.0f} s)",
            ratio(bad_s, ok_s),
            "1.0 (faults add only ping time-outs)",
            "wall time of `deploy.yml --tags preflight` until the full report, faulted / healthy, same hosts",
            run_id,
        ),
    ] + (
        [
            Figure(
                "3",
                f"preflight report with faults / first full deploy ({n} hosts)",
                ratio(bad_s, deploy_s),
                "small: every fault is known before anything on the hosts changes",
                "wall time of the faulted `--tags preflight` run / the first `deploy.yml` run on the same hosts "
                "(section 1), same run",
                run_id,
            )
        ]
        if deploy_s
        else []
    )


# ----------------------------------------------------------------------------------------------------------------
# 4. launch path


def launch_cli(reps: int, run_id: str) -> list[Figure]:
    cli = str(VENV_BIN / "verl-recipe")
    cmds = {
        "python": [sys.executable, "-c", "pass"],
        "render": [cli, "render", RECIPE, "--json"],
        "validate": [cli, "validate", RECIPE, "--skip-path-checks"],
        "plan": [cli, "plan", RECIPE, "--nodes", str(PLAN_NODES)],
    }
    # validate here is our checks and verl's Hydra composition; verl's own start-up checks (a child process that
    # imports verl) are section `verl`'s figure, so they are off for this one
    env = {"validate": {**os.environ, "VERL_RECIPE_VERL_CHECKS": "0"}}
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(reps):
        for k, cmd in cmds.items():
            secs, p = timed(lambda cmd=cmd, k=k: run(cmd, timeout=600, env=env.get(k)))  # type: ignore[misc]
            must(p, " ".join(cmd))
            times[k].append(round(float(secs), 3))
    med = {k: median(v) for k, v in times.items()}
    how = f"median of {reps} runs, interleaved with a bare `python -c pass` of the same interpreter (the floor)"
    return [
        Figure(
            "4",
            f"render --json: median / python start-up (median {med['render']:.2f} s)",
            ratio(med["render"], med["python"]),
            "1.0 (the interpreter's own start-up)",
            how,
            run_id,
            {"runs_s": times, "median_s": med},
        ),
        Figure(
            "4",
            f"validate (Hydra compose): median / python start-up (median {med['validate']:.2f} s)",
            ratio(med["validate"], med["python"]),
            "1.0",
            how,
            run_id,
        ),
        Figure(
            "4",
            f"plan {RECIPE} --nodes {PLAN_NODES}: median / python start-up (median {med['plan']:.2f} s)",
            ratio(med["plan"], med["python"]),
            "1.0",
            how + "; every layout for the nodes checked against every rule and the memory plan",
            run_id,
        ),
    ]


def validate_loop_script(reps: int) -> str:
    """`validate` REPS times in one container, each closed by `=== validate rc=N start=EPOCH end=EPOCH`
    (benchlib.validate_runs reads it)."""
    one = f"verl-recipe validate {RECIPE} --skip-path-checks"
    return (
        f"for _ in $(seq {reps}); do s=$(date +%s.%N); {one} 2>&1; rc=$?; "
        'echo "=== validate rc=$rc start=$s end=$(date +%s.%N)"; done'
    )


def verl_checks_section(reps: int, run_id: str) -> list[Figure]:
    """What verl's own start-up checks add to `validate` inside the simulated image, where verl imports."""
    cmd = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "bash", IMAGE, "-c"]
    p = must(run([*cmd, validate_loop_script(reps)], timeout=1800), f"validate x{reps} in {IMAGE}")
    runs = validate_runs(p.stdout)
    if len(runs) != reps:
        raise RuntimeError(f"{len(runs)} of {reps} validate runs reported: {p.stdout[-2000:]}")
    share = verl_check_share(runs)
    how = (
        f"`verl-recipe validate {RECIPE} --skip-path-checks` {reps} times in one `{IMAGE}` container; with = its "
        "wall time, without = the wall time less the seconds its note says verl's own checks took (a child "
        "process that imports verl and builds its config dataclasses); medians"
    )
    return [
        Figure(
            "4",
            f"validate in {IMAGE}: with / without verl's own checks (they add {share['checks_s']:.2f} s)",
            ratio(share["with_s"], share["without_s"]),
            "1.0 (the checks cost verl's import: a few seconds)",
            how,
            run_id,
            {"runs": [list(r) for r in runs], **share},
        ),
    ]


def head_poll_script(ip: str, port: int, nodes: int) -> str:
    """Upstream's wait (verl's Ascend multi-node example): every 5 s, the total NPU from `ray status`
    (`grep -oP '(?<=/)\\d+\\.\\d+(?=\\s*NPU)'`) / 16 against NNODES; prints each reading with its time."""
    return (
        "low=0; for i in $(seq 200); do "
        f"s=$(ray status --address {ip}:{port} 2>/dev/null); "
        "npu=$(echo \"$s\" | grep -oP '(?<=/)\\d+\\.\\d+(?=\\s*NPU)' | head -n 1); "
        "npu=${npu:-0}; n=$(( ${npu%.*} / 16 )); "
        'echo "poll $(date +%s.%N) $n"; '
        f'if [ "$n" -lt {nodes} ]; then low=1; elif [ $low = 1 ]; then break; fi; sleep 5; done'
    )


class Stamped:
    """Lines of a process with the time each arrived."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip()))

    def first(self, pred: Callable[[str], bool], after: float = 0.0) -> tuple[float, str] | None:
        for t, line in list(self.lines):
            if t >= after and pred(line):
                return t, line
        return None

    def wait(self, pred: Callable[[str], bool], timeout: float, after: float = 0.0) -> tuple[float, str] | None:
        end = time.time() + timeout
        while time.time() < end:
            hit = self.first(pred, after)
            if hit or (self.proc.poll() is not None and not self.thread.is_alive()):
                return hit
            time.sleep(0.2)
        return None


def launch_wait(c: Cluster, run_id: str) -> list[Figure]:
    hv = c.hostvars()
    head_ip = hv["a3-01"]["a3_cluster_ip"]
    workers = c.hosts[1:]
    # A cold start of Ray: a worker that left is a fatal error for the entrypoint (its dead-node record stays in the
    # head's state), so the head restarts with a fresh state and every worker joins once, after the launch waits.
    for h in workers:
        must(c.ssh(h, f"cd /opt/verl-recipe && {COMPOSE} stop ray-worker"), f"stop ray-worker on {h}")
    must(c.ssh("a3-01", f"cd /opt/verl-recipe && {COMPOSE} stop ray-head && {COMPOSE} up -d ray-head"), "restart head")
    poll = Stamped(
        c.popen(
            "a3-01",
            f"cd /opt/verl-recipe && {COMPOSE} exec -T ray-head bash -c "
            + shlex.quote(head_poll_script(head_ip, 6379, c.nodes)),
        )
    )
    train: Stamped | None = None
    try:
        low = poll.wait(lambda s: s.startswith("poll ") and int(s.split()[2]) == 1, 300)
        if not low:
            raise RuntimeError(f"the restarted head never listed itself alone: {poll.lines[-3:]}")
        scale = must(run([sys.executable, str(REPO / "scripts" / "sim_scale.py"), RECIPE, str(c.nodes)]), "scale")
        train = Stamped(
            c.popen(
                "a3-01",
                f"cd /opt/verl-recipe && {COMPOSE} run --rm {SERVICE} --rehearse {scale.stdout.strip()}",
            )
        )
        if not train.wait(lambda s: s.startswith("waiting:"), 300):
            raise RuntimeError(f"the entrypoint did not start waiting: {train.lines[-10:]}")
        t_start = time.time()
        with ThreadPoolExecutor(len(workers)) as ex:
            for p in ex.map(lambda h: c.ssh(h, f"cd /opt/verl-recipe && {COMPOSE} start ray-worker"), workers):
                must(p, "start ray-worker")
        ready = train.wait(lambda s: "ready after" in s, 600, t_start)
        seen = poll.wait(lambda s: s.startswith("poll ") and int(s.split()[2]) >= c.nodes, 600, t_start)
        if not ready or not seen:
            raise RuntimeError(f"not noticed: entrypoint {ready}, poll loop {seen}; {train.lines[-10:]}")
        # The poll loop's own reading time (inside the head container, same kernel clock) is when ray status ran.
        poll_t = float(seen[1].split()[1])
        rc = train.proc.wait(timeout=900)
    finally:
        for s in (poll, train):
            if s and s.proc.poll() is None:
                s.proc.terminate()
        for h in workers:
            c.ssh(h, f"cd /opt/verl-recipe && {COMPOSE} up -d ray-worker")
    entry = ready[0] - t_start
    loop = seen[0] - t_start
    detail = {
        "entrypoint_notice_s": round(entry, 1),
        "poll_loop_notice_s": round(loop, 1),
        "poll_loop_ray_status_started_at_s": round(poll_t - t_start, 1),
        "rehearse_rc": rc,
        "ready_line": ready[1],
        "poll_lines": [x[1] for x in poll.lines][-8:],
    }
    n = c.nodes
    return [
        Figure(
            "4",
            f"launch notice after the workers start: entrypoint / `ray status` 5 s loop ({n} hosts)",
            ratio(entry, loop),
            "< 1 (entrypoint polls Ray's API every 2 s)",
            f"Ray cold start on {n} hosts: workers stopped, head restarted (fresh state), "
            f"`docker compose run {SERVICE} --rehearse` (layout scaled to {n} nodes) waiting on the head, and "
            "upstream's loop (`ray status` every 5 s, total NPU / 16 against NNODES) in the ray-head container; "
            "then every worker started at once: seconds from that start until each printed that all nodes are there "
            "(both include the workers' own Ray start-up)",
            run_id,
            detail,
        ),
        Figure(
            "4",
            f"rehearsal exit status after the wait ({n} hosts)",
            rc,
            "0",
            "exit status of the compose run above",
            run_id,
        ),
    ]


# ----------------------------------------------------------------------------------------------------------------
# 8. node loss: a host that loses its power, named by the head, against Ray's own node-death detection

RAY_DEAD_POLL = """
import sys, time, ray
ip = sys.argv[1]
ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
ids = {n["NodeID"] for n in ray.nodes() if n["NodeManagerAddress"] == ip and n["Alive"]}
print("watching" if ids else f"no live node at {ip}", flush=True)
while ids:
    if any(n["NodeID"] in ids and not n["Alive"] for n in ray.nodes()):
        print(f"dead {time.time():.3f}", flush=True)
        break
    time.sleep(0.5)
"""


def nodeloss_section(c: Cluster, run_id: str) -> list[Figure]:
    hv = c.hostvars()
    victim = c.hosts[-1]
    ip = hv[victim]["a3_cluster_ip"]
    head = f"cd /opt/verl-recipe && {COMPOSE}"
    wait_all = f"{head} exec -T ray-head verl-recipe wait-cluster --nodes {c.nodes} --deadline 600"
    must(c.ssh("a3-01", wait_all), "every node joined before the power loss")
    scale = must(run([sys.executable, str(REPO / "scripts" / "sim_scale.py"), RECIPE, str(c.nodes)]), "scale")
    train = Stamped(
        c.popen(
            "a3-01",
            f"{head} run --rm {SERVICE} --rehearse --wait-deadline 600 --iters 1000000 {scale.stdout.strip()}",
        )
    )
    poll = Stamped(c.popen("a3-01", f"{head} exec -T ray-head python3 -c {shlex.quote(RAY_DEAD_POLL)} {ip}"))
    rejoin_s: float | None = None
    try:
        if not train.wait(lambda s: "ready after" in s, 600) or not poll.wait(lambda s: s == "watching", 120):
            raise RuntimeError(f"the rehearsal or the Ray poll did not start: {train.lines[-10:]} {poll.lines[-3:]}")
        time.sleep(10)  # placement groups placed, probes and the all-reduce under way
        c.fault(victim, "down")
        # the moment the host died, as its engine recorded it (the command's own start-up is not counted)
        died = must(run(["docker", "inspect", "-f", "{{.State.FinishedAt}}", f"{c.name}-{victim}"]), "inspect")
        t0 = rfc3339_epoch(died.stdout)
        named = train.wait(lambda s: f"{victim} ({ip})" in s and ("lost" in s or "left" in s), 600, t0)
        poll.wait(lambda s: s.startswith("dead "), 600, t0)
        rc = train.proc.wait(timeout=600)
        named_at = named_lost(train.lines, victim, ip, t0)
        dead_s = ray_dead_after(poll.lines, t0)
        t1 = time.time()
        c.fault(victim, "clear")
        # Until the rebooted worker's new node registers, the head lists its old one as dead: ask again.
        while time.time() - t1 < 600:
            if c.ssh("a3-01", wait_all.replace("--deadline 600", "--deadline 30")).returncode == 0:
                rejoin_s = round(time.time() - t1, 1)
                break
            time.sleep(2)
    finally:
        for st in (train, poll):
            if st.proc.poll() is None:
                st.proc.terminate()
        c.make("sim-fault", f"HOST={victim}", "FAULT=clear")
    detail = {
        "head_line": named_at[1] if named_at else (named[1] if named else None),
        "ray_poll": [x[1] for x in poll.lines][-3:],
        "rehearsal_tail": [x[1] for x in train.lines][-6:],
    }
    return nodeloss_figures(c.nodes, named_at[0] if named_at else None, dead_s, rejoin_s, rc, run_id, detail)


# ----------------------------------------------------------------------------------------------------------------
# 5. rebuild


def rebuild_section(run_id: str) -> list[Figure]:
    venv = VENV_BIN.parent
    stamp = venv / ".stamp"
    tag = f"bench{os.getpid()}"
    runtime, recipe = f"{tag}-runtime:sim", f"{tag}-recipe:sim"
    work = Path(tempfile.mkdtemp(prefix="bench-src-"))
    try:
        # A copy of the commit: the shared working tree is never touched.
        must(run(["bash", "-c", f"git archive HEAD | tar -x -C {shlex.quote(str(work))}"], cwd=REPO), "copy")
        base = [
            "make",
            "--no-print-directory",
            "-C",
            str(work),
            "-o",
            str(stamp),
            f"VENV={venv}",
            f"IMAGE_BUILD_DIR={work}/build/image",
        ]
        # The copy's files carry the commit's time: make must not think the shared .venv is out of date.
        must(
            run(["bash", "-c", f"cd {shlex.quote(str(work))} && touch -d 2000-01-01 pyproject.toml requirements/*"]),
            "touch",
        )

        def full_build() -> subprocess.CompletedProcess[str]:
            rt = run([*base, "image-runtime-sim", f"SIM_RUNTIME_IMAGE={runtime}", "DOCKER_BUILD_EXTRA=--no-cache"])
            if rt.returncode != 0:
                return rt
            rc = run([*base, "image-recipe", f"RUNTIME_IMAGE={runtime}", f"RECIPE_IMAGE={recipe}"])
            return subprocess.CompletedProcess(rc.args, rc.returncode, rt.stdout + rc.stdout, rt.stderr + rc.stderr)

        full_s, full = timed(full_build)
        must(full, "full no-cache build")
        init = work / "entrypoints" / "verl_recipe" / "__init__.py"
        init.write_text(init.read_text() + "# bench: a one-line change\n")
        reb_s, reb = timed(
            lambda: run([*base, "image-recipe", f"RUNTIME_IMAGE={runtime}", f"RECIPE_IMAGE={recipe}"], timeout=3600)
        )
        must(reb, "recipe-layer rebuild")
    finally:
        run(["docker", "rmi", recipe, runtime])
        run(["rm", "-rf", str(work)])
    steps, cached = build_steps(reb.stdout)
    lines = re.findall(r"^Step \d+/\d+ : (.*)$", reb.stdout, re.M)
    first_change = next((i for i, s in enumerate(lines) if "entrypoints" in s), len(lines))
    ideal = len(lines) - first_change
    full_steps, _ = build_steps(full.stdout)
    detail = {
        "full_s": round(full_s, 1),
        "rebuild_s": round(reb_s, 1),
        "rebuild_steps": steps,
        "rebuild_cached": cached,
        "full_steps": full_steps,
        "rebuild_log": [
            ln[:100] for ln in reb.stdout.splitlines() if re.match(r"^(Step \d| ---> (Using|Running))", ln)
        ],
    }
    return [
        Figure(
            "5",
            "recipe-layer rebuild / full no-cache build of the simulated image",
            ratio(reb_s, full_s, 3),
            "small (only the recipe layer reruns)",
            "after a one-line change in entrypoints/verl_recipe/__init__.py (in a `git archive HEAD` copy): "
            "wall time of `make image-recipe` / of `make image-sim DOCKER_BUILD_EXTRA=--no-cache` (runtime + "
            "recipe layer, torch from the local wheel cache when present), same run, own image tags",
            run_id,
            detail,
        ),
        Figure(
            "5",
            f"layers rebuilt after the change (of {steps} steps)",
            layers_rebuilt(reb.stdout),
            f"{ideal} (the steps from `COPY entrypoints/` on)",
            "steps of the classic builder's output without ` ---> Using cache`",
            run_id,
        ),
    ]


# ----------------------------------------------------------------------------------------------------------------
# 6. cost of the simulation


def simcost_section(sizes: str, run_id: str) -> list[Figure]:
    out = REPO / "build" / "bench" / "sim-measure.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, SIM_NAME=f"bench{os.getpid()}-m")
    must(
        run(
            [
                sys.executable,
                str(REPO / "docker" / "sim-host" / "simctl.py"),
                "measure",
                "--sizes",
                sizes,
                "--output",
                str(out),
            ],
            env=env,
            timeout=3600,
        ),
        "simctl measure",
    )
    data = {d["hosts"]: d for d in json.loads(out.read_text())}
    lo, hi = min(data), max(data)
    a, b = data[lo], data[hi]
    how = (
        "docker/sim-host/simctl.py measure: clusters brought up one after another; memory = each host "
        "container's cgroup memory without page cache 20 s after start; ready = sshd, dockerd and the NPU "
        "responder up"
    )
    figs = [
        Figure(
            "6",
            f"memory per host: {hi} hosts / {lo} host",
            ratio(b["mem_per_host_mib_mean"], a["mem_per_host_mib_mean"]),
            "1.0 (flat)",
            how,
            run_id,
            {"measure": list(data.values())},
        ),
        Figure(
            "6",
            f"start-up per host (mean ready): {hi} hosts / {lo} host",
            ratio(b["host_ready_s_mean"], a["host_ready_s_mean"]),
            f"1.0; limit ~{hi}/2 on 2 cores",
            how,
            run_id,
        ),
    ]
    for n, d in sorted(data.items()):
        figs.append(
            Figure(
                "6",
                f"memory per host, MiB ({n} hosts; cgroup mean)",
                d["mem_per_host_mib_mean"],
                "counts; the A3 host itself has none of it",
                how,
                run_id,
            )
        )
    return figs


# ----------------------------------------------------------------------------------------------------------------


def write_results(path_json: Path, path_md: Path, meta: dict[str, Any], figures: list[Figure]) -> str:
    old = json.loads(path_json.read_text()) if path_json.is_file() else {}
    merged = merge(old.get("figures", []), figures)
    runs = dict(old.get("runs", {}))
    runs[meta["run"]] = meta
    # A run none of whose figures is left (all measured again later) is dropped, except this one.
    owners = {d.get("run") for d in merged}
    runs = {rid: m for rid, m in runs.items() if rid in owners or rid == meta["run"]}
    path_json.write_text(json.dumps({"runs": runs, "figures": merged}, indent=1) + "\n")
    return render_results(path_json, path_md)


def render_results(path_json: Path, path_md: Path) -> str:
    """results.md from results.json (also `--render`: after a change of the format, without measuring again)."""
    data = json.loads(path_json.read_text())
    runs, merged = data["runs"], data["figures"]
    quick = all("QUICK" in m["mode"] for m in runs.values())
    shown = [Figure(d["section"], d["name"], d["value"], d["ideal"], d["method"], d["run"]) for d in merged]
    tbl = table(shown)
    md = [
        "# `make bench` results" + (" (QUICK)" if quick else ""),
        "",
        f"Generated by `bench/run.py` ({'`make bench QUICK=1`' if quick else '`make bench`'}); "
        "do not edit by hand. Every figure is a ratio of two measurements taken in the same run, or a count that "
        f"does not depend on the machine's speed. Raw times are in {path_json.name} (`detail`); what limits each "
        "figure: [README.md](README.md).",
        "",
        "## Runs",
        "",
    ]
    for rid, m in sorted(runs.items()):
        md.append(
            f"- `{rid}`: {m['date']}, commit `{m['commit']}`, {m['mode']}, sections {', '.join(m['sections'])}"
            f"; machine {m['machine']['nproc']} cores, {m['machine']['mem_total_gib']} GiB, load average "
            f"{' / '.join(f'{x:.1f}' for x in m['machine']['loadavg'])} at start, "
            f"{' / '.join(f'{x:.1f}' for x in m.get('loadavg_end', []))} at end; {m.get('status', '')}"
        )
    md += ["", "## Figures", "", tbl, "", "## Method of each figure", ""]
    for d in merged:
        md.append(f"- **{d['section']}. {d['name']}** ({d['run']}): {d['method']}")
    path_md.write_text("\n".join(md) + "\n")
    return tbl


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="1 and 3 hosts, fewer repetitions")
    ap.add_argument("--sections", default=",".join(SECTIONS), help="comma list of " + ",".join(SECTIONS))
    ap.add_argument("--name", default="bench", help="prefix of the simulated clusters")
    ap.add_argument("--out", default=str(REPO / "bench"))
    ap.add_argument("--render", action="store_true", help="only rewrite results.md from results.json")
    a = ap.parse_args()
    stem = "results-quick" if a.quick else "results"
    if a.render:
        print(render_results(Path(a.out) / f"{stem}.json", Path(a.out) / f"{stem}.md"))
        return 0
    sections = [s for s in a.sections.split(",") if s]
    bad = [s for s in sections if s not in SECTIONS]
    if bad:
        print(f"bench: unknown section {bad[0]!r}; choose from {','.join(SECTIONS)}", file=sys.stderr)
        return 2
    if not TARBALL.is_file() and set(sections) & {"deploy", "preflight", "launch", "image", "nodeloss"}:
        print(f"bench: {TARBALL} is missing: run `make image-sim-tgz`", file=sys.stderr)
        return 2
    big_n = 3 if a.quick else 16
    reps = 5 if a.quick else 10
    commit = run(["git", "rev-parse", "HEAD"], cwd=REPO).stdout.strip()
    run_id = ("quick-" if a.quick else "full-") + time.strftime("%Y%m%dT%H%M", time.gmtime())
    meta: dict[str, Any] = {
        "run": run_id,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": commit,
        "mode": f"{'QUICK' if a.quick else 'full'} (1 and {big_n} hosts)",
        "sections": sections,
        "machine": machine(),
    }
    figures: list[Figure] = []
    clusters: list[Cluster] = []

    def on_term(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    errors: list[str] = []

    def attempt(what: str, fn: Callable[[], list[Figure]]) -> bool:
        """One section; a failure is logged and recorded, and the bench goes on with the next one."""
        try:
            figures.extend(fn())
            return True
        except Exception as e:  # noqa: BLE001 - report what was measured, then fail at the end
            first = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
            errors.append(f"{what}: {first}")
            log(f"{what} failed: {str(e)[-3000:]}")
            return False

    try:
        if set(sections) & {"deploy", "preflight", "launch", "image", "nodeloss"}:
            one: dict[str, Any] = {}
            if "deploy" in sections:
                c1 = Cluster(f"{a.name}1", 1)
                clusters.append(c1)

                def small() -> list[Figure]:
                    log(f"sim-up 1 host ({c1.name})")
                    c1.up()
                    c1.seed()
                    log("deploy.yml x2 on 1 host")
                    one.update(deploy_pair(c1))
                    log(f"1 host: {one['first_s']} s / {one['rerun_s']} s")
                    return []

                attempt("deploy on 1 host", small)
                c1.down()
            cn = Cluster(f"{a.name}{big_n}", big_n)
            clusters.append(cn)
            deployed = False
            big_first_s: float | None = None

            def bring_up() -> list[Figure]:
                nonlocal deployed, big_first_s
                log(f"sim-up {big_n} hosts ({cn.name})")
                cn.up()
                cn.seed()
                if not set(sections) & {"deploy", "launch", "image", "nodeloss"}:
                    return []
                log(f"deploy.yml x2 on {big_n} hosts")
                big = deploy_pair(cn)
                deployed, big_first_s = True, big["first_s"]
                log(f"{big_n} hosts: {big['first_s']} s / {big['rerun_s']} s, changed {big['rerun_changed']}")
                return deploy_figures(one, big, run_id) if one else []

            up_ok = attempt(f"sim-up and deploy on {big_n} hosts", bring_up)
            if up_ok and deployed and "launch" in sections:
                log("launch: wait for the last node, entrypoint vs ray status loop")
                attempt("launch wait", lambda: launch_wait(cn, run_id))
            if up_ok and "preflight" in sections:
                log("preflight: healthy, then with faults")
                attempt("preflight", lambda: preflight_section(cn, run_id, big_first_s))
            if up_ok and deployed and "image" in sections:
                log("image: fan-out vs naive copy")
                attempt("image", lambda: image_section(cn, run_id))
            if up_ok and deployed and "nodeloss" in sections:
                log("node loss: power loss named by the head vs Ray's node-death detection, then a reboot")
                attempt("nodeloss", lambda: nodeloss_section(cn, run_id))
            cn.down()
        if "cli" in sections:
            log("launch: render/validate medians")
            attempt("launch cli", lambda: launch_cli(reps, run_id))
        if "verl" in sections:
            log(f"launch: verl's own checks inside validate, in {IMAGE}")
            attempt("verl checks", lambda: verl_checks_section(reps, run_id))
        if "rebuild" in sections:
            log("rebuild: full no-cache build, then a one-line change")
            attempt("rebuild", lambda: rebuild_section(run_id))
        if "simcost" in sections:
            sizes = "1,4" if a.quick else "1,4,16"
            log(f"simulation cost for {sizes} hosts")
            attempt("simcost", lambda: simcost_section(sizes, run_id))
    except (Exception, SystemExit) as e:  # noqa: BLE001 - interrupted: still write what was measured
        errors.append(f"interrupted: {e!r}"[:300])
    finally:
        for c in clusters:
            c.down()
    status = "complete" if not errors else "incomplete: " + "; ".join(errors)
    meta["loadavg_end"] = list(os.getloadavg())
    meta["status"] = status
    out = Path(a.out)
    # Full and QUICK runs measure different cluster sizes: each keeps its own file so neither hides the other.
    tbl = write_results(out / f"{stem}.json", out / f"{stem}.md", meta, figures)
    print(tbl)
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
