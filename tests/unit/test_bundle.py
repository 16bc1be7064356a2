"""`verl-recipe bundle RUN_DIR` over a synthetic run folder and LOG_DIR/nodes (review/bundle.py, review/redact.py), and
the node's side of the evidence (cluster/evidence.py): the size cap, redaction with a planted token, links and loops, a
file vanishing while read, the MANIFEST."""

from __future__ import annotations

import json
import os
import tarfile
import time
from pathlib import Path

import pytest
from verl_recipe.cli import main as cli_main
from verl_recipe.cluster import evidence
from verl_recipe.review import bundle as bundle_mod
from verl_recipe.review.redact import Redactor, Secrets

TOKEN = "rtk-PLANTED-ray-token-0123456789abcdef0123456789"  # a Ray token is one word of at least 32 characters
WANDB = "wandb-PLANTED-key-9f8e7d6c5b4a"
HOSTS = ("a3-01", "a3-02", "a3-03")
STARTED = "2026-01-02T03:04:05Z"


def _epoch(text: str) -> float:
    import calendar

    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """LOG_DIR with one finished run of three hosts, their node logs, plogs and evidence, and the secrets the site
    holds: the Ray token and one secret file, both planted in the logs."""
    log_dir = tmp_path / "runs"
    run = log_dir / "verl_recipe" / "exp" / "runs" / "20260102T030405Z"
    run.mkdir(parents=True)
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "WANDB_API_KEY").write_text(WANDB + "\n")
    (secrets / "WANDB_API_KEY").chmod(0o600)
    token = tmp_path / "ray_auth_token"
    token.write_text(TOKEN + "\n")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    monkeypatch.setenv("VERL_RECIPE_SECRETS_DIR", str(secrets))
    site_file = tmp_path / "site.yaml"
    site_file.write_text("secret_files: {WANDB_API_KEY: /etc/verl-recipe/secrets/WANDB_API_KEY}\n")
    monkeypatch.setenv("VERL_RECIPE_SITE", str(site_file))
    settings = {
        "recipe": "qwen3.5-35b-fsdp",
        "started_utc": STARTED,
        "settings": {"LOG_DIR": {"value": str(log_dir), "from": "env"}},
        "secret_files": {"WANDB_API_KEY": {"path": str(secrets / "WANDB_API_KEY"), "from": "site"}},
    }
    (run / "settings.json").write_text(json.dumps(settings))
    (run / "launch.json").write_text('{"recipe": "qwen3.5-35b-fsdp", "env": {}, "argv": []}')
    (run / "train.log").write_text(f"step:1 - loss 0.5\nwandb login {WANDB}\nerror: the end\n")
    (run / "outcome.json").write_text(json.dumps({"exit_code": 1, "ended_utc": "2026-01-02T04:00:00Z"}))
    nodes = log_dir / "nodes"
    nodes.mkdir()
    (run / "nodes").symlink_to(os.path.relpath(nodes, run))
    key = evidence.run_key(run, log_dir)
    during = _epoch(STARTED) + 60
    for host in HOSTS:
        (nodes / f"{host}.log").write_text(f"{host}: starting Ray head with token {TOKEN}\n")
        plog = evidence.cann_log_dir(log_dir, host) / "debug" / "plog" / "plog-123_20260102030500.log"
        plog.parent.mkdir(parents=True)
        plog.write_text(f"[ERROR] HCCL(123,python):2026-01-02-03:05:00 {host} [HeartbeatAbnormal] {TOKEN}\n")
        os.utime(plog, (during, during))
        old = plog.parent / "plog-99_20250101000000.log"
        old.write_text("a plog of an earlier run\n")
        os.utime(old, (during - 86400, during - 86400))
        ev = evidence.evidence_dir(log_dir, host, key)
        (ev / "ray").mkdir(parents=True)
        (ev / evidence.NPU_SMI_BEFORE).write_text("| npu-smi 25.2.1 Version: 25.2.1 |\n")
        (ev / evidence.NPU_SMI_AFTER).write_text("| npu-smi 25.2.1 Version: 25.2.1 |\n")
        (ev / "kernel-tail.txt").write_text(
            "[Fri Jan  2 03:30:00 2026] Out of memory: Killed process 4242 (ray::Worker)\n"
        )
        (ev / "ray" / "raylet.out").write_text(f"raylet auth {TOKEN}\n")
    rehearsals = run.parent.parent / "rehearsals"
    rehearsals.mkdir()
    (rehearsals / "3-nodes.json").write_text('{"ok": true}')
    return {"log_dir": log_dir, "run": run, "nodes": nodes, "token": token, "secrets": secrets}


def members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        out = {}
        for m in tar.getmembers():
            assert m.isfile(), f"{m.name}: an archive of plain files only"
            f = tar.extractfile(m)
            assert f is not None
            out[m.name.split("/", 1)[1]] = f.read()
        return out


def leaks(files: dict[str, bytes], *secrets: str) -> list[str]:
    """Every member (name or content) holding any of the secrets, or a 12-character piece of one."""
    found = []
    for name, data in files.items():
        for s in secrets:
            pieces = {s[i : i + 12] for i in range(len(s) - 11)}
            if any(p.encode() in data or p in name for p in pieces):
                found.append(name)
    return found


def make_bundle(run: Path, *extra: str) -> tuple[int, Path | None, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli_main(["bundle", str(run), *extra])
    lines = out.getvalue().split()
    return rc, (Path(lines[-1]) if rc == 0 and lines else None), err.getvalue()


def test_the_bundle_holds_every_hosts_files_and_no_secret(site: dict[str, Path]) -> None:
    rc, archive, err = make_bundle(site["run"])
    assert rc == 0, err
    assert archive is not None and archive.parent == site["run"] and archive.name.startswith("bundle-exp-")
    files = members(archive)
    for host in HOSTS:
        for name in ("node.log", "npu-smi-before.txt", "npu-smi-after.txt", "kernel-tail.txt", "ray/raylet.out"):
            assert f"hosts/{host}/{name}" in files, (host, name, sorted(files))
        assert f"hosts/{host}/cann/debug/plog/plog-123_20260102030500.log" in files
        assert f"hosts/{host}/cann/debug/plog/plog-99_20250101000000.log" not in files, "an earlier run's plog"
    assert {"run/train.log", "run/settings.json", "run/outcome.json", "experiment/rehearsals/3-nodes.json"} <= set(
        files
    )
    assert "site/site.yaml" in files
    # the leak search: the planted token and key appear in seven files above, and in none of the archive's
    assert leaks(files, TOKEN, WANDB) == []
    assert b"[REDACTED:ray-token]" in files["hosts/a3-02/cann/debug/plog/plog-123_20260102030500.log"]
    assert b"wandb login [REDACTED:WANDB_API_KEY]" in files["run/train.log"]
    assert b"[HeartbeatAbnormal]" in files["hosts/a3-03/cann/debug/plog/plog-123_20260102030500.log"], "the rest stays"
    # ... and the search itself finds what is there
    assert leaks({"x": f"..{TOKEN[5:20]}..".encode()}, TOKEN) == ["x"]
    manifest = files["MANIFEST.txt"].decode()
    assert "hosts: a3-01 a3-02 a3-03" in manifest
    assert "3 CANN log file(s) written outside the run's time" in manifest
    assert "lacks" not in manifest, manifest
    assert TOKEN not in manifest and "ray-token" in manifest and "WANDB_API_KEY" in manifest
    assert oct(archive.stat().st_mode & 0o777) == "0o600"


def test_the_cap_cuts_the_biggest_files_from_the_front_and_says_so(site: dict[str, Path]) -> None:
    big = site["nodes"] / "a3-01.log"
    lines = [f"line {i:07d} of the node log\n" for i in range(80000)]  # about 2.2 MB
    big.write_text("".join(lines))
    rc, archive, err = make_bundle(site["run"], "--max-mb", "1")
    assert rc == 0, err
    assert archive is not None
    files = members(archive)
    total = sum(len(v) for k, v in files.items() if k != "MANIFEST.txt")
    assert total <= 2**20 + 4096, total  # the cap, and the redaction markers' few extra bytes
    kept = files["hosts/a3-01/node.log"]
    assert kept.endswith(lines[-1].encode()), "the tail is kept"
    assert not kept.startswith(lines[0].encode()), "the front is cut"
    assert files["run/train.log"].startswith(b"step:1"), "the small files stay whole"
    manifest = files["MANIFEST.txt"].decode()
    assert "cut: the biggest files did not fit the cap" in manifest
    assert f"hosts/a3-01/node.log  {len(kept)} bytes  (cut: its last {len(kept)} of {big.stat().st_size} bytes" in (
        manifest
    )


def test_a_node_log_ends_where_the_run_ended(site: dict[str, Path]) -> None:
    """A node log holds its host's whole life: a bundle made after later runs keeps its part up to this run's end
    (node_logs_at_end.json, as diagnose reads it), and a cut keeps the tail of that part, not the later runs'."""
    log = site["nodes"] / "a3-02.log"
    run_lines = [f"line {i:07d} of this run\n" for i in range(60000)]  # about 1.4 MB
    log.write_text("".join(run_lines))
    end = log.stat().st_size
    (site["run"] / "node_logs_at_end.json").write_text(json.dumps({"a3-02.log": end}))
    later = "".join(f"line {i:07d} of a later run: ModuleNotFoundError\n" for i in range(40000))
    with log.open("a") as fh:
        fh.write(later)
    rc, archive, err = make_bundle(site["run"])
    assert rc == 0 and archive is not None, err
    files = members(archive)
    assert files["hosts/a3-02/node.log"] == "".join(run_lines).encode(), "up to the run's end, from the node's start"
    manifest = files["MANIFEST.txt"].decode()
    total = log.stat().st_size
    assert f"hosts/a3-02/node.log  {end} bytes  (the run's part: its first {end} of {total} bytes" in manifest
    assert files["hosts/a3-01/node.log"].startswith(b"a3-01: starting Ray head"), "no window recorded: whole"
    rc, archive, err = make_bundle(site["run"], "--max-mb", "1")
    assert rc == 0 and archive is not None, err
    kept = members(archive)["hosts/a3-02/node.log"]
    assert kept.endswith(run_lines[-1].encode()) and b"later run" not in kept, "the cut keeps the run's last lines"
    assert len(kept) < end
    # an end the file no longer reaches: the log was replaced since, so it comes whole
    log.write_text("a3-02: a new node log\n")
    rc, archive, err = make_bundle(site["run"])
    assert rc == 0 and archive is not None, err
    assert members(archive)["hosts/a3-02/node.log"] == b"a3-02: a new node log\n"


def test_a_secret_across_the_cut_is_masked_whole() -> None:
    secrets = Secrets()
    secrets.add("tok", TOKEN.encode())
    data = b"x" * 100 + TOKEN.encode() + b"y" * 50
    # the cut falls in the middle of the token: none of it comes out, its marker does
    cut = 100 + len(TOKEN) // 2
    out = b"".join(Redactor(secrets, block=16).stream([data[i : i + 7] for i in range(0, len(data), 7)], skip=cut))
    assert out == b"[REDACTED:tok]" + b"y" * 50
    whole = Redactor(secrets, block=16)
    assert whole.text(data) == b"x" * 100 + b"[REDACTED:tok]" + b"y" * 50 and whole.count == 1


def test_fit_cuts_only_what_is_over_one_common_size() -> None:
    assert bundle_mod.fit([10, 20, 30], 60) is None
    limit = bundle_mod.fit([10, 20, 1000, 2000], 130)
    assert limit == 50 and 10 + 20 + 2 * limit <= 130


def test_links_loops_and_pipes_are_listed_never_followed(site: dict[str, Path], tmp_path: Path) -> None:
    run, nodes = site["run"], site["nodes"]
    outside = tmp_path / "outside.txt"
    outside.write_text("not the run's\n")
    (run / "escape.log").symlink_to(outside)
    (run / "loop").mkdir()
    (run / "loop" / "again").symlink_to("..")
    os.mkfifo(run / "pipe.log")
    ev = evidence.evidence_dir(site["log_dir"], "a3-02", evidence.run_key(run, site["log_dir"]))
    (ev / "passwd").symlink_to("/etc/passwd")
    rc, archive, err = make_bundle(run)  # a pipe opened would block here
    assert rc == 0, err
    assert archive is not None
    files = members(archive)
    assert not any("escape" in k or "passwd" in k or "pipe" in k or "again" in k for k in files), sorted(files)
    manifest = files["MANIFEST.txt"].decode()
    assert f"run/escape.log: a symbolic link to {outside}, not followed" in manifest
    assert "run/loop/again: a symbolic link to .., not followed" in manifest
    assert "run/pipe.log: not a regular file" in manifest
    assert "hosts/a3-02/passwd: a symbolic link to /etc/passwd, not followed" in manifest
    # a nodes link that leads elsewhere is not the record's: no host's file comes through it
    (run / "nodes").unlink()
    (run / "nodes").symlink_to(tmp_path)
    rc, archive, err = make_bundle(run)
    assert rc == 0 and archive is not None, err
    files = members(archive)
    assert not any(k.startswith("hosts/") for k in files)
    assert "run/nodes: not the record's link to" in files["MANIFEST.txt"].decode()
    assert nodes.is_dir()


def test_a_file_that_vanishes_while_read_is_noted(site: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    gone = site["nodes"] / "a3-03.log"
    real = bundle_mod._read_tail

    def vanish(path: Path, *args: object) -> tuple[int, int, str]:
        if path == gone:
            gone.unlink()
        return real(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(bundle_mod, "_read_tail", vanish)
    rc, archive, err = make_bundle(site["run"])
    assert rc == 0, err
    assert archive is not None
    files = members(archive)
    assert "hosts/a3-03/node.log" not in files and "hosts/a3-02/node.log" in files
    manifest = files["MANIFEST.txt"].decode()
    assert "hosts/a3-03/node.log: vanished while read" in manifest
    assert "a3-03 lacks: node.log" in manifest


def test_a_host_without_its_snapshots_is_named_in_the_manifest(site: dict[str, Path]) -> None:
    ev = evidence.evidence_dir(site["log_dir"], "a3-02", evidence.run_key(site["run"], site["log_dir"]))
    (ev / evidence.NPU_SMI_BEFORE).unlink()
    (ev / "kernel-tail.txt").unlink()
    rc, archive, err = make_bundle(site["run"])
    assert rc == 0 and archive is not None, err
    assert "a3-02 lacks: npu-smi-before.txt, kernel-tail.txt" in members(archive)["MANIFEST.txt"].decode()


def test_an_earlier_bundle_is_not_bundled_again(site: dict[str, Path]) -> None:
    rc, first, _ = make_bundle(site["run"])
    assert rc == 0 and first is not None
    rc, second, err = make_bundle(site["run"], "--out", str(site["run"] / "bundle-second.tar.gz"))
    assert rc == 0 and second is not None, err
    assert not any(k.startswith("run/bundle-") for k in members(second))


@pytest.mark.parametrize(
    ("arg", "words"),
    [
        ("{tmp}/nowhere", "is not a folder"),
        ("{tmp}", "is not a run folder"),
        ("{log}/verl_recipe/exp", "is not a run folder"),
    ],
)
def test_a_folder_that_is_not_a_run_folder_is_refused_in_one_line(
    site: dict[str, Path], tmp_path: Path, arg: str, words: str
) -> None:
    rc, archive, err = make_bundle(Path(arg.format(tmp=tmp_path, log=site["log_dir"])))
    assert rc == 2 and archive is None
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: bundle: ") and words in lines[0] and "fix:" in lines[0]


def test_a_secret_that_cannot_be_read_stops_the_bundle(site: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    locked = site["secrets"] / "WANDB_API_KEY"
    read_bytes = Path.read_bytes

    def refuse(self: Path) -> bytes:  # what a non-root caller meets on a root-only file (root reads any file)
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    rc, archive, err = make_bundle(site["run"])
    assert rc == 2 and archive is None
    assert "cannot be read" in err and "fix: run as root" in err and len(err.strip().splitlines()) == 1
    assert not list(site["run"].glob("bundle-*")) and not list(site["run"].glob(".bundle-*"))


def test_bad_max_mb_is_refused(site: dict[str, Path]) -> None:
    rc, _, err = make_bundle(site["run"], "--max-mb", "0")
    assert rc == 2 and "--max-mb 0.0 is out of range" in err


def test_locate_names_the_run_for_the_playbook(site: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["bundle", "--locate", str(site["run"])]) == 0
    where = json.loads(capsys.readouterr().out)
    assert where["key"] == "verl_recipe/exp/runs/20260102T030405Z"
    assert where["log_dir"] == str(site["log_dir"].resolve())
    assert where["started_epoch"] == int(_epoch(STARTED))


# ---- the node's side


def test_the_node_exports_the_cann_log_folder_beside_its_node_log() -> None:
    assert evidence.node_cann_env("/mnt/shared/runs", "a3-02") == {
        "ASCEND_PROCESS_LOG_PATH": "/mnt/shared/runs/nodes/a3-02/cann"
    }
    assert evidence.node_cann_env(None, "a3-02") == {}


def test_a_request_is_answered_with_npu_smi_and_the_jobs_ray_logs(site: dict[str, Path], tmp_path: Path) -> None:
    log_dir, run = site["log_dir"], site["run"]
    tool = tmp_path / "npu-smi"
    tool.write_text("import sys\nprint('| npu-smi 25.2.1   Version: 25.2.1 |', sys.argv[1:])\n")
    ray_logs = tmp_path / "ray-logs"
    ray_logs.mkdir()
    (ray_logs / "worker-1.out").write_text("this job's worker\n")
    (ray_logs / "worker-0.out").write_text("an earlier job's worker\n")
    os.utime(ray_logs / "worker-0.out", (1000, 1000))
    (ray_logs / "link.out").symlink_to("/etc/passwd")
    path = evidence.request_snapshots(run, log_dir, evidence.AFTER, since=time.time() - 60)
    assert path is not None and path.parent == log_dir / "nodes" / ".requests"
    request = json.loads(path.read_text())
    real_argv = evidence.npu_smi_argv
    try:
        evidence.npu_smi_argv = lambda simulated, tool=str(tool): real_argv(True, tool)  # type: ignore[assignment]
        folder = evidence.answer(request, str(log_dir), "a3-09", simulated=True, ray_logs=ray_logs)
    finally:
        evidence.npu_smi_argv = real_argv  # type: ignore[assignment]
    assert folder == log_dir / "nodes" / "a3-09" / "evidence" / "verl_recipe/exp/runs/20260102T030405Z"
    assert "npu-smi 25.2.1" in (folder / "npu-smi-after.txt").read_text()
    assert sorted(p.name for p in (folder / "ray").iterdir()) == ["worker-1.out"]


@pytest.mark.parametrize(
    "request_body",
    [{"run": "../../etc", "when": "before"}, {"run": "/etc", "when": "after"}, {"run": "a/b", "when": "now"}, [1]],
)
def test_a_request_cannot_write_outside_the_nodes_folder(site: dict[str, Path], request_body: object) -> None:
    with pytest.raises(ValueError, match="request"):
        evidence.answer(request_body, str(site["log_dir"]), "a3-01", simulated=False)


def test_npu_smi_that_cannot_run_is_written_down_not_raised(tmp_path: Path) -> None:
    text = evidence.npu_smi_text([str(tmp_path / "no-npu-smi"), "info"])
    assert text.startswith("# ") and "did not run" in text


def test_only_the_simulated_ray_nodes_get_the_npu_smi_stand_in(tmp_path: Path) -> None:
    from tests.unit.test_compose import render

    sim = render(tmp_path, "compose.yaml", "compose.sim.yaml")["services"]
    for name, svc in sim.items():
        sources = {v["target"]: v["source"] for v in svc["volumes"]}
        if name in ("ray-head", "ray-worker"):
            assert sources["/usr/local/bin/npu-smi"] == "/usr/local/sbin/npu-smi", name
            assert {"/usr/lib/verl-sim", "/etc/verl-sim"} <= set(sources), "the stand-in's modules and state"
        else:
            assert not {"/usr/local/bin/npu-smi", "/usr/lib/verl-sim"} & set(sources), name
    real = render(tmp_path, "compose.yaml")["services"]
    assert not any("verl-sim" in str(v["source"]) for svc in real.values() for v in svc["volumes"]), "A3 has none"
