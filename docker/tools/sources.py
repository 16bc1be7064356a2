#!/usr/bin/env python3
"""Fetch every git source of the NPU image at its pinned commit, so the image build needs no GitHub or gitcode.

  fetch  --dest DIR --lock FILE [--mirror BASE]   clone each source at its commit (submodules at their recorded
                                                  commits, never --remote), write DIR/<name>-<commit12>.tar and
                                                  DIR/SHA256SUMS, and record everything in FILE (docker/sources.lock)
  verify --dest DIR --lock FILE                   check DIR against FILE (no network)
  context --dest DIR --lock FILE --out CTX ...    assemble the NPU build context (sources, locks, CA bundle)
  ready --dest DIR --lock FILE --lock-dir D ...   what `make image-npu` needs before anything starts, in the build
                                                  host's order; the first missing step named as the next command

A mirror base URL replaces the host part: with --mirror https://git.example.com/ the source
https://github.com/vllm-project/vllm.git is fetched from https://git.example.com/github.com/vllm-project/vllm.git
(submodules too, through git's url.<base>.insteadOf). Tarballs are deterministic (sorted names, fixed owner and
the commit's time as mtime, no .git), so the same commit gives the same checksum with the same GNU tar.
A source whose commit is empty in the manifest (ref = a tag) is resolved from the tag and recorded in the lock;
a tag that resolves to a different commit than the manifest pins is an error (a moved or re-pushed tag); a branch
that has moved past the pinned commit is only reported. A file:// mirror gets `protocol.file.allow=always` for this
fetch only (git refuses file:// submodules by default). Submodules the image never uses (SKIP_SUBMODULES) are left
out of the tarball and recorded as skipped in the lock.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
NPU_DIR = ROOT / "docker" / "npu"
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
HOSTS = ("https://github.com/", "https://gitcode.com/")
# Submodules left out of a source's tarball, by manifest key, with why: Megatron-Bridge's 3rdparty/Megatron-LM
# (~40 MB) is its own Megatron-LM checkout for its CI; the image puts only Megatron-Bridge's src/ on PYTHONPATH and
# builds Megatron-LM from git_sources.megatron_lm (upstream's A3 image does not initialise it either).
SKIP_SUBMODULES: dict[str, tuple[str, ...]] = {"megatron_bridge": ("3rdparty/Megatron-LM",)}


class SourceError(Exception):
    """A one-line error naming the source and the fix."""


def run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    try:
        out = subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or exc.stdout or "").strip().splitlines()[-1:] or [""]
        raise SourceError(f"`{' '.join(cmd[:4])} ...` failed: {tail[0]}") from None
    return out.stdout.strip()


def mirror_url(url: str, mirror: str) -> str:
    if not mirror:
        return url
    base = mirror.rstrip("/") + "/"
    for host in HOSTS:
        if url.startswith(host):
            return base + host.removeprefix("https://") + url.removeprefix(host)
    raise SourceError(f"{url}: no mirror mapping for this host (known: {', '.join(HOSTS)}); fetch it without --mirror")


def git_env(mirror: str) -> dict[str, str]:
    """Environment for git: no prompts, and (with a mirror) every known host rewritten to the mirror."""
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    if mirror:
        base = mirror.rstrip("/") + "/"
        pairs = [(f"url.{base}{h.removeprefix('https://')}.insteadOf", h) for h in HOSTS]
        if base.startswith("file://"):
            # git (>= 2.38.1, CVE-2022-39253) refuses file:// for submodules unless allowed; only for this fetch.
            pairs.append(("protocol.file.allow", "always"))
        env["GIT_CONFIG_COUNT"] = str(len(pairs))
        for i, (key, value) in enumerate(pairs):
            env[f"GIT_CONFIG_KEY_{i}"] = key
            env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def load_sources(manifest: Path) -> dict[str, dict[str, Any]]:
    data = yaml.safe_load(manifest.read_text())
    sources = data.get("git_sources") if isinstance(data, dict) else None
    if not isinstance(sources, dict) or not sources:
        raise SourceError(f"{manifest}: no git_sources table: restore docker/versions.yaml")
    for name, src in sources.items():
        if not isinstance(src, dict) or not src.get("url"):
            raise SourceError(f"git_sources.{name}: url missing in {manifest}")
        commit = str(src.get("commit") or "")
        if commit and not SHA_RE.match(commit):
            raise SourceError(f"git_sources.{name}.commit={commit!r} is not a 40-hex commit: fix the manifest")
        if not commit and not src.get("ref"):
            raise SourceError(f"git_sources.{name}: neither commit nor ref: pin a commit in the manifest")
    return sources


def resolve_ref(url: str, ref: str, env: dict[str, str]) -> tuple[str, str]:
    """The commit a tag (or branch) points to now, peeled through annotated tags, and "tag" or "branch"."""
    out = run(["git", "ls-remote", url, f"refs/tags/{ref}", f"refs/tags/{ref}^{{}}", f"refs/heads/{ref}"], env=env)
    refs: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if name:
            refs[name] = sha
    for key, kind in ((f"refs/tags/{ref}^{{}}", "tag"), (f"refs/tags/{ref}", "tag"), (f"refs/heads/{ref}", "branch")):
        if key in refs:
            return refs[key], kind
    raise SourceError(f"{url}: ref {ref!r} not found: check git_sources ref in docker/versions.yaml")


def check_ref(name: str, url: str, ref: str, commit: str, env: dict[str, str]) -> None:
    """A pinned tag must still name the pinned commit; a branch may have moved on (reported, not an error)."""
    now, kind = resolve_ref(url, ref, env)
    if now == commit:
        return
    if kind == "tag":
        raise SourceError(
            f"{name}: tag {ref} resolves to {now} at {url}, the manifest pins {commit}: the tag moved or the pin is "
            f"wrong; check upstream and fix git_sources.{name}.commit"
        )
    print(f"sources: {name}: branch {ref} is now at {now[:12]}; fetching the pinned {commit[:12]}")


def tar_tree(tree: Path, out: Path, mtime: str) -> None:
    """A deterministic tar of a checkout without .git (GNU tar)."""
    files = sorted(
        str(p.relative_to(tree)) for p in tree.rglob("*") if ".git" not in p.relative_to(tree).parts and p != tree
    )
    listing = out.with_suffix(".list")
    listing.write_text("\n".join(files) + "\n")
    try:
        run(
            [
                "tar",
                "--no-recursion",
                "--format=gnu",
                f"--mtime=@{mtime}",
                "--owner=0",
                "--group=0",
                "--numeric-owner",
                "--mode=go-w",
                "-C",
                str(tree),
                "-cf",
                str(out),
                "-T",
                str(listing),
            ]
        )
    finally:
        listing.unlink()


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_one(name: str, src: dict[str, Any], dest: Path, mirror: str) -> dict[str, str]:
    env = git_env(mirror)
    url = mirror_url(str(src["url"]), mirror)
    commit = str(src.get("commit") or "")
    ref = str(src.get("ref") or "")
    if ref and not SHA_RE.match(ref):
        if commit:
            check_ref(name, url, ref, commit, env)
        else:
            commit, _ = resolve_ref(url, ref, env)
            print(f"sources: {name}: resolved {ref} -> {commit}")
    with tempfile.TemporaryDirectory(prefix=f"verl-recipe-src-{name}-") as tmp:
        work = Path(tmp) / name
        work.mkdir()
        run(["git", "init", "-q", str(work)], env=env)
        try:
            run(["git", "fetch", "-q", "--depth", "1", url, commit], cwd=work, env=env)
        except SourceError:
            # Servers that refuse fetching by commit: fetch the ref, then the commit must be in its history.
            if not ref:
                raise
            run(["git", "fetch", "-q", url, ref], cwd=work, env=env)
        try:
            run(["git", "checkout", "-q", "--detach", commit], cwd=work, env=env)
        except SourceError:
            raise SourceError(f"{name}: commit {commit} not found at {url}: check git_sources.{name}.commit") from None
        got = run(["git", "rev-parse", "HEAD"], cwd=work, env=env)
        if got != commit:
            raise SourceError(f"{name}: checked out {got}, expected {commit}")
        skip = SKIP_SUBMODULES.get(name, ())
        if (work / ".gitmodules").is_file():
            paths = run(
                ["git", "config", "-f", ".gitmodules", "--get-regexp", r"^submodule\..*\.path$"], cwd=work, env=env
            )
            wanted = [line.split(" ", 1)[1] for line in paths.splitlines() if line.split(" ", 1)[1] not in skip]
            # The recorded submodule commits, never --remote (the upstream image's moving-target defect).
            if wanted:
                run(["git", "submodule", "update", "-q", "--init", "--recursive", "--depth", "1", "--", *wanted],
                    cwd=work, env=env)  # fmt: skip
        tree = run(["git", "rev-parse", "HEAD^{tree}"], cwd=work, env=env)
        mtime = run(["git", "log", "-1", "--format=%ct", "HEAD"], cwd=work, env=env)
        subs = (
            run(["git", "submodule", "status", "--recursive"], cwd=work, env=env)
            if (work / ".gitmodules").is_file()
            else ""
        )
        out = dest / f"{name}-{commit[:12]}.tar"
        tmp_out = out.with_suffix(".tar.tmp")
        tar_tree(work, tmp_out, mtime)
        tmp_out.replace(out)
    # `git submodule status` marks one that was not initialised with "-": those are the skipped ones.
    status = [(line.split()[0], line.split()[1]) for line in subs.splitlines()]
    entry = {
        "url": str(src["url"]),
        "ref": ref,
        "commit": commit,
        "tree": tree,
        "submodules": " ".join(sha.lstrip("+U") + ":" + path for sha, path in status if not sha.startswith("-")),
        "archive": out.name,
        "sha256": sha256(out),
    }
    skipped = [sha.lstrip("-") + ":" + path for sha, path in status if sha.startswith("-")]
    if skipped:
        entry["skipped_submodules"] = " ".join(skipped)
    return entry


def write_lock(lock: Path, manifest: Path, entries: dict[str, dict[str, str]]) -> None:
    header = (
        "# Written by `make sources` (docker/tools/sources.py) from docker/versions.yaml: every git source of the NPU\n"
        "# image at its exact commit, its tree hash, its submodules and the sha256 of the deterministic tarball.\n"
        "# The image build checks the tarballs against this file; do not edit by hand.\n"
    )
    body = yaml.safe_dump(
        {"schema": 1, "manifest_sha256": sha256(manifest), "sources": entries}, sort_keys=True, width=200
    )
    lock.write_text(header + "---\n" + body)


def write_sums(dest: Path, entries: dict[str, dict[str, str]]) -> None:
    lines = [f"{e['sha256']}  {e['archive']}" for _, e in sorted(entries.items())]
    (dest / "SHA256SUMS").write_text("\n".join(lines) + "\n")


def read_lock(lock: Path) -> dict[str, dict[str, str]]:
    if not lock.is_file():
        raise SourceError(f"{lock} not found: run `make sources` on a host that reaches the git servers or a mirror")
    data = yaml.safe_load(lock.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("sources"), dict):
        raise SourceError(f"{lock} is not a sources lock: run `make sources` again")
    entries: dict[str, dict[str, str]] = data["sources"]
    return entries


def cmd_fetch(a: argparse.Namespace) -> int:
    manifest = Path(a.manifest)
    sources = load_sources(manifest)
    only = set(a.only or [])
    unknown = only - set(sources)
    if unknown:
        raise SourceError(f"--only {sorted(unknown)}: not in git_sources ({', '.join(sources)})")
    dest = Path(a.dest)
    dest.mkdir(parents=True, exist_ok=True)
    lock = Path(a.lock)
    entries = read_lock(lock) if lock.is_file() and only else {}
    for name, src in sources.items():
        if only and name not in only:
            continue
        entries[name] = fetch_one(name, src, dest, a.mirror or "")
        print(f"sources: {name} {entries[name]['commit'][:12]} -> {dest / entries[name]['archive']}")
    write_sums(dest, entries)
    write_lock(lock, manifest, entries)
    print(f"sources: {len(entries)} sources in {dest}, recorded in {lock}")
    return 0


def verify(dest: Path, lock: Path, manifest: Path) -> dict[str, dict[str, str]]:
    entries = read_lock(lock)
    sources = load_sources(manifest)
    missing = sorted(set(sources) - set(entries))
    if missing:
        raise SourceError(f"{lock} lacks {missing}: run `make sources`")
    for name, e in sorted(entries.items()):
        pinned = str(sources.get(name, {}).get("commit") or "")
        if pinned and pinned != e["commit"]:
            raise SourceError(f"{name}: {lock} has {e['commit']}, the manifest pins {pinned}: run `make sources`")
        path = dest / e["archive"]
        if not path.is_file():
            raise SourceError(f"{path} missing: run `make sources` (or copy the folder from a host that ran it)")
        got = sha256(path)
        if got != e["sha256"]:
            raise SourceError(f"{path}: sha256 {got} != {e['sha256']} in {lock}: fetch it again with `make sources`")
    return entries


def cmd_verify(a: argparse.Namespace) -> int:
    entries = verify(Path(a.dest), Path(a.lock), Path(a.manifest))
    print(f"sources: {len(entries)} tarballs match {a.lock}")
    return 0


def cmd_context(a: argparse.Namespace) -> int:
    """The NPU build context: sources/, the locks, the CA bundle, the sources lock as JSON for the Dockerfile."""
    dest, out = Path(a.dest), Path(a.out)
    entries = verify(dest, Path(a.lock), Path(a.manifest))
    ca = Path(a.ca_bundle)
    if not ca.is_file():
        raise SourceError(f"CA bundle {ca} not found: pass PIP_CA_BUNDLE=<path to a PEM bundle>")
    if out.exists():
        shutil.rmtree(out)
    (out / "sources").mkdir(parents=True)
    for e in entries.values():
        target = out / "sources" / e["archive"]
        try:
            os.link(dest / e["archive"], target)
        except OSError:
            shutil.copyfile(dest / e["archive"], target)
    write_sums(out / "sources", entries)
    # name -> archive, for the Dockerfile's extraction step
    (out / "sources" / "sources.json").write_text(json.dumps({k: v["archive"] for k, v in sorted(entries.items())}))
    lock_dir = Path(a.lock_dir)
    (out / "lock").mkdir()
    # The locks, the accepted `pip check` conflicts and the record of what is not locked yet.
    for pattern in ("*.lock", "accepted-conflicts.toml", "unresolved.txt", "sdist-only.txt"):
        for f in sorted(lock_dir.glob(pattern)):
            shutil.copyfile(f, out / "lock" / f.name)
    # The build helpers of docker/npu/ (CANN environment, lock splitting, pip check judge, import smoke test).
    (out / "npu").mkdir()
    for f in sorted(NPU_DIR.glob("*")):
        if f.suffix in (".sh", ".py", ".awk"):
            shutil.copyfile(f, out / "npu" / f.name)
    shutil.copyfile(ca, out / "ca.crt")
    print(f"sources: NPU build context in {out}")
    return 0


# The build host's steps before `make image-npu`, in order: the first one not done is the next command to type.
ASCEND_INDEX_HINT = "ASCEND_INDEX_URL=https://<Ascend index or mirror>/simple"


def ready(dest: Path, lock: Path, manifest: Path, lock_dir: Path, ca_bundle: Path, ascend_index: str) -> None:
    """Refuse a build that would stop half-way (after the base pull and the lock install) with the next command."""
    verify(dest, lock, manifest)
    ascend = lock_dir / "npu-ascend.lock"
    if not ascend.is_file():
        raise SourceError(f"{ascend} is missing: run `make lock-npu-ascend {ASCEND_INDEX_HINT}` and commit it")
    if "--hash=sha256:" not in ascend.read_text():
        raise SourceError(f"{ascend} has no hashes: run `make lock-npu-ascend {ASCEND_INDEX_HINT}` again")
    if not ascend_index.strip():
        raise SourceError(f"ASCEND_INDEX_URL is not set: run `make image-npu {ASCEND_INDEX_HINT}`")
    if not ca_bundle.is_file():
        raise SourceError(f"CA bundle {ca_bundle} not found: pass PIP_CA_BUNDLE=<path to a PEM bundle>")


def cmd_ready(a: argparse.Namespace) -> int:
    ready(Path(a.dest), Path(a.lock), Path(a.manifest), Path(a.lock_dir), Path(a.ca_bundle),
          os.environ.get("ASCEND_INDEX_URL", ""))  # fmt: skip
    print("sources: ready for make image-npu (sources, Ascend lock, Ascend index)")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sources", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--manifest", default=str(ROOT / "docker" / "versions.yaml"))
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch")
    f.add_argument("--dest", required=True)
    f.add_argument("--lock", required=True)
    f.add_argument("--mirror", default="")
    f.add_argument("--only", action="append", help="fetch only this source (repeatable); others stay in the lock")
    v = sub.add_parser("verify")
    v.add_argument("--dest", required=True)
    v.add_argument("--lock", required=True)
    c = sub.add_parser("context")
    c.add_argument("--dest", required=True)
    c.add_argument("--lock", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--ca-bundle", required=True)
    c.add_argument("--lock-dir", required=True)
    r = sub.add_parser("ready")
    r.add_argument("--dest", required=True)
    r.add_argument("--lock", required=True)
    r.add_argument("--lock-dir", required=True)
    r.add_argument("--ca-bundle", required=True)
    a = p.parse_args(argv)
    try:
        return {"fetch": cmd_fetch, "verify": cmd_verify, "context": cmd_context, "ready": cmd_ready}[a.cmd](a)
    except SourceError as exc:
        print(f"sources: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
