"""Section 2, image distribution: deploy.yml's image fan-out against a naive copy to every host, in bytes the control
node sends into the cluster's Docker bridge and in time; and a check of what that bridge counter sees."""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.benchlib import Figure, ratio
from bench.common import COMPOSE, IMAGE, TARBALL, deploy_yml, log, timed
from simkit.cluster import SimCluster
from simkit.playbook import role_times
from simkit.procs import checked, run


def bridge(c: SimCluster) -> Path:
    """The statistics folder of the Linux bridge of the cluster's Docker network on this machine."""
    p = checked(run(["docker", "network", "inspect", c.name, "-f", "{{json .}}"]), "network inspect")
    info = json.loads(p.stdout)
    name = (info.get("Options") or {}).get("com.docker.network.bridge.name") or "br-" + info["Id"][:12]
    return Path("/sys/class/net") / name / "statistics"


def tx(c: SimCluster) -> int:
    """Bytes this machine has sent into the cluster's bridge so far."""
    return int((bridge(c) / "tx_bytes").read_text())


def bridge_experiment(c: SimCluster) -> dict[str, Any]:
    """Does the bridge's tx counter see host-to-host frames? 32 MiB each way, measured."""
    size = 32 * 2**20
    ip2 = c.hostvars()["a3-02"]["a3_cluster_ip"]
    tx0 = tx(c)
    checked(c.shell("a3-02", "cat > /dev/null", data=os.urandom(size)), "control->a3-02 copy")
    control = tx(c) - tx0
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
    tx0 = tx(c)
    checked(run(["docker", "exec", f"{c.name}-a3-01", "python3", "-c", client], timeout=300), "a3-01->a3-02 copy")
    got = srv.communicate(timeout=120)[0].strip()
    between = tx(c) - tx0
    return {
        "sent_bytes": size,
        "control_to_host_tx": control,
        "host_to_host_tx": between,
        "host_to_host_received": int(got or 0),
    }


def image_section(c: SimCluster, run_id: str) -> list[Figure]:
    size = TARBALL.stat().st_size
    exp = bridge_experiment(c)
    log(f"bridge experiment: {exp}")
    # Nothing may use the image while it is removed: stop the Ray services first.
    c.on_all(f"cd /opt/verl-recipe && {COMPOSE} down")
    for p in c.on_all(f"docker rmi {IMAGE}"):
        checked(p, "docker rmi")
    tx0 = tx(c)
    fan_s, p = deploy_yml(c, "--tags", "image")
    fan_bytes = tx(c) - tx0
    checked(p, "deploy.yml --tags image")
    fan_role = role_times(p.stdout).get("image_dist", fan_s)
    ids = {r.stdout.strip() for r in c.on_all(f"docker image inspect -f '{{{{.Id}}}}' {IMAGE}")}
    # The naive way, same image: scp from the control node to every host at once, then docker load on each.
    for p in c.on_all(f"docker rmi {IMAGE}"):
        checked(p, "docker rmi")
    stage = "/var/tmp/bench-naive.tar.gz"

    def naive(host: str) -> None:
        checked(
            run(["scp", "-q", "-F", str(c.inventory / "ssh_config"), str(TARBALL), f"{host}:{stage}"], timeout=3600),
            f"scp to {host}",
        )
        checked(c.shell(host, f"docker load -q -i {stage} && rm -f {stage}"), f"docker load on {host}")

    tx0 = tx(c)
    naive_s, _ = timed(lambda: list(ThreadPoolExecutor(c.nodes).map(naive, c.hosts)))
    naive_bytes = tx(c) - tx0
    ids_naive = {r.stdout.strip() for r in c.on_all(f"docker image inspect -f '{{{{.Id}}}}' {IMAGE}")}
    # The sections after this one (node loss) need the cluster as deployed: start the Ray services again.
    checked(deploy_yml(c, "--tags", "ray")[1], "deploy.yml --tags ray after the image section")
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
