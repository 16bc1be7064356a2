"""`make sources` against local git repositories behind a file:// mirror: pinned commits, tags, submodules,
deterministic tarballs, checksums, and clear errors."""

from __future__ import annotations

import io
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from simkit.paths import load_by_path

ROOT = Path(__file__).resolve().parents[2]
# Loaded under a project-specific name: docker/tools is not a package and "sources" is a common module name.
sources = load_by_path("verl_recipe_image_sources", ROOT / "docker" / "tools" / "sources.py")


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def make_repo(path: Path, files: dict[str, str]) -> str:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "one")
    return git(path, "rev-parse", "HEAD")


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    """A mirror folder laid out as <base>/github.com/<owner>/<name>.git with an app that has a submodule."""
    base = tmp_path / "mirror"
    gh = base / "github.com" / "acme"
    sub_commit = make_repo(gh / "lib.git", {"lib.py": "X = 1\n"})
    app = gh / "app.git"
    first = make_repo(app, {"app.py": "print('v1')\n"})
    # git refuses file:// submodules by default; the test's own global config allows it for this process only.
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text('[protocol "file"]\n\tallow = always\n[user]\n\tname = t\n\temail = t@example.invalid\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # The submodule URL names the upstream host: only the mirror rewrite makes it fetchable.
    subprocess.run(
        ["git", "-C", str(app), "-c", f"url.{base.as_uri()}/github.com/.insteadOf=https://github.com/",
         "submodule", "add", "-q", "https://github.com/acme/lib.git", "third_party/lib"],
        check=True, capture_output=True,
    )  # fmt: skip
    git(app, "commit", "-q", "-m", "submodule")
    tagged = git(app, "rev-parse", "HEAD")
    git(app, "tag", "-a", "v1.0", "-m", "release")
    (app / "app.py").write_text("print('v2')\n")
    git(app, "commit", "-q", "-am", "after the tag")
    head = git(app, "rev-parse", "HEAD")
    yield {"base": base.as_uri(), "first": first, "tagged": tagged, "head": head, "sub": sub_commit}


def write_manifest(path: Path, entries: dict[str, dict[str, str]]) -> Path:
    path.write_text(yaml.safe_dump({"schema": 1, "git_sources": entries}))
    return path


def fetch(tmp_path: Path, manifest: Path, mirror_base: str, dest: str = "out") -> tuple[int, Path, Path]:
    lock = tmp_path / f"{dest}.lock"
    rc = sources.main(["--manifest", str(manifest), "fetch", "--dest", str(tmp_path / dest), "--lock", str(lock),
                       "--mirror", mirror_base])  # fmt: skip
    return rc, tmp_path / dest, lock


def members(tar: Path) -> dict[str, bytes]:
    out = {}
    with tarfile.open(tar) as tf:
        for m in tf.getmembers():
            f = tf.extractfile(m) if m.isfile() else None
            out[m.name] = f.read() if f else b""
    return out


def test_pinned_commit_with_submodule_through_the_mirror(tmp_path: Path, mirror: dict[str, object]) -> None:
    manifest = write_manifest(
        tmp_path / "versions.yaml",
        {"app": {"url": "https://github.com/acme/app.git", "ref": "v1.0", "commit": str(mirror["tagged"])}},
    )
    rc, dest, lock = fetch(tmp_path, manifest, str(mirror["base"]))
    assert rc == 0
    entry = yaml.safe_load(lock.read_text())["sources"]["app"]
    assert entry["commit"] == mirror["tagged"]
    assert str(mirror["sub"]) in entry["submodules"]
    files = members(dest / entry["archive"])
    assert files["app.py"] == b"print('v1')\n"  # the pinned commit, not the branch head
    assert files["third_party/lib/lib.py"] == b"X = 1\n"  # submodule at its recorded commit
    assert not any(".git" in Path(n).parts for n in files)
    assert (dest / "SHA256SUMS").read_text().split()[1] == entry["archive"]
    assert sources.main(["--manifest", str(manifest), "verify", "--dest", str(dest), "--lock", str(lock)]) == 0


def test_empty_commit_is_resolved_from_the_tag_and_recorded(tmp_path: Path, mirror: dict[str, object]) -> None:
    manifest = write_manifest(
        tmp_path / "versions.yaml", {"app": {"url": "https://github.com/acme/app.git", "ref": "v1.0", "commit": ""}}
    )
    rc, _, lock = fetch(tmp_path, manifest, str(mirror["base"]))
    assert rc == 0
    # The annotated tag is peeled to its commit, not the tag object, and not the later branch head.
    assert yaml.safe_load(lock.read_text())["sources"]["app"]["commit"] == mirror["tagged"]


def test_file_mirror_fetches_submodules_without_a_global_git_config(
    tmp_path: Path, mirror: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make sources GIT_MIRROR=file://...` needs protocol.file.allow for submodules: the tool sets it itself."""
    empty = tmp_path / "empty-gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    manifest = write_manifest(
        tmp_path / "versions.yaml",
        {"app": {"url": "https://github.com/acme/app.git", "ref": "v1.0", "commit": str(mirror["tagged"])}},
    )
    rc, dest, lock = fetch(tmp_path, manifest, str(mirror["base"]))
    assert rc == 0
    entry = yaml.safe_load(lock.read_text())["sources"]["app"]
    assert members(dest / entry["archive"])["third_party/lib/lib.py"] == b"X = 1\n"
    env = sources.git_env(str(mirror["base"]))
    pairs = {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(int(env["GIT_CONFIG_COUNT"]))}
    assert pairs["protocol.file.allow"] == "always"
    # Only a file:// mirror gets it: an https mirror or no mirror leaves git's default alone.
    https = sources.git_env("https://m.example/")
    assert "protocol.file.allow" not in [https[f"GIT_CONFIG_KEY_{i}"] for i in range(int(https["GIT_CONFIG_COUNT"]))]
    assert "GIT_CONFIG_COUNT" not in sources.git_env("")


def test_pinned_commit_that_the_tag_no_longer_names_is_an_error(
    tmp_path: Path, mirror: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM's v0.18.0 is pinned by commit: a tag that resolves elsewhere stops `make sources`, nothing written."""
    manifest = write_manifest(
        tmp_path / "versions.yaml",
        {"app": {"url": "https://github.com/acme/app.git", "ref": "v1.0", "commit": str(mirror["head"])}},
    )
    rc, dest, lock = fetch(tmp_path, manifest, str(mirror["base"]))
    assert rc == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "tag v1.0 resolves to " + str(mirror["tagged"]) in err and str(mirror["head"]) in err
    assert "git_sources.app.commit" in err
    assert not lock.exists() and not list(dest.glob("*.tar"))


def test_branch_past_the_pinned_commit_is_reported_not_fatal(
    tmp_path: Path, mirror: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    """vllm-ascend is pinned to a commit of releases/v0.18.0; the branch moving on must not change what is fetched."""
    manifest = write_manifest(
        tmp_path / "versions.yaml",
        {"app": {"url": "https://github.com/acme/app.git", "ref": "main", "commit": str(mirror["tagged"])}},
    )
    rc, dest, lock = fetch(tmp_path, manifest, str(mirror["base"]))
    assert rc == 0
    assert f"branch main is now at {str(mirror['head'])[:12]}" in capsys.readouterr().out
    entry = yaml.safe_load(lock.read_text())["sources"]["app"]
    assert entry["commit"] == mirror["tagged"]
    assert members(dest / entry["archive"])["app.py"] == b"print('v1')\n"


def test_skipped_submodule_stays_out_and_is_recorded(
    tmp_path: Path, mirror: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Megatron-Bridge's 3rdparty/Megatron-LM is not fetched: its folder is empty and the lock says it was skipped."""
    assert sources.SKIP_SUBMODULES["megatron_bridge"] == ("3rdparty/Megatron-LM",)
    monkeypatch.setitem(sources.SKIP_SUBMODULES, "app", ("third_party/lib",))
    manifest = write_manifest(
        tmp_path / "versions.yaml",
        {"app": {"url": "https://github.com/acme/app.git", "ref": "v1.0", "commit": str(mirror["tagged"])}},
    )
    rc, dest, lock = fetch(tmp_path, manifest, str(mirror["base"]))
    assert rc == 0
    entry = yaml.safe_load(lock.read_text())["sources"]["app"]
    files = members(dest / entry["archive"])
    assert "app.py" in files and not any(n.startswith("third_party/lib/") for n in files)
    assert entry["submodules"] == ""
    assert entry["skipped_submodules"] == f"{mirror['sub']}:third_party/lib"


def test_tarballs_are_deterministic(tmp_path: Path, mirror: dict[str, object]) -> None:
    manifest = write_manifest(
        tmp_path / "versions.yaml",
        {"app": {"url": "https://github.com/acme/app.git", "ref": "main", "commit": str(mirror["head"])}},
    )
    _, _, lock_a = fetch(tmp_path, manifest, str(mirror["base"]), "a")
    _, _, lock_b = fetch(tmp_path, manifest, str(mirror["base"]), "b")
    a = yaml.safe_load(lock_a.read_text())["sources"]["app"]
    b = yaml.safe_load(lock_b.read_text())["sources"]["app"]
    assert a["sha256"] == b["sha256"]
    with tarfile.open(tmp_path / "a" / a["archive"]) as tf:
        assert {m.uid for m in tf.getmembers()} == {0}
        app = Path(str(mirror["base"]).removeprefix("file://")) / "github.com/acme/app.git"
        commit_time = int(git(app, "log", "-1", "--format=%ct", str(mirror["head"])))
        assert {m.mtime for m in tf.getmembers()} == {commit_time}


def test_tampered_tarball_fails_verify_with_the_fix(
    tmp_path: Path, mirror: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write_manifest(
        tmp_path / "versions.yaml",
        {"app": {"url": "https://github.com/acme/app.git", "ref": "main", "commit": str(mirror["head"])}},
    )
    _, dest, lock = fetch(tmp_path, manifest, str(mirror["base"]))
    archive = next(dest.glob("app-*.tar"))
    with archive.open("ab") as fh:
        fh.write(b"\0" * 512)
    capsys.readouterr()
    assert sources.main(["--manifest", str(manifest), "verify", "--dest", str(dest), "--lock", str(lock)]) == 1
    err = capsys.readouterr().err
    assert archive.name in err and "make sources" in err


def test_unknown_commit_is_a_clear_error(
    tmp_path: Path, mirror: dict[str, object], capsys: pytest.CaptureFixture[str]
) -> None:
    bogus = "0" * 40
    manifest = write_manifest(
        tmp_path / "versions.yaml", {"app": {"url": "https://github.com/acme/app.git", "ref": "main", "commit": bogus}}
    )
    rc, dest, lock = fetch(tmp_path, manifest, str(mirror["base"]))
    assert rc == 1
    err = capsys.readouterr().err.strip()
    assert "app" in err and bogus in err and len(err.splitlines()) == 1
    assert not lock.exists() and not list(dest.glob("*.tar"))


def test_manifest_commit_must_be_hex(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = write_manifest(
        tmp_path / "versions.yaml", {"app": {"url": "https://github.com/acme/app.git", "commit": "main"}}
    )
    rc, _, _ = fetch(tmp_path, manifest, "")
    assert rc == 1
    assert "git_sources.app.commit='main'" in capsys.readouterr().err


def test_mirror_mapping() -> None:
    assert sources.mirror_url("https://github.com/a/b.git", "https://m.example/git/") == (
        "https://m.example/git/github.com/a/b.git"
    )
    assert sources.mirror_url("https://gitcode.com/Ascend/MindSpeed.git", "https://m.example") == (
        "https://m.example/gitcode.com/Ascend/MindSpeed.git"
    )
    assert sources.mirror_url("https://github.com/a/b.git", "") == "https://github.com/a/b.git"
    with pytest.raises(sources.SourceError, match="no mirror mapping"):
        sources.mirror_url("https://example.org/x.git", "https://m.example")


def test_mirror_rewrites_submodules_in_git_config() -> None:
    env = sources.git_env("https://m.example/")
    pairs = {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"] for i in range(int(env["GIT_CONFIG_COUNT"]))}
    assert pairs["url.https://m.example/github.com/.insteadOf"] == "https://github.com/"
    assert pairs["url.https://m.example/gitcode.com/.insteadOf"] == "https://gitcode.com/"


def test_context_assembles_the_npu_build_context(tmp_path: Path, mirror: dict[str, object]) -> None:
    manifest = write_manifest(
        tmp_path / "versions.yaml",
        {"app": {"url": "https://github.com/acme/app.git", "ref": "main", "commit": str(mirror["head"])}},
    )
    _, dest, lock = fetch(tmp_path, manifest, str(mirror["base"]))
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    out = tmp_path / "ctx"
    lock_dir = str(ROOT / "docker" / "lock")
    rc = sources.main(["--manifest", str(manifest), "context", "--dest", str(dest), "--lock", str(lock),
                       "--out", str(out), "--ca-bundle", str(ca), "--lock-dir", lock_dir])  # fmt: skip
    assert rc == 0
    assert (out / "ca.crt").read_text() == ca.read_text()
    assert (out / "lock" / "npu.lock").is_file()
    assert (out / "lock" / "accepted-conflicts.toml").is_file() and (out / "lock" / "sdist-only.txt").is_file()
    assert {"build-env.sh", "cann-env.sh", "pip_check.py", "import_smoke.py", "lock-select.awk"} <= {
        f.name for f in (out / "npu").iterdir()
    }
    # Every file the NPU Dockerfile COPYs from its context is in the context (a missing one fails the build late).
    dockerfile = (ROOT / "docker" / "npu" / "Dockerfile").read_text()
    for line in dockerfile.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            for pattern in line.split()[1:-1]:
                assert list(out.glob(pattern.rstrip("/"))), f"{pattern} is not in the NPU build context"
    assert (out / "sources" / "SHA256SUMS").read_text() == (dest / "SHA256SUMS").read_text()
    names = io.StringIO((out / "sources" / "sources.json").read_text()).read()
    assert "app-" in names


@pytest.mark.parametrize(
    ("ascend_lock", "index", "next_command"),
    [
        (None, "https://ascend.example.invalid/simple", "make lock-npu-ascend"),
        ("triton-ascend==3.2.1\n", "https://ascend.example.invalid/simple", "make lock-npu-ascend"),
        ("triton-ascend==3.2.1 --hash=sha256:" + "0" * 64 + "\n", "", "make image-npu ASCEND_INDEX_URL="),
    ],
    ids=["no-ascend-lock", "ascend-lock-without-hashes", "no-ascend-index"],
)
def test_ready_names_the_build_hosts_next_step_before_anything_starts(
    tmp_path: Path,
    mirror: dict[str, object],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    ascend_lock: str | None,
    index: str,
    next_command: str,
) -> None:
    """A clone with the sources fetched but a later step of the build host's sequence not done is refused in one
    line naming that step, in the sequence's order (sources -> Ascend lock -> Ascend index)."""
    manifest = write_manifest(
        tmp_path / "versions.yaml",
        {"app": {"url": "https://github.com/acme/app.git", "ref": "main", "commit": str(mirror["head"])}},
    )
    _, dest, lock = fetch(tmp_path, manifest, str(mirror["base"]))
    lock_dir = tmp_path / "lockdir"
    lock_dir.mkdir()
    if ascend_lock is not None:
        (lock_dir / "npu-ascend.lock").write_text(ascend_lock)
    monkeypatch.setenv("ASCEND_INDEX_URL", index)
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    argv = ["--manifest", str(manifest), "ready", "--dest", str(dest), "--lock", str(lock),
            "--lock-dir", str(lock_dir), "--ca-bundle", str(ca)]  # fmt: skip
    capsys.readouterr()
    assert sources.main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and next_command in err[0], err
    # Once that step is done, the same check passes.
    (lock_dir / "npu-ascend.lock").write_text("triton-ascend==3.2.1 --hash=sha256:" + "0" * 64 + "\n")
    monkeypatch.setenv("ASCEND_INDEX_URL", "https://ascend.example.invalid/simple")
    assert sources.main(argv) == 0
    # The sources come first: a tampered tarball is named before anything about the Ascend index.
    monkeypatch.setenv("ASCEND_INDEX_URL", "")
    with next(dest.glob("app-*.tar")).open("ab") as fh:
        fh.write(b"\0" * 512)
    capsys.readouterr()
    assert sources.main(argv) == 1
    assert "make sources" in capsys.readouterr().err
