"""The bench driver (`python -m bench.run`) end to end on its one section that needs no cluster, so the driver's
own path (arguments, a section, the results files, --render) stays working in CI. No thresholds on times: only what
was written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bench.run ARGS` from the repository root, as `make bench` runs it."""
    return subprocess.run(
        [sys.executable, "-m", "bench.run", *args], capture_output=True, text=True, timeout=600, check=False, cwd=REPO
    )


def test_quick_cli_section_writes_its_own_results_files(tmp_path: Path) -> None:
    p = bench("--quick", "--sections", "cli", "--out", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert not (tmp_path / "results.json").exists(), "a QUICK run must not touch the full run's file"
    data = json.loads((tmp_path / "results-quick.json").read_text())
    ((run_id, meta),) = data["runs"].items()
    assert run_id.startswith("quick-") and meta["status"] == "complete"
    assert meta["sections"] == ["cli"] and meta["machine"]["nproc"] >= 1
    names = sorted(f["name"] for f in data["figures"])
    assert len(names) == 3, names
    assert names[0].startswith("plan qwen3.5-397b --nodes 16") and names[1].startswith("render --json")
    assert names[2].startswith("validate")
    for f in data["figures"]:
        assert f["run"] == run_id and f["value"] is not None and f["value"] > 0
    (runs,) = [f["detail"]["runs_s"] for f in data["figures"] if f["detail"]]
    assert {len(v) for v in runs.values()} == {5}, runs

    md = (tmp_path / "results-quick.md").read_text()
    assert md.startswith("# `make bench` results (QUICK)")
    assert f"`{run_id}`" in md and "| # | figure" in md
    assert all(n in md for n in names)

    (tmp_path / "results-quick.md").unlink()
    r = bench("--quick", "--render", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "results-quick.md").read_text() == md


def test_unknown_section_is_refused_with_the_choices(tmp_path: Path) -> None:
    p = bench("--sections", "cli,deplyo", "--out", str(tmp_path))
    assert p.returncode == 2
    assert "unknown section 'deplyo'" in p.stderr and "deploy" in p.stderr
    assert list(tmp_path.iterdir()) == []
