"""`verl-recipe diagnose RUN_DIR | LOG...`: known failure signatures in a run's logs, each as cause, fix and prevention.

A run folder is read whole: train.log first, then the other logs beside it, the hosts' node logs under nodes/ (the
run record's symlink to LOG_DIR/nodes), then every other log below it (CANN plogs, Ray session logs, an extracted
log bundle). Plain files are read as given. Only the last MAX_TAIL_BYTES of each file are read, at most MAX_FILES
files and MAX_TOTAL_BYTES in all, and bytes that are not UTF-8 are replaced, so a diagnosis is bounded in time and
never fails on a damaged log.

The signatures are data (signatures.py), listed causes before symptoms; each is reported once, at its first
occurrence (in the order above), with file:line, its family and the host and rank of its line. A failure no signature
knows is put in its family by a general rule (families.py), at medium or low confidence, and the last error block (the
last Python traceback, else the last line naming an error that is not benign noise) is printed with it. Every error
line of every log is also an event (events.py) ordered across hosts (firstfailure.py): the first failure and the first
error of every other host and rank, its consequences.

Output: one block per finding, the first failure and its consequences, then a last line with the first failure's
finding. `--json` prints the diagnosis.json contract (docs/diagnose.md):
{"findings": [{"id", "title", "cause", "fix", "prevent", "file", "line", "excerpt", "family", "confidence", "basis",
 "host", "rank", "evidence"}], "unknown": null | {"last_error_block", "logs"}, "first_failure": null | {...},
 "consequences": [...]}.

Exit codes: 0 when the logs were read, whether or not anything was found (the diagnosis is the output); 2 on bad
input (a path that does not exist, or no readable log under the paths given).

`write_diagnosis(run_dir)` is the launcher's entry: it writes run_dir/diagnosis.json and returns the first finding.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..contracts import runfiles
from ..exitcodes import EXIT_BAD_INPUT, EXIT_OK
from ..problems import error
from . import families as fam
from .events import all_events
from .firstfailure import Event, Hosts, hosts_of, node_of, order, year_of
from .logs import LogText, log_files, node_log_windows, read_logs
from .signatures import BY_ID, SIGNATURES, Signature

EXCERPT_CHARS = 400
BLOCK_LINES = 40
MAX_SHOWN_CONSEQUENCES = 8  # in the text output; diagnosis.json holds up to firstfailure.MAX_CONSEQUENCES
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
KV_CACHE = re.compile(r"kv_cache|KV cache", re.IGNORECASE)
KV_NOTE = (
    "a hybrid model's cache (Qwen3.5's Gated DeltaNet and attention layers) can take more than its share: "
    "vllm-project/vllm-ascend#3368, #6611; lower GEN_MEM_UTIL"
)
EVIDENCE_LINES = 6
# Lines around a Ray death reason that say which worker died: its address, pid and actor name.
DEATH_DETAIL = re.compile(r"^\s*(?:ip|pid|name|class_name):|Worker (?:IP address|PID|exit type)|\bIP: ")


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
    family: str = ""  # families.py
    confidence: str = fam.HIGH  # high: a known signature; medium or low: a general rule (`basis` says which)
    host: str | None = None
    rank: str | None = None
    evidence: tuple[str, ...] = ()  # "file:line: text" of the lines it rests on
    basis: str = ""

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
            "family": self.family,
            "confidence": self.confidence,
            "basis": self.basis or "a known signature",
            "host": self.host,
            "rank": self.rank,
            "evidence": list(self.evidence),
        }

    def _where(self) -> str:
        if self.host is None:
            return ""
        return f" on {self.host}" + (f" rank {self.rank}" if self.rank is not None else "")

    def block(self) -> str:
        family = fam.BY_FAMILY.get(self.family)
        how = "a known signature" if self.confidence == fam.HIGH else f"general rule: {self.basis}"
        out = (
            f"{self.file}:{self.line}: {self.title}{self._where()} [{self.id}]\n"
            f"  | {self.excerpt}\n"
            f"  family: {family.title if family else self.family}; confidence: {self.confidence} ({how})\n"
            f"  cause: {self.cause}\n"
            f"  fix: {self.fix}\n"
            f"  prevents it next time: {self.prevent}"
        )
        extra = [e for e in self.evidence if not e.endswith(self.excerpt)]
        if extra:
            out += "\n  evidence:\n" + "\n".join(f"    {e}" for e in extra)
        return out

    def one_line(self) -> str:
        """The launcher's last line for a failed run."""
        sure = "" if self.confidence == fam.HIGH else f", {self.confidence} confidence"
        return f"diagnosis: {self.title}{self._where()} ({self.file}:{self.line}{sure}); fix: {self.fix}"


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
    first_failure: Event | None = None  # firstfailure.py: the host and rank that failed first
    consequences: tuple[Event, ...] = ()  # the first error of every other host and rank, in time order
    why_first: str = ""

    def to_json(self) -> dict[str, Any]:
        first = None
        if self.first_failure is not None:
            first = {**self.first_failure.to_json(), "why": self.why_first}
        return {
            "findings": [f.to_json() for f in self.findings],
            "unknown": self.unknown.to_json() if self.unknown else None,
            "first_failure": first,
            "consequences": [e.to_json() for e in self.consequences],
        }


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
    if sig.id == "npu-oom" and KV_CACHE.search(_window(log.lines, i, 10, 2)):
        cause = f"{cause}; here allocating the KV cache ({KV_NOTE})"
    excerpt = line.strip()
    if len(excerpt) > EXCERPT_CHARS:
        excerpt = excerpt[: EXCERPT_CHARS - 3] + "..."
    return Finding(sig.id, sig.title, cause, fix, sig.prevent, log.name, log.first_line + i, excerpt, family=sig.family)


def _first_line_of(sig: Signature, low: str, lines: Sequence[str]) -> int | None:
    """Index of the first line that matches `sig`: its needles found in the lower-cased text, then the regex."""
    best: int | None = None
    for needle in sig.needles:
        pos = low.find(needle)
        i, counted_to = 0, 0
        while pos != -1:
            # Counted on from the last hit, not from 0: a needle on every line of 8 MB was quadratic (a hang).
            i += low.count("\n", counted_to, pos)
            counted_to = pos
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


def _last_error_line(lines: Sequence[str]) -> int | None:
    """Index of the last line naming an error that is not benign noise (families.NOISE: mstx, INFO, warnings)."""
    text = "\n".join(lines)
    end = len(text)
    while end > 0:
        pos = max(text.rfind(n, 0, end) for n in ERROR_WORDS)
        if pos == -1:
            return None
        i = text.count("\n", 0, pos)
        if not fam.is_noise(lines[i]):
            return i
        end = text.rfind("\n", 0, pos) if i else 0  # go on above this line
    return None


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
    at = _last_error_line(lines)
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


def _evidence(log: LogText, i: int, event: Event | None) -> tuple[str, ...]:
    """The line itself and, for a Ray death reason, the lines nearby that name the dead worker."""
    out = [f"{log.name}:{log.first_line + i}: {log.lines[i].strip()[:EXCERPT_CHARS]}"]
    if event is not None and event.family in ("ray-lost", "host-memory"):
        for j in range(max(0, i - 8), min(len(log.lines), i + 12)):
            if j != i and DEATH_DETAIL.search(log.lines[j]) and len(out) < EVIDENCE_LINES:
                out.append(f"{log.name}:{log.first_line + j}: {log.lines[j].strip()[:EXCERPT_CHARS]}")
    return tuple(out)


def _general_finding(e: Event) -> Finding:
    family = fam.BY_FAMILY[e.family]
    return Finding(
        e.id, e.title, e.cause, e.fix or family.fix, family.prevent, e.file, e.line, e.excerpt,
        family=e.family, confidence=e.confidence, host=e.host, rank=e.rank, basis=e.basis,
    )  # fmt: skip


def _with_place(f: Finding, events: dict[tuple[str, int], Event], logs: dict[str, LogText]) -> Finding:
    """A finding with the host and rank of its own line, and its evidence lines."""
    e = events.get((f.file, f.line))
    log = logs.get(f.file)
    evidence = _evidence(log, f.line - log.first_line, e) if log is not None else (f"{f.file}:{f.line}: {f.excerpt}",)
    host = e.host if e is not None else f.host
    rank = e.rank if e is not None else f.rank
    return Finding(**{**f.__dict__, "host": host, "rank": rank, "evidence": evidence})


def _run_dirs(paths: Sequence[Path]) -> list[Path]:
    return [p for p in paths if p.is_dir()]


def diagnose(paths: Sequence[Path], base: Path | None = None) -> Diagnosis:
    logs = read_logs(log_files(paths, base), node_log_windows(_run_dirs(paths)))
    names = tuple(log.name for log in logs)
    node_logs = {h: log.lines for log in logs if (h := node_of(log.name)) is not None and log.name.endswith(".log")}
    hosts = hosts_of(_run_dirs(paths), node_logs) if logs else Hosts({})
    events = all_events(logs, hosts, year_of(log.lines for log in logs))
    ordering = order(events)
    by_place = {(e.file, e.line): e for e in events}
    by_name = {log.name: log for log in logs}
    found = [_with_place(f, by_place, by_name) for f in find_signatures(logs)]
    first = ordering.first
    if first is not None and first.id not in BY_ID and not any(f.id == first.id for f in found):
        # No signature explains the first failure: its general rule does, ahead of the signatures' symptoms.
        found.insert(0, _with_place(_general_finding(first), by_place, by_name))
    if not found:
        seen: set[str] = set()
        for e in sorted(events, key=lambda e: (e.symptom, e.order, e.seq)):
            if e.id not in seen:
                seen.add(e.id)
                found.append(_with_place(_general_finding(e), by_place, by_name))
    if first is not None:  # the first failure's finding first: the launcher's last line and the restart policy
        found.sort(key=lambda f: f.id != first.id)
    signature_found = any(f.confidence == fam.HIGH for f in found)
    unknown = None if signature_found else last_error(logs)
    return Diagnosis(tuple(found), unknown, names, first, ordering.consequences, ordering.why)


def write_diagnosis(run_dir: Path) -> Finding | None:
    """Diagnose a run folder, write run_dir/diagnosis.json (atomically) and return the first finding, if any.

    Unreadable logs are skipped, never raised; OSError only when diagnosis.json cannot be written.
    """
    result = diagnose([run_dir], base=run_dir)
    dest = run_dir / DIAGNOSIS_FILE
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(dest)
    return result.findings[0] if result.findings else None  # the first failure's finding comes first


def _ordering_text(result: Diagnosis) -> str:
    first = result.first_failure
    if first is None or (first.host is None and first.rank is None and not result.consequences):
        return ""  # one log of no known host: the findings above already say it all
    at = f" at {first.time.isoformat(sep=' ')}" if first.time else ""
    out = [f"first failure: {first.where()}{at}: {first.title} ({first.file}:{first.line}); {result.why_first}"]
    shown = result.consequences[:MAX_SHOWN_CONSEQUENCES]
    for e in shown:
        when = f" at {e.time.isoformat(sep=' ')}" if e.time else ""
        out.append(f"  then {e.where()}{when}: {e.title} ({e.file}:{e.line})")
    left = len(result.consequences) - len(shown)
    if left > 0:
        out.append(f"  ... and {left} more (diagnosis.json's consequences)")
    return "\n".join(out) + "\n"


def render_text(result: Diagnosis) -> str:
    if result.findings:
        blocks = "\n\n".join(f.block() for f in result.findings)
        tail = f"{len(result.findings)} finding(s); first: {result.findings[0].one_line()}\n"
        unknown = result.unknown
        if unknown is not None and unknown.block is not None:  # general rules only: the error itself helps too
            tail = f"the last error block ({unknown.file}:{unknown.line}):\n{unknown.block}\n{tail}"
        return f"{blocks}\n\n{_ordering_text(result)}{tail}"
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
    try:
        result = diagnose(paths)
    except Exception as exc:  # noqa: BLE001 - no log should get here (the fuzz tests look): one line all the same
        error(
            f"diagnose: {type(exc).__name__} while reading {' '.join(ns.paths)}; fix: none in the logs: this is a "
            "bug in verl-recipe, report it with the run folder"
        )
        return EXIT_BAD_INPUT
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
