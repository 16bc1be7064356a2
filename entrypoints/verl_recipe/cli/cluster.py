"""Cluster commands: `node` (a host's Ray service), `wait-cluster`, `train` (wait, validate, rehearse or launch),
and `prepare-data`."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..checks import resume
from ..cluster.nodeenv import NodeEnv, from_environ
from ..exitcodes import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_NOT_READY, EXIT_OK, EXIT_SIMULATED
from ..prepare import add_request_args, prepare, request_of
from ..problems import error, print_lines, refuse
from ..settingtypes import SettingsError
from ..topology import DIES_PER_NODE

# Said wherever a run on the CPU stand-ins appears (the head's output, settings.json): what is not real in it.
STANDIN_NOTE = (
    "verl's own trainer on the CPU STAND-INS of verl-recipe:sim (DEVICE=cpu): FSDP2 on gloo, rollout by Hugging "
    "Face forward passes (not vLLM), a tiny random model; no NPU, HCCL or vLLM is exercised"
)
DEFAULT_JOIN_DEADLINE_S = 600.0
DEFAULT_WAIT_DEADLINE_S = 900.0


def add_cluster_commands(sub: Any) -> None:
    p_node = sub.add_parser("node", help="run this host's Ray node (head or worker) until stopped")
    p_node.add_argument("--role", choices=("head", "worker"), required=True)
    p_node.add_argument(
        "--join-deadline",
        type=float,
        default=DEFAULT_JOIN_DEADLINE_S,
        help="seconds a worker keeps trying to reach the head",
    )
    p_wait = sub.add_parser("wait-cluster", help="wait until N nodes with their dies have joined")
    p_wait.add_argument("--nodes", type=int, required=True)
    p_wait.add_argument("--dies", type=int, default=DIES_PER_NODE)
    p_wait.add_argument("--deadline", type=float, default=DEFAULT_WAIT_DEADLINE_S)
    p_train = sub.add_parser(
        "train",
        help="wait for the cluster, validate, write the run record and launch",
        epilog="exit codes: 0 done (or complete already), 1 a rehearsal found problems, 2 bad input (nothing "
        "started), 3 the cluster not ready or a node lost, 4 a real launch on the simulated cluster, 5 a "
        "HEALTH_STOP rule stopped the run, 7 `verl-recipe stop` stopped it; other values are verl's (docs/cli.md)",
    )
    add_request_args(p_train)
    p_train.add_argument("--rehearse", action="store_true", help="run the rehearsal instead of the training")
    p_train.add_argument(
        "--wait-deadline",
        type=float,
        default=DEFAULT_WAIT_DEADLINE_S,
        help=f"seconds to wait for every node to join (default {DEFAULT_WAIT_DEADLINE_S:.0f})",
    )
    p_train.add_argument(
        "--ranks-per-node",
        type=int,
        default=0,
        help="rehearsal ranks per node (default: every die on NPU, 1 in the simulation)",
    )
    p_train.add_argument("--tensor-mb", type=float, default=8.0, help="rehearsal all-reduce size in MB (default 8)")
    p_train.add_argument("--iters", type=int, default=5, help="rehearsal all-reduce iterations (default 5)")
    p_prep = sub.add_parser("prepare-data", help="verify (or, in the simulation, create) the model and data")
    add_request_args(p_prep)
    p_prep.add_argument(
        "--synthetic",
        action="store_true",
        help="simulated cluster only: write a config.json, a placeholder weight and data files",
    )


class HeadUnreachable(RuntimeError):
    pass


def _connect(ne: NodeEnv, deadline_s: float) -> Any:
    """Attach to this node's raylet once the head answers; a head still starting is waited for, not an error."""
    import time

    import ray

    from ..cluster.raynode import QUIET_RAY, check_token_accepted, tcp_reachable

    for key, value in QUIET_RAY.items():
        os.environ.setdefault(key, value)  # every client of the cluster as its nodes: no accelerator FutureWarning
    end = time.monotonic() + deadline_s
    while not tcp_reachable(ne.head_addr, ne.ray_port):
        if time.monotonic() > end:
            raise HeadUnreachable(
                f"Ray head {ne.gcs_address} not reachable after {deadline_s:.0f} s; fix: start "
                "ray-head on the head host (docker compose up -d ray-head) and check its log"
            )
        time.sleep(2)
    check_token_accepted(ne.name, ne.gcs_address)  # a wrong token ends the wait at once, named

    def on_alarm(_signum: int, _frame: Any) -> None:
        raise TimeoutError("ray.init did not return")

    while True:
        remaining = end - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError("deadline passed")
            if not tcp_reachable(ne.head_addr, ne.ray_port):
                raise ConnectionError(f"{ne.gcs_address} stopped answering")
            # Ray's client keeps retrying a GCS that went away; the alarm bounds it by our deadline.
            previous = signal.signal(signal.SIGALRM, on_alarm)
            signal.alarm(max(1, int(remaining)))
            try:
                ray.init(address=ne.gcs_address, _node_ip_address=ne.ip, logging_level="ERROR", log_to_driver=False)
            finally:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, previous)
            return ray
        except (ConnectionError, RuntimeError, TimeoutError) as exc:
            # The GCS answers a moment before this node's raylet has registered: try again until the deadline.
            ray.shutdown()
            if time.monotonic() >= end:
                raise HeadUnreachable(
                    f"cannot attach to the Ray node at {ne.ip} through {ne.gcs_address} after "
                    f"{deadline_s:.0f} s ({exc or type(exc).__name__}); fix: start this host's "
                    "Ray service and check its log"
                ) from None
            time.sleep(2)


def cmd_wait(ne: NodeEnv, nodes: int, dies: int, deadline: float) -> int:
    """Wait, then print one row per host: the readiness report deploy.yml shows."""
    from ..cluster.clusterwait import node_table, views_from_ray, wait_for_cluster
    from ..cluster.raynode import require_token_auth

    require_token_auth()
    ray = _connect(ne, deadline)
    try:
        from ..cluster.nodewatch import NodeWatch

        rc = wait_for_cluster(lambda: views_from_ray(ray), ne.cluster, nodes, dies, deadline, watch=NodeWatch())
        print(node_table(views_from_ray(ray), ne.cluster, dies))
        return rc
    finally:
        ray.shutdown()


def start_local_head(ne: NodeEnv) -> None:
    """A single-node recipe with no cluster running starts its own head in this container."""
    from ..cluster.raynode import node_environment, node_resources, ray_start_argv, tcp_reachable

    if tcp_reachable(ne.head_addr, ne.ray_port):
        return
    dies, cpus = node_resources(ne)
    argv = [a for a in ray_start_argv("head", ne, dies, cpus, dashboard=False) if a != "--block"]
    print(
        f"{ne.name}: no Ray cluster at {ne.gcs_address}; starting a head here for this single-node run", file=sys.stderr
    )
    subprocess.run(argv, env=node_environment(ne, dies), check=True)


def cmd_train(ns: argparse.Namespace, extra: list[str]) -> int:
    """A training run (or its rehearsal) with its own lines kept in its run folder as well (run/ownlog.py)."""
    from ..run.ownlog import OwnLog

    ns.own_log = OwnLog()
    try:
        return _train(ns, extra)
    except BaseException as exc:
        # the traceback the terminal gets from the interpreter, into supervisor.log too (a detached run keeps it)
        if not isinstance(exc, (SystemExit, KeyboardInterrupt)):
            ns.own_log.write(traceback.format_exc())
        raise
    finally:
        ns.own_log.close()


def _train(ns: argparse.Namespace, extra: list[str]) -> int:
    ne = from_environ()
    # verl is pointed at this cluster's head explicitly, never at whatever `auto` finds.
    os.environ.setdefault("RAY_ADDRESS", ne.gcs_address)
    from ..cluster.raynode import QUIET_RAY

    for key, value in QUIET_RAY.items():
        os.environ.setdefault(key, value)  # the driver (this process, then verl's) as the nodes
    req = request_of(ns, extra)
    launch, resolved, problems = prepare(req, rehearse=ns.rehearse, simulated=ne.simulated)
    if problems:
        return refuse(problems, req.recipe)
    v = resolved.values
    done = None if ns.rehearse else resume.complete(v)
    if done:  # the same command after a finished run trains nothing (verl would train one step past the total)
        print(done, flush=True)
        return EXIT_OK
    nnodes, dies = int(v["NNODES"]), int(v["NDEVICES_PER_NODE"])
    from ..cluster.raynode import require_token_auth

    require_token_auth()  # verl's driver and every worker it starts inherit this container's token settings
    if nnodes == 1:
        start_local_head(ne)
    from ..cluster.clusterwait import views_from_ray, wait_for_cluster
    from ..cluster.nodewatch import Guard, NodeWatch

    watch = NodeWatch()  # names a node that stops answering, long before Ray marks it dead
    ray = _connect(ne, ns.wait_deadline)
    try:
        rc = wait_for_cluster(lambda: views_from_ray(ray), ne.cluster, nnodes, dies, ns.wait_deadline, watch=watch)
        if rc:
            return rc
        if ns.rehearse:
            guard = Guard(watch, lambda: views_from_ray(ray), "during the rehearsal")
            return run_rehearsal(ray, ns, ne, resolved.values, guard)
        members = [m for m in views_from_ray(ray) if m.alive]  # the launch keeps knocking on these
    finally:
        ray.shutdown()
    from ..run.launcher import end_of_simulation, run_attempt

    info: dict[str, Any] = {"cluster": ne.gcs_address}
    if v["DEVICE"] == "cpu":
        info["standin"] = STANDIN_NOTE
        print(f"simulated cluster: {STANDIN_NOTE}", file=sys.stderr, flush=True)
    elif ne.simulated:
        return end_of_simulation(launch, resolved, info, EXIT_SIMULATED)
    # The restart policy (run/restart.py, run/supervise.py): each attempt is a run folder of its own; one that lost
    # a node or met a transient failure starts again on healthy nodes (run/recovery.py), validated again and
    # resumed; bounded by RESTARTS.
    from ..run.lifecycle import write_heartbeat
    from ..run.supervise import Hooks, supervise

    def attempt(on: tuple[Any, ...], more: dict[str, Any]) -> tuple[int, Path]:
        # The hosts and their cluster addresses, in the record: diagnose names a failed worker's host from Ray's
        # address of it, and a node log's own `ray start` line may be far behind its tail.
        info.update(more, nodes=[{"host": m.name, "ip": m.ip} for m in on])
        return run_attempt(state["launch"], state["resolved"], info, members=list(on), on_run_dir=ns.own_log.to)

    def wait(lost: dict[str, Any], poll: Callable[[], None]) -> tuple[int, Any]:
        wait_s = float(state["resolved"].values.get("RESTART_WAIT") or ns.wait_deadline)
        return _wait_restart(ne, nnodes, dies, wait_s, lost, poll)

    def again() -> tuple[str, int] | None:
        launch2, resolved2, problems = prepare(
            req, simulated=ne.simulated
        )  # validated again: the resume check sees the new checkpoint
        if problems:
            refuse(problems, req.recipe)
            return f"the launch was refused on validation: {problems[0]}", EXIT_BAD_INPUT
        done = resume.complete(resolved2.values)
        if done:
            print(done, flush=True)
            return "the run is complete already", EXIT_OK
        state.update(launch=launch2, resolved=resolved2)
        return None

    state: dict[str, Any] = {"launch": launch, "resolved": resolved}
    hooks = Hooks(attempt=attempt, wait=wait, again=again, heartbeat=write_heartbeat)
    return supervise(tuple(members), int(v.get("RESTARTS") or 0), hooks)


def _wait_restart(
    ne: NodeEnv, nnodes: int, dies: int, deadline_s: float, lost: dict[str, Any], poll: Callable[[], None]
) -> tuple[int, Any]:
    """Ray told at once that the lost nodes are gone (a powered-off host's dies are otherwise free in its view for
    30 s or more), then the restart wait over healthy nodes (run/recovery.py)."""
    from ..cluster.clusterwait import drain_nodes, views_from_ray
    from ..cluster.nodewatch import knock
    from ..run.recovery import wait_for_restart

    print(f"waiting up to {deadline_s:.0f} s for {nnodes} healthy nodes", file=sys.stderr, flush=True)
    ray = _connect(ne, deadline_s)
    try:
        said = drain_nodes(ray, [x.node_id for x in lost.values() if x.node_id])
        if said:
            print(said, file=sys.stderr, flush=True)
        return wait_for_restart(
            lambda: views_from_ray(ray), knock, lost, ne.cluster, nnodes, dies, deadline_s, on_poll=poll
        )
    finally:
        ray.shutdown()


def run_rehearsal(ray: Any, ns: argparse.Namespace, ne: NodeEnv, v: dict[str, Any], guard: Any = None) -> int:
    from ..rehearse import format_report, rehearse, write_report
    from ..render import experiment_dir

    device = "npu" if v["DEVICE"] == "npu" and not ne.simulated else "cpu"
    ranks = ns.ranks_per_node or (int(v["NDEVICES_PER_NODE"]) if device == "npu" else 1)
    paths = {
        "read": [str(v["MODEL_PATH"]), *v["TRAIN_FILES"], *v["VAL_FILES"]],
        "write": [str(v["CKPT_DIR"]), str(v["LOG_DIR"])],
    }
    reports, summary = rehearse(
        ray,
        nnodes=int(v["NNODES"]),
        dies=int(v["NDEVICES_PER_NODE"]),
        device=device,
        paths=paths,
        names={ip: name for name, ip in ne.cluster},
        ranks_per_node=ranks,
        tensor_mb=ns.tensor_mb,
        iters=ns.iters,
        timeout_s=ns.wait_deadline,
        guard=guard,
        layout=v,
    )
    failed = "error" in summary or any(r.problems for r in reports)
    # As for a cluster that is not ready: a node was lost; the report names it.
    summary["exit_code"] = EXIT_NOT_READY if summary.get("lost") else EXIT_FAILED if failed else EXIT_OK
    print(format_report(reports, summary))
    out = Path(experiment_dir(str(v["LOG_DIR"]), v)) / "rehearsals" / f"{int(summary.get('nnodes', 0))}-nodes.json"
    page = write_report(out, reports, summary)
    print(f"rehearsal report: {out}", file=sys.stderr)
    print(f"readiness page: {page.resolve().as_uri()}", file=sys.stderr)
    return int(summary["exit_code"])


def cmd_prepare_data(ns: argparse.Namespace, extra: list[str]) -> int:
    from ..cluster.assets import prepare_assets
    from ..resolve import resolve

    req = request_of(ns, extra)
    recipe, resolved = resolve(req)
    simulated = os.environ.get("VERL_RECIPE_SIMULATED") == "1"
    if ns.synthetic and not simulated:
        raise SettingsError(
            "prepare-data --synthetic writes placeholder weights: only on the simulated cluster "
            "(VERL_RECIPE_SIMULATED=1); fix: place the real checkpoint and data on shared storage"
        )
    problems = prepare_assets(recipe, resolved.values, synthetic=ns.synthetic)
    print_lines(problems)
    return EXIT_BAD_INPUT if problems else EXIT_OK


def run_cluster_command(ns: argparse.Namespace, extra: list[str]) -> int:
    from ..cluster.raynode import NodeError, run_node

    try:
        if ns.cmd == "node":
            return run_node(ns.role, from_environ(), ns.join_deadline)
        if ns.cmd == "wait-cluster":
            return cmd_wait(from_environ(), ns.nodes, ns.dies, ns.deadline)
        if ns.cmd == "train":
            return cmd_train(ns, extra)
        if ns.cmd == "prepare-data":
            return cmd_prepare_data(ns, extra)
    except (SettingsError, NodeError) as exc:
        error(exc)
        return EXIT_BAD_INPUT
    except HeadUnreachable as exc:
        error(exc)
        return EXIT_NOT_READY
    raise SystemExit(f"unknown command {ns.cmd}")
