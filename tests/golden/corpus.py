"""The golden corpus: what the product prints and writes, captured so that a move of code can be diffed against it.

Each case is one file under tests/golden/expected/: a command's exit code, stdout and stderr, or the files a
command wrote. Paths below the test's temporary folder read `<TMP>`, times `<TIME>`, the host name `<HOST>` and the
checkout's commit `<COMMIT>`, so the corpus is the same on every machine. `tests/unit/test_golden.py` builds it and
diffs; `make golden` (GOLDEN_WRITE=1) writes it anew after an intended change, which the commit then names.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from verl_recipe.cli import main
from verl_recipe.recipes import recipe_names

EXPECTED = Path(__file__).parent / "expected"

# verl-recipe's own commands whose output is captured, by case name (stdout, stderr and the exit code).
# A name is a file name: letters, digits, dots and dashes.
Cases = dict[str, str]

TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)?|\d{8}T\d{6}Z")
HEX = re.compile(r"\b([0-9a-f]{40}|[0-9a-f]{12})\b(-dirty)?")
FREE = re.compile(r"\d+(\.\d+)? GB free at")
REPO = str(Path(__file__).resolve().parents[2])
HOST = "golden-host"  # socket.gethostname() while the corpus is built


class Masker:
    def __init__(self, tmp: Path) -> None:
        self.tmp = str(tmp)

    def __call__(self, text: str) -> str:
        text = text.replace(self.tmp, "<TMP>").replace(REPO, "<REPO>")
        text = TIME.sub("<TIME>", text)
        text = HEX.sub("<COMMIT>", text)
        return FREE.sub("<N> GB free at", text)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    try:
        rc = main(list(argv))
    except SystemExit as exc:  # argparse's own refusals
        rc = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return f"$ verl-recipe {' '.join(argv)}\nexit {rc}\n--- stdout\n{out}--- stderr\n{err}"


def files_of(folder: Path) -> str:
    """Every file below `folder`, by relative path, with its text (a symlink shows its target)."""
    parts = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_symlink():  # where it points, as a whole path (a relative target would climb out of the repo)
            parts.append(f"=== {rel} -> {os.path.normpath(path.parent / path.readlink())}\n")
        elif path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            if path.suffix == ".html":  # the pages: their size and title, not their bytes (plots are floats)
                title = re.search(r"<title>(.*?)</title>", text)
                parts.append(f"=== {rel} (html, {len(text.splitlines())} lines, title {title and title.group(1)})\n")
                parts.append(_html_text(text))
            elif path.name == "heartbeat":  # the supervisor's clock and pid: its keys, and the step it names
                beat = json.loads(text)
                parts.append(f"=== {rel} (keys {sorted(beat)}, step {beat.get('step')})\n")
            else:
                parts.append(f"=== {rel}\n{text}{'' if text.endswith(chr(10)) or not text else chr(10)}")
    return "".join(parts)


def _html_text(html: str) -> str:
    """A page's visible words, one block per line: what a reader sees, without the markup."""
    html = re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)
    html = re.sub(r"<svg\b.*?</svg>", "[plot]", html, flags=re.S)
    text = re.sub(r"<br\s*/?>|</(p|div|tr|li|h\d|td|th|section|summary|pre)>", "\n", html)
    text = re.sub(r"<[^>]+>", " ", text)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return "\n".join(line for line in lines if line) + "\n"


# ------------------------------------------------------------------------------------------------ the commands


def launch_cases(capsys: pytest.CaptureFixture[str], tmp: Path) -> Cases:
    from tests.unit.fixtures import make_shared, set_args

    cases: Cases = {"list": cli(capsys, "list"), "list--json": cli(capsys, "list", "--json")}
    for name in recipe_names():
        cases[f"render.{name}"] = cli(capsys, "render", name)
        cases[f"render.{name}--json"] = cli(capsys, "render", name, "--json")
        cases[f"validate.{name}"] = cli(capsys, "validate", name, "--skip-path-checks")
    cases["render.397b--set"] = cli(
        capsys, "render", "qwen3.5-397b", "--json", "--set", "ROLLOUT_N=8", "--set", "nnodes=16", "--set", "LR=2e-6"
    )
    cases["render.35b--extra"] = cli(
        capsys, "render", "qwen3.5-35b", "--json", "--", "actor_rollout_ref.rollout.n=8", "+trainer.val_before_train=1"
    )
    cases["render.35b--extra-length"] = cli(
        capsys, "render", "qwen3.5-35b", "--json", "--", "data.max_response_length=8192"
    )
    site = tmp / "site.yaml"
    secret = tmp / "secrets" / "wandb_api_key"
    secret.parent.mkdir()
    secret.write_text("golden-not-a-secret\n")
    secret.chmod(0o600)
    site.write_text(
        "NNODES: 16\nLOG_DIR: /mnt/shared/logs\nLOGGER: [console, file, wandb]\n"
        f"secret_files:\n  WANDB_API_KEY: {secret}\nenv:\n  HCCL_BUFFSIZE: 400\n"
    )
    cases["render.397b--site"] = cli(capsys, "render", "qwen3.5-397b", "--site", str(site))
    cases["render.397b--site--json"] = cli(capsys, "render", "qwen3.5-397b", "--site", str(site), "--json")
    refused: list[tuple[str, list[str]]] = [
        ("qwen3.5-397b", ["--set", "LR=abc", "--set", "GEN_MEM_UTIL=1.2", "--set", "TOTAL_EPOCHS=0"]),
        ("qwen3.5-397b", ["--set", "TP=3", "--set", "EP=7"]),
        ("qwen3.5-397b", ["--set", "NNODES=2"]),
        ("qwen3.5-35b-fsdp", ["--set", "FSDP_SIZE=0", "--set", "NO_SUCH=1"]),
        ("qwen3.5-35b", ["--set", "MAX_PROMPT_LENGTH=200000", "--set", "MAX_RESPONSE_LENGTH=70000"]),
        ("qwen3.5-35b", ["--set", "LOGGER=console"]),
        ("qwen3.5-35b", ["--", "actor_rollout_ref.rollout.n=800", "trainer.no_such_key=1"]),
        ("qwen3.5-35b", ["--set", "WANDB_API_KEY=x"]),
        ("qwen3.5-122b", ["--set", "ROLLOUT_N=64", "--set", "TRAIN_BATCH_SIZE=4096"]),
        ("qwen3.5-3b", []),
    ]
    for i, (recipe, args) in enumerate(refused):
        cases[f"validate.refused-{i:02d}"] = cli(capsys, "validate", recipe, "--skip-path-checks", *args)
    shared = make_shared(tmp / "shared")
    cases["validate.397b-paths"] = cli(capsys, "validate", "qwen3.5-397b", *set_args(shared))
    missing = dict(shared, MODEL_PATH=str(tmp / "no-model"), TRAIN_FILES=str(tmp / "no.parquet"))
    cases["validate.397b-missing-paths"] = cli(capsys, "validate", "qwen3.5-397b", *set_args(missing))
    for recipe, nodes in (("qwen3.5-397b", "16"), ("qwen3.5-122b", "4"), ("qwen3.5-35b-fsdp", "2")):
        cases[f"plan.{recipe}-{nodes}"] = cli(capsys, "plan", recipe, "--nodes", nodes, "--top", "5")
    cases["plan.qwen3.5-397b-8--json"] = cli(capsys, "plan", "qwen3.5-397b", "--nodes", "8", "--top", "3", "--json")
    return cases


FAKE_VERL = """
import os, shutil, sys
shutil.copy({sample!r}, os.environ["VERL_FILE_LOGGER_PATH"])
print("fake verl: 3 steps")
sys.exit({code})
"""


def run_record_cases(capsys: pytest.CaptureFixture[str], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Cases:
    """A launch against a stand-in verl that logs three recorded steps: the run folder it leaves."""
    from tests.unit.fixtures import install_fake_verl, make_shared, set_args

    sample = Path(__file__).parents[1] / "unit" / "data" / "sample-metrics.jsonl"
    install_fake_verl(tmp / "verl", monkeypatch, FAKE_VERL.format(sample=str(sample), code=0))
    shared = make_shared(tmp / "run-shared", model="qwen3.5-35b-a3b")
    cases: Cases = {}
    runs_of = (
        ("plain", []),
        ("rollout-n", ["--", "actor_rollout_ref.rollout.n=8"]),
        ("response-length", ["--", "data.max_response_length=4096"]),  # an override that drives the memory plan
    )
    for name, extra in runs_of:
        log_dir = tmp / f"logs-{name}"
        args = set_args(dict(shared, LOG_DIR=str(log_dir)))
        out = cli(capsys, "launch", "qwen3.5-35b-fsdp", "--set", "TOTAL_TRAINING_STEPS=3", *args, *extra)
        runs = sorted(log_dir.rglob("runs/*"))
        record = files_of(runs[0]) if runs else "(no run folder)\n"
        cases[f"launch.35b-fsdp-{name}"] = out + "--- run folder\n" + record
        if runs:
            cases[f"report.run-{name}"] = cli(capsys, "report", str(runs[0])) + page_of(runs[0] / "run.html")
            baseline = tmp / f"baseline-{name}.json"
            cases[f"compare.save-{name}"] = cli(capsys, "compare", str(runs[0]), "--save-baseline", str(baseline))
    return cases


def page_of(page: Path) -> str:
    """A page the command wrote, as its visible text."""
    return f"--- {page.name}\n" + (_html_text(page.read_text(encoding="utf-8")) if page.exists() else "(none)\n")


def observer_cases(capsys: pytest.CaptureFixture[str], tmp: Path) -> Cases:
    from tests.unit.test_compare import make_run, scaled, stream
    from tests.unit.test_diagnose import EXCERPTS

    cases: Cases = {}
    base = make_run(tmp, "base", stream(16))
    slow = make_run(tmp, "slow", scaled(stream(16), "timing_s/step", 1.1))
    short = make_run(tmp, "short", stream(3))
    cases["compare.same"] = cli(capsys, "compare", str(base), "--baseline", str(base))
    cases["compare.slow"] = cli(capsys, "compare", str(slow), "--baseline", str(base))
    cases["compare.short"] = cli(capsys, "compare", str(short), "--baseline", str(base))
    cases["compare.missing"] = cli(capsys, "compare", str(tmp / "nope"), "--baseline", str(base))
    logs = tmp / "diag"
    logs.mkdir()
    for i, (_sig, _src, excerpt) in enumerate(EXCERPTS):
        (logs / f"case-{i:02d}.log").write_text(f"INFO step 1 done\n{excerpt}\n", encoding="utf-8")
        cases[f"diagnose.excerpt-{i:02d}"] = cli(capsys, "diagnose", str(logs / f"case-{i:02d}.log"))
    unknown = tmp / "unknown.log"
    unknown.write_text("INFO step 1\nTraceback (most recent call last):\nRuntimeError: worker died\n")
    cases["diagnose.unknown"] = cli(capsys, "diagnose", str(unknown))
    cases["diagnose.unknown--json"] = cli(capsys, "diagnose", "--json", str(unknown))
    cases["diagnose.missing"] = cli(capsys, "diagnose", str(tmp / "nope"))
    return cases


def readiness_cases(capsys: pytest.CaptureFixture[str], tmp: Path) -> Cases:
    """The Ansible side's messages and the readiness page, from reports built with the project's own code."""
    from tests.ansible.test_units import _every_inventory_problem
    from tests.browser import reports

    cases: Cases = {}
    for name, doc in (
        ("preflight-healthy-4", reports.preflight_report(4, 16)),
        ("preflight-faulty-16", reports.preflight_report(16, 16, reports.FAULTY_16)),
        ("rehearsal-16", reports.rehearsal_report(16, 16, slow="a3-04", broken="a3-09")),
    ):
        folder = tmp / name
        folder.mkdir()
        path = reports.write(folder / f"{name}.json", doc)
        summary = ""
        if "failures" in doc:
            summary = "--- failure table\n" + reports.rep.render(doc["failures"]) + "\n"
            summary += "--- rows\n" + "".join(json.dumps(r, sort_keys=True) + "\n" for r in doc["rows"])
        cases[f"report.{name}"] = cli(capsys, "report", str(path)) + summary + page_of(path.with_suffix(".html"))
    cases["report.not-a-report"] = cli(capsys, "report", str(tmp / "preflight-healthy-4" / "nope.json"))
    problems = _every_inventory_problem(tmp)
    cases["inventory.problems"] = "".join(line + "\n" for line in problems)
    return cases


def doctor_cases(capsys: pytest.CaptureFixture[str], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Cases:
    """`doctor --json` on a fixture root: a simulated node as deploy.yml writes it, with the sim runtime's
    packages (the dev venv has no Ray)."""
    from verl_recipe import doctor
    from verl_recipe.manifest import load_manifest

    shared = tmp / "doctor" / "shared"
    for d in ("models/m", "data", "checkpoints"):
        (shared / d).mkdir(parents=True)
    for f in ("train.parquet", "test.parquet"):
        (shared / "data" / f).write_text("x")
    sys_net = tmp / "doctor" / "net"
    for nic in ("lo", "eth0"):
        (sys_net / nic).mkdir(parents=True)
    dev = tmp / "doctor" / "dev"
    dev.mkdir()
    for name in [*(f"davinci{i}" for i in range(15)), "davinci_manager", "devmm_svm", "hisi_hdc"]:
        (dev / name).write_text("")
    env = {
        "VERL_RECIPE_SIMULATED": "1",
        "HCCL_SOCKET_IFNAME": "eth0",
        "GLOO_SOCKET_IFNAME": "eth0",
        "TP_SOCKET_IFNAME": "=eth1",
        "SHARED_ROOT": str(shared),
        "MODEL_PATH": str(shared / "models/m"),
        "TRAIN_FILES": str(shared / "data/train.parquet"),
        "VAL_FILES": str(shared / "data/none.parquet"),
        "CKPT_DIR": str(shared / "checkpoints" / "run1"),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for var in ("HCCL_IF_IP", "NODE_IP", "NODE_DIES", "NDEVICES_PER_NODE", "VERL_RECIPE_DEV_DIR", "RAY_ADDRESS"):
        monkeypatch.delenv(var, raising=False)
    manifest = load_manifest()
    pk = manifest["python_packages"]
    have = {doctor.DIST_NAMES[k]: str(pk[k]) for k in doctor.SIM_STRICT}
    have |= {"torch": "2.13.0+cpu", "verl": str(manifest["git_sources"]["verl"]["version"])}
    monkeypatch.setattr(doctor.packages, "installed_version", lambda dist: have.get(dist))
    args = ["--sys-net", str(sys_net), "--dev-dir", str(dev), "--min-free-gb", "0"]
    args += ["--driver-info", str(tmp / "doctor" / "version.info"), "--record-dir", str(tmp / "doctor" / "record")]
    return {"doctor--json": cli(capsys, "doctor", "--json", *args), "doctor": cli(capsys, "doctor", *args)}


def rehearsal_fields() -> Cases:
    from verl_recipe.rehearse import NodeReport

    return {"contract.rehearsal-node": json.dumps(asdict(NodeReport(node="a3-01", ip="10.0.0.1")), indent=1) + "\n"}


def build(tmp: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cases:
    mask = Masker(tmp)
    monkeypatch.setattr(socket, "gethostname", lambda: HOST)
    builders: list[Callable[[], Cases]] = [
        lambda: launch_cases(capsys, tmp),
        lambda: observer_cases(capsys, tmp),
        lambda: readiness_cases(capsys, tmp),
        lambda: doctor_cases(capsys, tmp, monkeypatch),
        lambda: run_record_cases(capsys, tmp, monkeypatch),
        rehearsal_fields,
    ]
    cases: Cases = {}
    for make in builders:
        for name, text in make().items():
            assert name not in cases, name
            cases[name] = mask(text)
    return cases


def read_expected() -> dict[str, str]:
    return {p.name.removesuffix(".txt"): p.read_text(encoding="utf-8") for p in sorted(EXPECTED.glob("*.txt"))}


def write_expected(cases: dict[str, Any]) -> None:
    EXPECTED.mkdir(exist_ok=True)
    for old in EXPECTED.glob("*.txt"):
        old.unlink()
    for name, text in cases.items():
        (EXPECTED / f"{name}.txt").write_text(text, encoding="utf-8")
