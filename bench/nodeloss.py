"""Section 8, node loss: a host that loses its power during a rehearsal, named by the head, against Ray's own
node-death detection; then its reboot, until every node has joined again."""

from __future__ import annotations

import shlex
import time

from bench.benchlib import Figure, named_lost, nodeloss_figures, ray_dead_after, rfc3339_epoch
from bench.common import COMPOSE, SERVICE, Stamped, scaled_layout
from simkit.cluster import SimCluster
from simkit.procs import checked, run

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


def nodeloss_section(c: SimCluster, run_id: str) -> list[Figure]:
    hv = c.hostvars()
    victim = c.hosts[-1]
    ip = hv[victim]["a3_cluster_ip"]
    head = f"cd /opt/verl-recipe && {COMPOSE}"
    wait_all = f"{head} exec -T ray-head verl-recipe wait-cluster --nodes {c.nodes} --deadline 600"
    checked(c.shell("a3-01", wait_all), "every node joined before the power loss")
    train = Stamped(
        c.popen(
            "a3-01",
            f"{head} run --rm {SERVICE} --rehearse --wait-deadline 600 --iters 1000000 {scaled_layout(c.nodes)}",
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
        died = checked(run(["docker", "inspect", "-f", "{{.State.FinishedAt}}", f"{c.name}-{victim}"]), "inspect")
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
            if c.shell("a3-01", wait_all.replace("--deadline 600", "--deadline 30")).returncode == 0:
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
