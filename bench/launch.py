"""Section 4, the launch path: the CLI's start-up against a bare interpreter (`cli`), what verl's own checks add to
`validate` inside the image (`verl`), and how soon the launch notices the last node on a Ray cold start (`launch`)."""

from __future__ import annotations

import os
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from bench.benchlib import Figure, median, ratio, validate_runs, verl_check_share
from bench.common import COMPOSE, IMAGE, PLAN_NODES, RECIPE, SERVICE, Stamped, scaled_layout, timed
from simkit.cluster import SimCluster
from simkit.paths import VENV_BIN
from simkit.procs import checked, run


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
            checked(p, " ".join(cmd))
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
    p = checked(run([*cmd, validate_loop_script(reps)], timeout=1800), f"validate x{reps} in {IMAGE}")
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


def launch_wait(c: SimCluster, run_id: str) -> list[Figure]:
    hv = c.hostvars()
    head_ip = hv["a3-01"]["a3_cluster_ip"]
    workers = c.hosts[1:]
    # A cold start of Ray: a worker that left is a fatal error for the entrypoint (its dead-node record stays in the
    # head's state), so the head restarts with a fresh state and every worker joins once, after the launch waits.
    for h in workers:
        checked(c.shell(h, f"cd /opt/verl-recipe && {COMPOSE} stop ray-worker"), f"stop ray-worker on {h}")
    checked(
        c.shell("a3-01", f"cd /opt/verl-recipe && {COMPOSE} stop ray-head && {COMPOSE} up -d ray-head"), "restart head"
    )
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
        train = Stamped(
            c.popen(
                "a3-01",
                f"cd /opt/verl-recipe && {COMPOSE} run --rm {SERVICE} --rehearse {scaled_layout(c.nodes)}",
            )
        )
        if not train.wait(lambda s: s.startswith("waiting:"), 300):
            raise RuntimeError(f"the entrypoint did not start waiting: {train.lines[-10:]}")
        t_start = time.time()
        with ThreadPoolExecutor(len(workers)) as ex:
            for p in ex.map(lambda h: c.shell(h, f"cd /opt/verl-recipe && {COMPOSE} start ray-worker"), workers):
                checked(p, "start ray-worker")
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
            c.shell(h, f"cd /opt/verl-recipe && {COMPOSE} up -d ray-worker")
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
