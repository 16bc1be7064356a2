"""`verl-recipe diagnose RUN_DIR | LOG...`: known failure signatures in a run's logs, each as cause, fix and prevention.

A run folder is read whole: train.log first, then the other logs beside it, the hosts' node logs under nodes/ (the
run record's symlink to LOG_DIR/nodes), then every other log below it (CANN plogs, Ray session logs, an extracted
log bundle). Plain files are read as given. Only the last MAX_TAIL_BYTES of each file are read, at most MAX_FILES
files and MAX_TOTAL_BYTES in all, and bytes that are not UTF-8 are replaced, so a diagnosis is bounded in time and
never fails on a damaged log.

The signatures are data (signatures.py), listed causes before symptoms; each is reported once, at its first
occurrence (in the order above), with file:line. With no known signature, the last error block (the last Python
traceback, else the last lines naming an error) is printed with the list of logs read.

Output: one block per finding, then a last line with the first finding. `--json` prints the diagnosis.json contract:
{"findings": [{"id", "title", "cause", "fix", "prevent", "file", "line", "excerpt"}],
 "unknown": null | {"last_error_block", "logs"}}.

Exit codes: 0 when the logs were read, whether or not anything was found (the diagnosis is the output); 2 on bad
input (a path that does not exist, or no readable log under the paths given).

`write_diagnosis(run_dir)` is the launcher's entry: it writes run_dir/diagnosis.json and returns the first finding.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..contracts import runfiles
from ..exitcodes import EXIT_BAD_INPUT, EXIT_OK
from ..problems import error
from .signatures import SIGNATURES, Signature

MAX_TAIL_BYTES = 8 * 2**20  # the end of a log is where a run's failure is
MAX_TOTAL_BYTES = 128 * 2**20
MAX_COUNT_BYTES = 512 * 2**20  # above this much skipped, lines are numbered from the start of the tail read
MAX_FILES = 400  # a Ray session folder can hold thousands of worker logs
MAX_DEPTH = 8
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
EXCERPT_CHARS = 400
BLOCK_LINES = 40
DIAGNOSIS_FILE = runfiles.DIAGNOSIS

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
TRACEBACK = "Traceback (most recent call last)"
# The line a traceback ends on: an exception name at the start (after a Ray "(Actor pid=N)" prefix).
EXCEPTION_LINE = re.compile(r"^(?:\(\S+ pid=\d+(?:, ip=[\d.]+)?\)\s*)?[A-Za-z_][\w.]*(?:Error|Exception|Exit)\b")
ERROR_WORDS = ("ERROR", "Error", "error:", "FATAL", "Killed", "Segmentation fault")

# Where in a GRPO step an out-of-memory happened, from the frames and log lines around it; the first that names a
# phase, nearest line first. `update` before `rollout`: verl's actor methods are called actor_rollout_update_actor.
PHASES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "checkpoint save",
        re.compile(r"save_checkpoint|save_dist_checkpointing"),
        "a save gathers state on the die: save less often (SAVE_FREQ) or shard the save wider",
    ),
    (
        "actor update",
        re.compile(r"update_actor|update_policy"),
        "lower PPO_MAX_TOKEN_LEN_PER_GPU or PPO_MICRO_BATCH_SIZE_PER_GPU, or spread the model wider (TP, PP, EP)",
    ),
    (
        "log-prob computation (actor or reference)",
        re.compile(r"compute_log_prob|compute_ref_log_prob"),
        "lower LOG_PROB_MICRO_BATCH_SIZE_PER_GPU or PPO_MAX_TOKEN_LEN_PER_GPU",
    ),
    (
        "model loading",
        re.compile(r"load_model|Loading checkpoint shards|load_state_dict|from_pretrained"),
        "the weights alone do not fit: spread the model over more dies (TP, PP, EP) or more nodes",
    ),
    (
        "rollout (vLLM)",
        re.compile(r"vllm|EngineCore|generate_sequences|NPURayWorkerWrapper|rollout", re.IGNORECASE),
        "lower GEN_MEM_UTIL (vLLM's share of the die) or raise GEN_TP",
    ),
)
PHASE_WINDOW = 40
GDN = re.compile(r"gdn|gated_delta|GatedDeltaNet|chunk_gated|fused_recurrent|causal_conv1d|\bfla[._/]", re.IGNORECASE)
CKPT_WORDS = re.compile(r"checkpoint|save_|ckpt", re.IGNORECASE)
DEVICES = re.compile(r"Total available GPUs ([\d.]+) is less than total desired GPUs (\d+)")


@dataclass(frozen=True)
class Finding:
    id: str
    title: str
    cause: str
    fix: str
    prevent: str
    file: str
    line: int
    excerpt: str

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "cause": self.cause,
            "fix": self.fix,
            "prevent": self.prevent,
            "file": self.file,
            "line": self.line,
            "excerpt": self.excerpt,
        }

    def block(self) -> str:
        return (
            f"{self.file}:{self.line}: {self.title} [{self.id}]\n"
            f"  | {self.excerpt}\n"
            f"  cause: {self.cause}\n"
            f"  fix: {self.fix}\n"
            f"  prevents it next time: {self.prevent}"
        )

    def one_line(self) -> str:
        """The launcher's last line for a failed run."""
        return f"diagnosis: {self.title} ({self.file}:{self.line}); fix: {self.fix}"


@dataclass(frozen=True)
class Unknown:
    block: str | None
    file: str | None
    line: int | None
    logs: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"last_error_block": self.block, "logs": list(self.logs)}


@dataclass(frozen=True)
class Diagnosis:
    findings: tuple[Finding, ...]
    unknown: Unknown | None
    logs: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "findings": [f.to_json() for f in self.findings],
            "unknown": self.unknown.to_json() if self.unknown else None,
        }


@dataclass(frozen=True)
class LogText:
    name: str  # as shown: relative to the run folder, or the path given
    lines: tuple[str, ...]
    first_line: int  # the number of lines[0] in the whole file (the tail may start deep in it)


def _candidates(root: Path) -> Iterator[Path]:
    """Log files under a folder, in reading order: train.log, the other top-level logs, nodes/, the rest."""
    top = root / runfiles.LOG
    if top.is_file():
        yield top
    yield from sorted(p for p in root.iterdir() if p.is_file() and p.suffix in LOG_SUFFIXES)
    nodes = root / runfiles.NODES  # the run record's symlink to LOG_DIR/nodes: os.walk below does not follow links
    if nodes.is_dir():
        yield from sorted(p for p in nodes.iterdir() if p.is_file() and p.suffix in LOG_SUFFIXES)
    base_depth = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames.sort()
        if len(here.parts) - base_depth >= MAX_DEPTH:
            dirnames.clear()
        for name in sorted(filenames):
            if name.endswith(LOG_SUFFIXES):
                yield here / name


def log_files(paths: Sequence[Path], base: Path | None = None) -> list[tuple[Path, str]]:
    """(file, name shown) for every log to read, each once, at most MAX_FILES."""
    out: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for given in paths:
        try:
            for path in _candidates(given) if given.is_dir() else iter([given]):
                # Only regular files (a symlink to one too): a fifo would block the read for ever, and a symlink
                # loop makes resolve() raise RuntimeError (Python 3.11).
                try:
                    if not path.is_file():
                        continue
                    real = path.resolve()
                except (OSError, RuntimeError):
                    continue
                if real in seen:
                    continue
                seen.add(real)
                name = str(path.relative_to(base)) if base is not None and path.is_relative_to(base) else str(path)
                out.append((path, name))
                if len(out) >= MAX_FILES:
                    return out
        except OSError:
            continue  # a folder that cannot be listed: what was found before it still counts
    return out


def read_tail(path: Path, cap: int = MAX_TAIL_BYTES) -> tuple[tuple[str, ...], int | None]:
    """The file's last `cap` bytes as lines, and the number in the whole file of the first one.

    The number is None when the part skipped is too large to count lines in within the time bound.
    """
    with path.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        start = max(0, size - cap)
        skipped: int | None = 0
        cut = False
        if start:
            fh.seek(start - 1)
            cut = fh.read(1) != b"\n"  # the tail starts inside a line: that partial line is dropped
            if start <= MAX_COUNT_BYTES:
                fh.seek(0)
                left, counted = start, 0
                while left:  # bytes.count is fast enough for file:line to point into the real file
                    chunk = fh.read(min(left, 2**22))
                    if not chunk:
                        break
                    counted += chunk.count(b"\n")
                    left -= len(chunk)
                skipped = counted
            else:
                skipped = None
        fh.seek(start)
        data = fh.read(cap)
    lines = data.decode("utf-8", errors="replace").splitlines()
    if cut and lines:
        lines = lines[1:]
    first = None if skipped is None else skipped + 1 + int(cut)
    return tuple(ANSI.sub("", line) for line in lines), first


def read_logs(files: Sequence[tuple[Path, str]]) -> list[LogText]:
    out: list[LogText] = []
    budget = MAX_TOTAL_BYTES
    for path, name in files:
        if budget <= 0:
            break
        try:
            lines, first = read_tail(path, min(MAX_TAIL_BYTES, budget))
            budget -= min(path.stat().st_size, MAX_TAIL_BYTES)
        except OSError:
            continue  # a log that vanished or cannot be read: the others still count
        if first is None:
            out.append(LogText(f"{name} (tail)", lines, 1))
        else:
            out.append(LogText(name, lines, first))
    return out


def _phase(lines: Sequence[str], i: int) -> tuple[str, str] | None:
    """(phase, fix) of an out-of-memory at lines[i]: the nearest line around it that names a phase."""
    for d in range(PHASE_WINDOW + 1):
        for j in (i - d, i + d) if d else (i,):
            if 0 <= j < len(lines):
                for phase, rx, fix in PHASES:
                    if rx.search(lines[j]):
                        return phase, fix
    return None


def _window(lines: Sequence[str], i: int, before: int = 30, after: int = 10) -> str:
    return "\n".join(lines[max(0, i - before) : i + after + 1])


def _finding(sig: Signature, log: LogText, i: int) -> Finding:
    line = log.lines[i]
    cause, fix = sig.cause, sig.fix
    if sig.id == "npu-oom":
        phase = _phase(log.lines, i)
        if phase:
            cause = f"{cause}, in the {phase[0]}"
            fix = f"{phase[1]}; memory that grows step by step is the sleep/wake leak: restart from the last checkpoint"
    elif sig.id == "ray-too-few-devices":
        m = DEVICES.search(line)
        if m and float(m.group(1)) == 0:
            cause = (
                f"Ray offered no NPU at all ({m.group(2)} wanted): the Ray nodes registered no NPU resource, or "
                "verl asked for GPUs (trainer.device is not npu)"
            )
    elif sig.id == "triton-compile" and GDN.search(_window(log.lines, i)):
        cause = f"{cause}; here a Gated DeltaNet (FLA) kernel"
    elif sig.id == "disk-full" and CKPT_WORDS.search(_window(log.lines, i)):
        cause = f"{cause}; here during a checkpoint save"
    excerpt = line.strip()
    if len(excerpt) > EXCERPT_CHARS:
        excerpt = excerpt[: EXCERPT_CHARS - 3] + "..."
    return Finding(sig.id, sig.title, cause, fix, sig.prevent, log.name, log.first_line + i, excerpt)


def _first_line_of(sig: Signature, low: str, lines: Sequence[str]) -> int | None:
    """Index of the first line that matches `sig`: its needles found in the lower-cased text, then the regex."""
    best: int | None = None
    for needle in sig.needles:
        pos = low.find(needle)
        while pos != -1:
            i = low.count("\n", 0, pos)
            if best is not None and i >= best:
                break
            if sig.regex.search(lines[i]):
                best = i
                break
            nxt = low.find("\n", pos)
            pos = -1 if nxt == -1 else low.find(needle, nxt + 1)
    return best


def find_signatures(logs: Sequence[LogText]) -> list[Finding]:
    """Each signature's first occurrence, in the logs' order; returned in the table's order (causes first)."""
    first: dict[str, Finding] = {}
    for log in logs:
        # Lower-cased line by line: str.lower() of a whole text may change its length, so offsets would drift.
        low = "\n".join(line.lower() for line in log.lines)
        for sig in SIGNATURES:
            if sig.id in first:
                continue
            i = _first_line_of(sig, low, log.lines)
            if i is not None:
                first[sig.id] = _finding(sig, log, i)
    return [first[s.id] for s in SIGNATURES if s.id in first]


def _last_index(lines: Sequence[str], needles: Sequence[str]) -> int | None:
    """Index of the last line holding one of `needles` (a substring search of the whole text, from the end)."""
    text = "\n".join(lines)
    pos = max(text.rfind(n) for n in needles)
    return None if pos == -1 else text.count("\n", 0, pos)


def _error_block(lines: Sequence[str]) -> tuple[int, str] | None:
    """(index, text) of the last error block: the last traceback to its exception line, else the last error line."""
    start = _last_index(lines, (TRACEBACK,))
    if start is not None:
        end = min(len(lines), start + BLOCK_LINES)
        for j in range(start + 1, end):
            if EXCEPTION_LINE.match(lines[j].strip()):
                end = min(end, j + 3)
                break
        return start, "\n".join(lines[start:end]).rstrip()
    at = _last_index(lines, ERROR_WORDS)
    if at is None:
        return None
    begin = max(0, at - 5)
    return begin, "\n".join(lines[begin : at + 4]).rstrip()


def last_error(logs: Sequence[LogText]) -> Unknown:
    names = tuple(log.name for log in logs)
    for log in logs:  # train.log first: verl's own output has the failure of the whole run
        found = _error_block(log.lines)
        if found:
            i, text = found
            return Unknown(text, log.name, log.first_line + i, names)
    return Unknown(None, None, None, names)


def diagnose(paths: Sequence[Path], base: Path | None = None) -> Diagnosis:
    logs = read_logs(log_files(paths, base))
    findings = tuple(find_signatures(logs))
    names = tuple(log.name for log in logs)
    return Diagnosis(findings, None if findings else last_error(logs), names)


def write_diagnosis(run_dir: Path) -> Finding | None:
    """Diagnose a run folder, write run_dir/diagnosis.json (atomically) and return the first finding, if any.

    Unreadable logs are skipped, never raised; OSError only when diagnosis.json cannot be written.
    """
    result = diagnose([run_dir], base=run_dir)
    dest = run_dir / DIAGNOSIS_FILE
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(dest)
    return result.findings[0] if result.findings else None


def render_text(result: Diagnosis) -> str:
    if result.findings:
        blocks = "\n\n".join(f.block() for f in result.findings)
        return f"{blocks}\n\n{len(result.findings)} finding(s); first: {result.findings[0].one_line()}\n"
    unknown = result.unknown
    logs = ", ".join(result.logs) if result.logs else "none"
    if unknown is None or unknown.block is None:
        return f"no known failure signature and no error line found; logs read: {logs}\n"
    return (
        f"no known failure signature; the last error block ({unknown.file}:{unknown.line}):\n"
        f"{unknown.block}\n"
        f"logs read: {logs}\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="verl-recipe diagnose",
        description="Known failure signatures in a run's logs (a run folder, or log files), each with its cause, "
        "fix and what prevents it next time.",
    )
    parser.add_argument("paths", nargs="+", metavar="RUN_DIR|LOG", help="a run folder, or log files")
    parser.add_argument("--json", action="store_true", help="print the diagnosis.json document")
    ns = parser.parse_args(argv)
    paths = [Path(p) for p in ns.paths]
    for raw, path in zip(ns.paths, paths, strict=True):
        if not raw or not path.exists():  # Path("") would be the current folder
            error(
                f"diagnose: {raw or repr(raw)} does not exist; fix: give a run folder "
                "(LOG_DIR/<project>/<experiment>/runs/<stamp>) or log files"
            )
            return EXIT_BAD_INPUT
    result = diagnose(paths)
    if not result.logs:
        shown = " ".join(ns.paths)
        error(f"diagnose: no readable log under {shown}; fix: give a run folder (it holds train.log) or log files")
        return EXIT_BAD_INPUT
    if ns.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        sys.stdout.write(render_text(result))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
