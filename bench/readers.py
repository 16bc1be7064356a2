"""Section `readers`: what the run-folder readers and the live watch cost, each against a plain read of the same
file measured in the same run (no cluster, no Docker).

- `diagnose` on a run folder whose train.log is 100 MB (verl's INFO lines, tqdm bars written with carriage returns
  and no newline, an out-of-memory traceback at the end), against a `wc -l`-like full read of the same file in
  Python: the time ratio, and the peak RSS of each command in MiB.
- `compare RUN --baseline FILE` and `report RUN` on a metrics.jsonl of a million lines, each against a plain
  `json.loads` of every line of the same file: time ratios and peak RSS.
- The live watch: the CPU time it spends per metric line (MetricTail + the progress line + the health rules on a
  record of ~150 metrics, as verl 0.8.0 logs them), as a percentage of the step time of the simulated cluster
  (2.3 s, what its CPU stand-ins measured; an A3 step of the 397B recipe takes minutes). The issue's target: < 1 %.

Every command runs in a child process of its own, and `os.wait4` gives that child's own CPU time and peak RSS, so
each figure's two sides are measured the same way. `python -m bench.readers --log-mb 5 --metric-lines 20000`
runs it small and prints the table; tests/bench/test_readers.py covers the pure parts.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.benchlib import Figure, ratio, table

SECTION = "readers"
LOG_MB = 100
METRIC_LINES = 1_000_000
STEP_S = 2.3  # the simulated cluster's step time on its CPU stand-ins (bench section train)
WATCH_LINES = 2000
WATCH_TARGET_PCT = 1.0

# verl 0.8.0's metric names as its trainer logs them per step (trainer/ppo/ray_trainer.py fit(), metric_utils.py
# compute_data_metrics / compute_timing_metrics / compute_throughout_metrics, the workers' perf figures): the ones
# the watch, compare and the run page read come first.
READ_BY_US = [
    "training/global_step",
    "timing_s/step",
    "perf/throughput",
    "critic/rewards/mean",
    "response_length/mean",
    "actor/perf/max_memory_allocated_gb",
    "actor/perf/cpu_memory_used_gb",
    "training/rollout_probs_diff_mean",
    "actor/pg_loss",
    "actor/grad_norm",
]
STATS = ("mean", "max", "min")
FAMILIES: list[tuple[str, tuple[str, ...]]] = [
    ("actor", ("entropy", "pg_clipfrac", "pg_clipfrac_lower", "ppo_kl", "kl_loss", "kl_coef", "lr")),
    ("actor/perf", ("max_memory_reserved_gb",)),
    ("critic/score", STATS),
    ("critic/rewards", ("max", "min")),
    ("critic/advantages", STATS),
    ("critic/returns", STATS),
    ("response_length", ("max", "min", "clip_ratio")),
    ("response/aborted_ratio", ("",)),
    ("prompt_length", (*STATS, "clip_ratio")),
    (
        "timing_s",
        (
            "gen",
            "reshard",
            "generate_sequences",
            "reward",
            "old_log_prob",
            "ref",
            "adv",
            "update_actor",
            "update_weights",
            "save_checkpoint",
            "testing",
            "start_profile",
            "stop_profile",
        ),
    ),  # fmt: skip
    ("timing_per_token_ms", ("gen", "ref", "adv", "update_actor", "old_log_prob")),
    (
        "perf",
        (
            "total_num_tokens",
            "time_per_step",
            "max_memory_allocated_gb",
            "max_memory_reserved_gb",
            "cpu_memory_used_gb",
        ),
    ),  # fmt: skip
    ("training", ("epoch", "rollout_probs_diff_max", "rollout_probs_diff_std", "rollout_actor_probs_pearson_corr")),
    ("global_seqlen", ("min", "max", "minmax_diff", "balanced_min", "balanced_max", "mean")),
    ("rollout_corr", ("training_ppl", "rollout_ppl", "log_ppl_diff", "kl", "k3_kl", "chi2_token")),
]
# The agent loop's per-worker figures make up the rest of the ~150 (verl/experimental/agent_loop).
AGENT_LOOP = [f"agent_loop/{what}/{stat}" for what in ("generate_sequences", "tool_calls", "num_preempted",
              "slowest/generate_sequences", "slowest/tool_calls", "slowest/prompt_length",
              "slowest/response_length") for stat in STATS]  # fmt: skip


@functools.lru_cache(maxsize=8)
def metric_names(count: int = 150) -> tuple[str, ...]:
    """`count` of verl's metric names, the ones our readers read first; past verl's own list, per-rank copies."""
    names = list(READ_BY_US)
    for family, items in FAMILIES:
        names += [f"{family}/{item}" if item else family for item in items]
    names += AGENT_LOOP
    rank = 0
    while len(names) < count:
        names.append(f"actor/perf/max_memory_allocated_gb/rank{rank}")
        rank += 1
    return tuple(names[:count])


def verl_record(step: int, count: int = 150) -> dict[str, Any]:
    """One step as verl's file logger writes it: {"step": k, "data": {name: number}}, with healthy values that
    move a little from step to step (the rules keep their baselines; nothing fires)."""
    wobble = (step % 7) * 0.001
    data: dict[str, Any] = {}
    for i, name in enumerate(metric_names(count)):
        data[name] = round(0.5 + i * 0.01 + wobble, 6)
    data["training/global_step"] = step
    data["timing_s/step"] = round(2.3 + wobble, 6)
    data["perf/throughput"] = round(61.9 - wobble, 6)
    data["critic/rewards/mean"] = round(0.07 + wobble, 6)
    data["actor/perf/max_memory_allocated_gb"] = 0.59
    data["actor/perf/cpu_memory_used_gb"] = 4.2
    return {"step": step, "data": data}


def write_metrics(path: Path, lines: int, count: int) -> int:
    """metrics.jsonl of `lines` steps of `count` metrics each; its size in bytes."""
    with path.open("w", encoding="utf-8") as fh:
        for k in range(1, lines + 1):
            fh.write(json.dumps(verl_record(k, count)) + "\n")
    return path.stat().st_size


TQDM = "".join(f"\rLoading safetensors checkpoint shards: {k:3d}% Completed | {k // 10}/10" for k in range(0, 101, 10))
LOG_LINES = [
    "(TaskRunner pid=4121) INFO 12-02 10:00:01 [ray_trainer.py:1012] step:{k} - timing_s/step:2.31 perf/throughput:62",
    "(WorkerDict pid=4388) INFO 12-02 10:00:01 [fsdp_workers.py:612] Actor use_remove_padding=True",
    TQDM,
    "(vLLMHttpServer pid=4501) INFO 12-02 10:00:02 [loggers.py:123] Avg prompt throughput: 85.1 tokens/s",
]
LOG_END = (
    "Traceback (most recent call last):\n"
    '  File "verl/workers/fsdp_workers.py", line 870, in update_actor\n'
    "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB\n"
)


def write_train_log(path: Path, size: int) -> int:
    """A train.log of about `size` bytes as verl writes one, ending in an out-of-memory traceback."""
    block = "".join(line.replace("{k}", str(k)) + "\n" for k in range(200) for line in LOG_LINES).encode()
    with path.open("wb") as fh:
        written = 0
        while written < size:
            written += fh.write(block)
        fh.write(LOG_END.encode())
    return path.stat().st_size


@dataclass(frozen=True)
class Usage:
    """What one child process used: wall seconds, CPU seconds (user + system) and peak RSS in MiB."""

    wall_s: float
    cpu_s: float
    rss_mib: float
    rc: int
    out: str


def measure(argv: list[str], timeout: float = 3600) -> Usage:
    """Run `argv` in a child and take its own rusage (os.wait4: this child only, not the others)."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        wall = time.monotonic() - t0
        out.seek(0)
        text = out.read()[-4000:].decode(errors="replace")
    return Usage(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode, text)


PY = sys.executable
CLI = "import sys; from verl_recipe.cli import main; sys.exit(main(sys.argv[1:]))"
COUNT_LINES = (
    "import sys\nn = 0\nwith open(sys.argv[1], 'rb') as f:\n"
    "    for chunk in iter(lambda: f.read(1 << 20), b''):\n        n += chunk.count(b'\\n')\nprint(n)"
)
LOAD_EVERY_LINE = (
    "import json, sys\nn = 0\nwith open(sys.argv[1], 'rb') as f:\n"
    "    for line in f:\n        json.loads(line)\n        n += 1\nprint(n)"
)
# The watch as the launcher runs it (run/launcher.py RunSupervisor.on_step and tick): each metric line read by the
# tail, then the progress line, the health rules and the stall timer, each guarded as the launcher guards them.
WATCH = """
import json, sys, time
from pathlib import Path
from verl_recipe.watch.health import Health, Thresholds
from verl_recipe.watch.metricstream import Faults, MetricTail, Progress
path, lines = Path(sys.argv[1]), int(sys.argv[2])
faults = Faults()
progress = Progress(lines + 100)
values = {"HEALTH_MEM_GROWTH_GB": 1.0, "HEALTH_MEM_WINDOW": 5, "HEALTH_STEP_TIME_RATIO": 1.5,
          "HEALTH_STALL_FACTOR": 5.0, "HEALTH_REWARD_DROP": 0.5, "HEALTH_HOST_MEM_FRACTION": 0.9, "HEALTH_STOP": []}
try:
    thresholds = Thresholds.from_values(values)
except KeyError:  # thresholds added since: their defaults
    from verl_recipe.recipes import load_recipe
    thresholds = Thresholds.from_values({**load_recipe("qwen3.5-397b").settings, **values})
health = Health(thresholds, host_total_gb=1024.0, total_steps=lines + 100, describe_cluster=lambda: "-")
shown = []
def on_step(rec):
    where = f"step {rec['step']}"
    line = faults.guard("the progress line", where, progress.line, rec)
    if line is not None:
        shown.append(len(line))
    faults.guard("the health rules", where, health.on_record, rec)
tail = MetricTail(path, on_step, faults=faults)
start = time.process_time()
tail.poll()
for _ in range(lines):
    faults.guard("the stall rule", "tick", health.tick)
cpu = time.process_time() - start
print(json.dumps({"cpu_s": cpu, "lines": tail.lines, "shown": len(shown), "faults": faults.count,
                  "alerts": len(health.alerts)}))
"""


def watch_share_pct(cpu_s: float, lines: int, step_s: float) -> float | None:
    """The watch's CPU time per metric line as a percentage of one step's time (None without a line or a step)."""
    if lines <= 0 or step_s <= 0:
        return None
    return round(cpu_s / lines / step_s * 100, 4)


def last_json(output: str) -> dict[str, Any]:
    """The last line of a child's output that is a JSON object (what the watch child prints)."""
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            doc = json.loads(line)
            if isinstance(doc, dict):
                return doc
    raise ValueError(f"no JSON line in the output: {output[-300:]!r}")


def pair_figures(
    what: str,
    ours: Usage,
    plain: Usage,
    plain_name: str,
    ideal: str,
    rss_limit: str,
    method: str,
    run_id: str,
    startup_s: float | None = None,
) -> list[Figure]:
    """A command against its plain read: the time ratio and the command's peak RSS (the plain read's beside it)."""
    for name, usage in ((what, ours), (plain_name, plain)):
        if usage.rc != 0:
            raise RuntimeError(f"{name}: exit {usage.rc}: {usage.out[-500:]}")
    detail = {
        "wall_s": round(ours.wall_s, 3),
        "plain_wall_s": round(plain.wall_s, 3),
        "cpu_s": round(ours.cpu_s, 3),
        "plain_cpu_s": round(plain.cpu_s, 3),
        "rss_mib": round(ours.rss_mib, 1),
        "plain_rss_mib": round(plain.rss_mib, 1),
    }
    if startup_s is not None:  # what a small file's ratio is mostly made of: the interpreter and our imports
        detail["cli_startup_s"] = round(startup_s, 3)
    return [
        Figure(SECTION, f"{what}: time / {plain_name}", ratio(ours.wall_s, plain.wall_s), ideal, method, run_id,
               detail),
        Figure(SECTION, f"{what}: peak RSS, MiB", round(ours.rss_mib, 1),
               f"{rss_limit} (the plain read: {plain.rss_mib:.0f})", method, run_id),
    ]  # fmt: skip


def watch_figure(child: dict[str, Any], step_s: float, count: int, run_id: str) -> Figure:
    lines = int(child.get("lines", 0))
    if child.get("faults") or int(child.get("shown", 0)) != lines:
        raise RuntimeError(f"the watch failed on some lines: {child}")
    method = (
        f"{lines} metric lines of {count} metrics each (verl 0.8.0's names) read by MetricTail, each through the "
        "progress line and the health rules, and one stall-timer tick per line, in a child process; its CPU time "
        f"(time.process_time) per line over the step time {step_s:g} s (the simulated cluster's CPU stand-ins; "
        "an A3 step of the 397B recipe takes minutes, so its share is smaller there)"
    )
    share = watch_share_pct(float(child["cpu_s"]), lines, step_s)
    return Figure(SECTION, f"live watch: CPU per metric line, % of a {step_s:g} s step", share,
                  f"< {WATCH_TARGET_PCT:g} %", method, run_id,
                  {"cpu_s": round(float(child["cpu_s"]), 4), "lines": lines, "step_s": step_s})  # fmt: skip


def readers_section(
    run_id: str,
    log_mb: float = LOG_MB,
    metric_lines: int = METRIC_LINES,
    step_s: float = STEP_S,
    metric_count: int = 12,
    work: Path | None = None,
) -> list[Figure]:
    """The section's figures. `metric_count`: metrics per line of the million-line stream (12: those compare and
    the page read and a few more; the watch's own figure uses ~150 per line, as verl logs)."""
    with tempfile.TemporaryDirectory(prefix="bench-readers-", dir=work) as tmp:
        root = Path(tmp)
        figures: list[Figure] = []
        startup = measure([PY, "-c", "import verl_recipe.cli"]).wall_s

        run = root / "logrun"
        run.mkdir()
        (run / "settings.json").write_text(json.dumps({"recipe": "qwen3.5-397b", "settings": {}}) + "\n")
        size = write_train_log(run / "train.log", int(log_mb * 2**20))
        ours = measure([PY, "-c", CLI, "diagnose", str(run)])
        plain = measure([PY, "-c", COUNT_LINES, str(run / "train.log")])
        figures += pair_figures(
            f"diagnose, {size / 2**20:.0f} MB train.log", ours, plain, "a full line count",
            "< 10 (it counts the file's lines too, then searches its last 8 MB for every signature)",
            "< 512 (8 MB read per log, 128 MB in all)",
            f"`verl-recipe diagnose RUN` on a run folder whose train.log is {size} bytes (verl-like INFO lines, tqdm "
            "bars with carriage returns, an NPU out-of-memory traceback at the end) vs reading the file in 1 MiB "
            "pieces counting newlines, each in its own child process (os.wait4's rusage)",
            run_id, startup,
        )  # fmt: skip

        big = root / "streamrun"
        big.mkdir()
        (big / "settings.json").write_text(json.dumps({"recipe": "qwen3.5-397b", "settings": {}}) + "\n")
        stream_size = write_metrics(big / "metrics.jsonl", metric_lines, metric_count)
        small = root / "baselinerun"
        small.mkdir()
        write_metrics(small / "metrics.jsonl", 20, metric_count)
        saved = root / "baseline.json"
        done = measure([PY, "-c", CLI, "compare", str(small), "--save-baseline", str(saved)])
        if done.rc != 0:
            raise RuntimeError(f"compare --save-baseline: exit {done.rc}: {done.out[-500:]}")
        plain = measure([PY, "-c", LOAD_EVERY_LINE, str(big / "metrics.jsonl")])
        how = (
            f"a metrics.jsonl of {metric_lines} lines ({stream_size} bytes, {metric_count} of verl's metrics per "
            "line) vs json.loads of every line of it, each in its own child process (os.wait4's rusage)"
        )
        ours = measure([PY, "-c", CLI, "compare", str(big), "--baseline", str(saved)])
        figures += pair_figures(
            f"compare, {metric_lines} metric lines", ours, plain, "json.loads of every line",
            "<= 3 (each line parsed once, as json.loads does, with the huge-integer guard)",
            "< 512 (the window's steps and at most 100,000 others kept)",
            f"`verl-recipe compare RUN --baseline FILE` on {how}", run_id, startup,
        )  # fmt: skip
        ours = measure([PY, "-c", CLI, "report", str(big)])
        figures += pair_figures(
            f"report, {metric_lines} metric lines", ours, plain, "json.loads of every line",
            "< 1 above 64 MB (only the stream's last 64 MB are read)", "< 512 (64 MB read, 100,000 steps drawn)",
            f"`verl-recipe report RUN` on {how}", run_id, startup,
        )  # fmt: skip

        count = 150
        stream = root / "watch.jsonl"
        write_metrics(stream, WATCH_LINES, count)
        child = measure([PY, "-c", WATCH, str(stream), str(WATCH_LINES)])
        if child.rc != 0:
            raise RuntimeError(f"watch: exit {child.rc}: {child.out[-500:]}")
        figures.append(watch_figure(last_json(child.out), step_s, count, run_id))
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.readers", description=__doc__.split("\n\n")[0])
    ap.add_argument("--log-mb", type=float, default=LOG_MB)
    ap.add_argument("--metric-lines", type=int, default=METRIC_LINES)
    ap.add_argument("--step-s", type=float, default=STEP_S)
    a = ap.parse_args(argv)
    figures = readers_section(time.strftime("%Y%m%dT%H%M%S"), a.log_mb, a.metric_lines, a.step_s)
    print(table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
