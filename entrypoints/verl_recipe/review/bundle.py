"""`verl-recipe bundle RUN_DIR`: one .tar.gz of a run's evidence from every host, bounded, with its secrets redacted.

What goes in (docs/troubleshooting.md, "Evidence from every host"; the layout on shared storage is
cluster/evidence.py's):
    run/                    the run folder: train.log, settings.json, launch.json, outcome.json, diagnosis.json, ...
    hosts/<host>/node.log   the node's log (LOG_DIR/nodes/<host>.log) up to the run's end
    hosts/<host>/cann/      CANN's plogs and device logs written while the run went (by their time)
    hosts/<host>/...        the run's evidence from that host: npu-smi before and after, the job's Ray logs, the
                            kernel log's tail, doctor's report, the preflight report (`make logs` adds the last ones)
    experiment/rehearsals/  the experiment's rehearsal reports
    site/site.yaml          the site's launch settings, as the containers read them
    MANIFEST.txt            every file with its size, what was cut or left out and why, the redaction, what each host
                            lacks

Bounds: at most --max-mb of file content (before compression) and MAX_FILES files. When the files are bigger, the
biggest are cut from the front to one common size, keeping their tails, and the MANIFEST says so for each.

Secrets: every byte copied passes through review/redact.py (the Ray token, the site's secret files); a secret that
exists but cannot be read stops the bundle. Links: only the run record's own `nodes` link (to LOG_DIR/nodes) is
followed; every other symbolic link, and anything that is not a regular file (a pipe, a socket), is listed as left
out, never opened. A file that vanishes or shrinks while read is noted and the rest goes on.

Output: the archive's path on stdout (the last line); `--locate` prints the run's place instead, as JSON, for
ansible/logs.yml. Exit codes: 0 written; 2 bad input (not a run folder, unreadable secret, bad --max-mb).
"""

from __future__ import annotations

import argparse
import calendar
import io
import json
import os
import stat
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..cluster import evidence
from ..contracts import runfiles
from ..contracts.records import node_log_windows, part_of
from ..exitcodes import EXIT_BAD_INPUT, EXIT_OK
from ..problems import error
from .redact import RedactError, Redactor, load_secrets

DEFAULT_MAX_MB = 256
MAX_FILES = 20000
MAX_DEPTH = 12
READ_BLOCK = 1 << 20
PREFIX = "bundle-"
SUFFIX = ".tar.gz"
# CANN logs count as the run's when written from a minute before its start to ten minutes after its end.
BEFORE_START_S = 60.0
AFTER_END_S = 600.0
EXPECTED = (evidence.NPU_SMI_BEFORE, evidence.NPU_SMI_AFTER, "kernel-tail.txt", evidence.JOB_RAY_LOGS)


class BundleError(ValueError):
    """Bad input, as one line with the fix."""


@dataclass
class Item:
    arc: str  # path inside the archive, below its top folder
    path: Path
    size: int  # the bytes it brings: the file's size, or `until`
    until: int | None = None  # a node log: where the run's part ends (what the node wrote after is another run's)


@dataclass
class Plan:
    run_dir: Path
    log_dir: Path
    items: list[Item] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    older: int = 0  # CANN logs outside the run's time


# ---- finding the run


def _utc_epoch(text: Any) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes()[: 16 * 2**20])
    except (OSError, ValueError):
        return None


def run_folder(raw: str) -> tuple[Path, Path]:
    """The run folder (resolved) and its LOG_DIR, or BundleError. A run folder is LOG_DIR/<project>/<experiment>/
    runs/<stamp> holding launch.json or settings.json (run/record.py)."""
    path = Path(raw)
    fix = "give a run folder, LOG_DIR/<project>/<experiment>/runs/<stamp> (`verl-recipe runs` lists them)"
    if not raw or not path.is_dir():
        raise BundleError(f"bundle: {raw!r} is not a folder; fix: {fix}")
    real = path.resolve()
    if (
        len(real.parents) < 4
        or real.parent.name != "runs"
        or not any((real / n).is_file() and not (real / n).is_symlink() for n in (runfiles.LAUNCH, runfiles.SETTINGS))
    ):
        raise BundleError(
            f"bundle: {raw} is not a run folder (no launch.json or settings.json under runs/); fix: {fix}"
        )
    return real, real.parents[3]


def run_times(run_dir: Path) -> tuple[float, float | None]:
    """When the run started (settings.json) and ended (outcome.json), as epoch seconds."""
    settings = _json(run_dir / runfiles.SETTINGS)
    start = _utc_epoch(settings.get("started_utc")) if isinstance(settings, dict) else None
    if start is None:
        try:
            start = (run_dir / runfiles.LAUNCH).stat().st_mtime
        except OSError:
            start = 0.0
    outcome = _json(run_dir / runfiles.OUTCOME)
    end = _utc_epoch(outcome.get("ended_utc")) if isinstance(outcome, dict) else None
    return start, end


def secret_files_of(run_dir: Path) -> dict[str, str]:
    settings = _json(run_dir / runfiles.SETTINGS)
    named = settings.get("secret_files") if isinstance(settings, dict) else None
    if not isinstance(named, dict):
        return {}
    out = {}
    for name, entry in named.items():
        path = entry.get("path") if isinstance(entry, dict) else None
        if isinstance(path, str) and path:
            out[str(name)] = path
    return out


def locate(raw: str, log_dirs: Sequence[Path] = ()) -> dict[str, Any]:
    """The run's place for ansible/logs.yml: a run folder, or a run name as `verl-recipe runs` prints it."""
    if not Path(raw).is_dir() and raw:
        from ..run.lifecycle import default_log_dirs, resolve_run

        found = resolve_run(raw, list(log_dirs) or default_log_dirs())
        if found is None:
            raise BundleError(f"bundle: no run {raw!r}; fix: `verl-recipe runs` (make runs) lists them")
        raw = str(found)
    run_dir, log_dir = run_folder(raw)
    start, end = run_times(run_dir)
    return {
        "run_dir": str(run_dir),
        "log_dir": str(log_dir),
        "key": evidence.run_key(run_dir, log_dir),
        "started_epoch": int(start),
        "ended_epoch": int(end) if end is not None else None,
    }


# ---- what goes in


def _walk(root: Path, arc: str, plan: Plan, depth: int = 0, keep: Any = None) -> Iterator[Item]:
    """Regular files below `root`, never through a link; what is left out is noted in the plan."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        plan.skipped.append(f"{arc}/: cannot be listed ({exc.strerror})")
        return
    for e in entries:
        name = f"{arc}/{e.name}"
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            plan.skipped.append(f"{name}: vanished while listed")
            continue
        if stat.S_ISLNK(st.st_mode):
            plan.skipped.append(f"{name}: a symbolic link to {_target(e.path)}, not followed")
        elif stat.S_ISDIR(st.st_mode):
            if depth >= MAX_DEPTH:
                plan.skipped.append(f"{name}/: deeper than {MAX_DEPTH} folders")
            else:
                yield from _walk(Path(e.path), name, plan, depth + 1, keep)
        elif not stat.S_ISREG(st.st_mode):
            plan.skipped.append(f"{name}: not a regular file")
        elif keep is None or keep(st):
            yield Item(name, Path(e.path), st.st_size)
        else:
            plan.older += 1


def _target(path: str) -> str:
    try:
        return os.readlink(path)[:200]
    except OSError:
        return "?"


def _is_bundle(name: str) -> bool:
    return name.startswith(PREFIX) and (name.endswith(SUFFIX) or name.endswith(".tmp"))


def hosts_in(nodes: Path) -> list[str]:
    """The hosts that left anything in LOG_DIR/nodes: a node log or a folder."""
    names: set[str] = set()
    try:
        for e in os.scandir(nodes):
            if e.name.startswith("."):
                continue
            if e.name.endswith(".log") and e.is_file(follow_symlinks=False):
                names.add(e.name[: -len(".log")])
            elif e.is_dir(follow_symlinks=False):
                names.add(e.name)
    except OSError:
        pass
    return sorted(names)


def plan_bundle(run_dir: Path, log_dir: Path, environ: dict[str, str] | None = None) -> Plan:
    env = dict(os.environ) if environ is None else environ
    plan = Plan(run_dir, log_dir)
    # the run folder, less its nodes link (followed below, once) and earlier bundles
    for item in _walk(run_dir, "run", plan):
        rel = item.arc.split("/", 1)[1]
        if "/" not in rel and _is_bundle(rel):
            continue
        plan.items.append(item)
    plan.skipped = [s for s in plan.skipped if not s.startswith(f"run/{runfiles.NODES}: ")]
    nodes_link = run_dir / runfiles.NODES
    nodes = log_dir / evidence.NODES
    if nodes_link.is_symlink() and os.path.realpath(nodes_link) == os.path.realpath(nodes) and not nodes.is_symlink():
        key = evidence.run_key(run_dir, log_dir)
        start, end = run_times(run_dir)
        lo, hi = start - BEFORE_START_S, (end + AFTER_END_S) if end is not None else None

        def in_run(st: os.stat_result) -> bool:
            return st.st_mtime >= lo and (hi is None or st.st_mtime <= hi)

        plan.hosts = hosts_in(nodes)
        windows = node_log_windows(run_dir)
        for host in plan.hosts:
            log = nodes / f"{host}.log"
            try:
                st = log.lstat()
            except OSError:
                st = None
            if st is not None and stat.S_ISREG(st.st_mode):
                # From the node's start (its start-up may be why the run failed) to the run's end, as diagnose reads
                # it; an end the file no longer reaches means it was replaced: whole.
                _, end = part_of(windows.get(log.name, (0, None)), st.st_size)
                until = end if end < st.st_size else None
                plan.items.append(Item(f"hosts/{host}/node.log", log, st.st_size if until is None else until, until))
            elif st is not None:
                plan.skipped.append(f"hosts/{host}/node.log: {log} is not a regular file")
            cann = evidence.cann_log_dir(log_dir, host)
            if cann.is_dir() and not cann.is_symlink():
                plan.items += _walk(cann, f"hosts/{host}/{evidence.CANN}", plan, keep=in_run)
            own = evidence.evidence_dir(log_dir, host, key)
            if own.is_dir() and not _links_on_the_way(nodes, own):
                plan.items += _walk(own, f"hosts/{host}", plan)
    elif nodes_link.is_symlink() or nodes_link.exists():
        plan.skipped.append(f"run/{runfiles.NODES}: not the record's link to {nodes}, not followed")
    else:
        plan.skipped.append(f"run/{runfiles.NODES}: absent, so no host's logs are in the bundle")
    rehearsals = run_dir.parent.parent / "rehearsals"
    if rehearsals.is_dir() and not rehearsals.is_symlink():
        plan.items += _walk(rehearsals, "experiment/rehearsals", plan)
    site = env.get("VERL_RECIPE_SITE", "")
    if site:
        try:
            st = os.lstat(site)
            if stat.S_ISREG(st.st_mode):
                plan.items.append(Item("site/site.yaml", Path(site), st.st_size))
        except OSError:
            pass
    if len(plan.items) > MAX_FILES:
        # the newest are kept: the end of a run is where its failure is
        plan.items.sort(key=_mtime, reverse=True)
        plan.skipped.append(f"{len(plan.items) - MAX_FILES} file(s): over {MAX_FILES} files, the oldest left out")
        plan.items = sorted(plan.items[:MAX_FILES], key=lambda i: i.arc)
    return plan


def _mtime(item: Item) -> float:
    try:
        return item.path.lstat().st_mtime
    except OSError:
        return 0.0


def _links_on_the_way(top: Path, below: Path) -> bool:
    """A link among the folders between LOG_DIR/nodes and its evidence folder would lead out of LOG_DIR."""
    p = below
    while p != top and p != p.parent:
        if p.is_symlink():
            return True
        p = p.parent
    return False


def fit(sizes: list[int], cap: int) -> int | None:
    """The one size every file over it is cut to so that all fit in `cap` bytes; None when all fit whole."""
    if sum(sizes) <= cap:
        return None
    ordered = sorted(sizes)
    left, count = cap, len(ordered)
    for i, s in enumerate(ordered):
        share = left // (count - i)
        if s > share:
            return share
        left -= s
    return 0


# ---- writing it


@dataclass
class Written:
    arc: str
    kept: int
    size: int
    note: str = ""


def _read_tail(
    path: Path, limit: int | None, redactor: Redactor, sink: IO[bytes], until: int | None = None
) -> tuple[int, int, str]:
    """Copy the last `limit` bytes (all when None) of the file's first `until` bytes (all when None or beyond its
    end), redacted, into `sink`: (bytes read, the bytes it was read from, note)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(f"{path} is no longer a regular file")
        size = st.st_size
        end = until if until is not None and until <= size else size
        start = 0 if limit is None or end <= limit else end - limit
        # from a little before the cut, so that a secret across it is found and masked whole
        margin = min(start, redactor.overlap)
        f.seek(start - margin)
        want = end - start + margin
        got = 0

        def blocks() -> Iterator[bytes]:
            nonlocal got
            while got < want:
                data = f.read(min(READ_BLOCK, want - got))
                if not data:
                    return
                got += len(data)
                yield data

        for out in redactor.stream(blocks(), skip=margin):
            sink.write(out)
        notes = []
        if end < size:
            notes.append(f"the run's part: its first {end} of {size} bytes; the rest, written after the run, left out")
        if got < want:
            notes.append(f"shrank while read ({size} bytes when opened)")
        return max(0, got - margin), end, "; ".join(notes)


def write_bundle(plan: Plan, out: Path, cap: int, redactor: Redactor) -> list[Written]:
    limit = fit([i.size for i in plan.items], cap)
    top = out.name[: -len(SUFFIX)] if out.name.endswith(SUFFIX) else out.name
    written: list[Written] = []
    fd, tmp_name = tempfile.mkstemp(prefix=f".{PREFIX}", suffix=".tmp", dir=out.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
            for item in plan.items:
                arc = redactor.text(item.arc.encode()).decode(errors="replace")
                with tempfile.SpooledTemporaryFile(max_size=8 * 2**20) as spool:
                    try:
                        kept, size, note = _read_tail(item.path, limit, redactor, spool, item.until)
                    except FileNotFoundError:
                        plan.skipped.append(f"{arc}: vanished while read")
                        continue
                    except OSError as exc:
                        plan.skipped.append(f"{arc}: not read ({exc.strerror or exc})")
                        continue
                    if limit is not None and size > limit:
                        note = f"cut: its last {kept} of {size} bytes kept" + (f"; {note}" if note else "")
                    length = spool.tell()
                    spool.seek(0)
                    _add(tar, f"{top}/{arc}", spool, length)
                written.append(Written(arc, kept, size, note))
            manifest = render_manifest(plan, written, cap, limit, redactor).encode()
            _add(tar, f"{top}/MANIFEST.txt", io.BytesIO(manifest), len(manifest))
        os.chmod(tmp, 0o600)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return written


def _add(tar: tarfile.TarFile, name: str, data: IO[bytes], length: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = length, 0o644, int(time.time())
    tar.addfile(info, data)


def render_manifest(plan: Plan, written: list[Written], cap: int, limit: int | None, redactor: Redactor) -> str:
    kept = sum(w.kept for w in written)
    lines = [
        f"verl-recipe bundle of {plan.run_dir}",
        f"created: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
        f"LOG_DIR: {plan.log_dir}",
        f"cap: {cap} bytes of file content before compression; {len(written)} file(s), {kept} bytes kept",
    ]
    if limit is not None:
        cut = sum(1 for w in written if w.size > limit)
        lines.append(
            f"cut: the biggest files did not fit the cap: {cut} file(s) cut from the front to their last {limit} "
            "bytes (the end of a log is where a run's failure is); each says so below"
        )
    names = sorted(redactor.secrets.values)
    lines.append(
        f"secrets: {len(names)} value(s) known ({', '.join(names) or 'none'}); {redactor.count} occurrence(s) "
        "replaced by [REDACTED:<name>]"
    )
    lines += [f"  {s}" for s in redactor.secrets.sources]
    lines.append(f"hosts: {' '.join(plan.hosts) or 'none found under LOG_DIR/nodes'}")
    present = {w.arc for w in written}
    for host in plan.hosts:
        lacks = [x for x in ("node.log", *EXPECTED) if not any(a.startswith(f"hosts/{host}/{x}") for a in present)]
        if not any(a.startswith(f"hosts/{host}/{evidence.CANN}/") for a in present):
            lacks.append("CANN logs (cann/)")
        if lacks:
            lines.append(f"  {host} lacks: {', '.join(lacks)}")
    lines.append("files:")
    lines += [f"  {w.arc}  {w.kept} bytes" + (f"  ({w.note})" if w.note else "") for w in written]
    if plan.skipped or plan.older:
        lines.append("left out:")
        lines += [f"  {s}" for s in plan.skipped]
        if plan.older:
            lines.append(f"  {plan.older} CANN log file(s) written outside the run's time")
    return "\n".join(lines) + "\n"


def default_out(run_dir: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return run_dir / f"{PREFIX}{run_dir.parent.parent.name}-{run_dir.name}-{stamp}{SUFFIX}"


def bundle(raw: str, out: Path | None = None, max_mb: float = DEFAULT_MAX_MB) -> tuple[Path, list[Written], Plan]:
    if not (0 < max_mb <= 1 << 20):
        raise BundleError(f"bundle: --max-mb {max_mb} is out of range; fix: give a size in MB from 1 to 1048576")
    run_dir, log_dir = run_folder(raw)
    try:
        secrets = load_secrets(secret_files_of(run_dir))
    except RedactError as exc:
        raise BundleError(f"bundle: {exc}") from None
    plan = plan_bundle(run_dir, log_dir)
    target = out or default_out(run_dir)
    if target.is_symlink() or (target.exists() and not target.is_file()):
        raise BundleError(f"bundle: {target} exists and is not a plain file; fix: give another --out")
    if not target.parent.is_dir():
        raise BundleError(f"bundle: the folder of {target} does not exist; fix: give --out in an existing folder")
    written = write_bundle(plan, target, int(max_mb * 2**20), Redactor(secrets))
    return target, written, plan


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="verl-recipe bundle",
        description="One .tar.gz of a run's evidence from every host (logs, plogs, npu-smi, kernel tail, reports), "
        "bounded in size, secrets redacted.",
    )
    parser.add_argument("run", metavar="RUN_DIR", help="the run folder (with --locate also <experiment>[/<stamp>])")
    parser.add_argument("--max-mb", type=float, default=DEFAULT_MAX_MB, help=f"cap (default {DEFAULT_MAX_MB})")
    parser.add_argument("--out", type=Path, help="the archive (default: RUN_DIR/bundle-<experiment>-<stamp>-...)")
    parser.add_argument("--locate", action="store_true", help="print the run's place as JSON (ansible/logs.yml)")
    ns = parser.parse_args(argv)
    try:
        if ns.locate:
            print(json.dumps(locate(ns.run)))
            return EXIT_OK
        target, written, plan = bundle(ns.run, ns.out, ns.max_mb)
    except BundleError as exc:
        error(exc)
        return EXIT_BAD_INPUT
    except OSError as exc:
        error(f"bundle: {exc.filename or ns.run}: {exc.strerror or exc}; fix: check the folder and its permissions")
        return EXIT_BAD_INPUT
    cut = sum(1 for w in written if "cut:" in w.note)
    print(
        f"bundle: {len(written)} file(s) from {len(plan.hosts)} host(s), {cut} cut, {len(plan.skipped)} left out "
        "(MANIFEST.txt says which)",
        file=sys.stderr,
    )
    print(target)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
