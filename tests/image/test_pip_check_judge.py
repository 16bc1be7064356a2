"""docker/npu/pip_check.py: the NPU build's `pip check`, judged against docker/lock/accepted-conflicts.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from simkit.paths import load_by_path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docker" / "npu" / "pip_check.py"
ACCEPTED = ROOT / "docker" / "lock" / "accepted-conflicts.toml"
pip_check = load_by_path("verl_recipe_pip_check", SCRIPT)

# What pip 24/25 print for the accepted conflicts (specifiers in pip's own order, which differs from upstream's).
ACCEPTED_LINES = [
    "vllm 0.18.0+empty has requirement transformers<5,>=4.56.0, but you have transformers 5.3.0.dev0.",
    "vllm 0.18.0+empty has requirement opencv-python-headless>=4.13.0, but you have opencv-python-headless 4.11.0.86.",
]


def judge(tmp_path: Path, lines: list[str], *extra: str) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "pip-check.txt"
    out.write_text("\n".join(lines) + "\n")
    return subprocess.run([sys.executable, str(SCRIPT), str(ACCEPTED), "--pip-check-output", str(out), *extra],
                          capture_output=True, text=True, check=False)  # fmt: skip


def test_the_accepted_conflicts_pass(tmp_path: Path) -> None:
    res = judge(tmp_path, ACCEPTED_LINES)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("accepted:") == 2


@pytest.mark.parametrize(
    "line",
    [
        # What vllm-ascend's tag v0.18.0 declared; its releases/v0.18.0 branch (the pin) names the manifest's versions.
        "vllm-ascend 0.18.0 has requirement torch-npu==2.9.0, but you have torch-npu 2.9.0.post2.",
        "vllm-ascend 0.18.0 has requirement triton-ascend==3.2.0, but you have triton-ascend 3.2.1.",
    ],
)
def test_the_tags_conflicts_are_no_longer_accepted(tmp_path: Path, line: str) -> None:
    assert judge(tmp_path, [line]).returncode == 1
    assert judge(tmp_path, [line], "--rehearsal").returncode == 1


def test_anything_else_fails_with_the_line(tmp_path: Path) -> None:
    extra = "verl 0.8.0 requires torchdata, which is not installed."
    res = judge(tmp_path, [*ACCEPTED_LINES, extra])
    assert res.returncode == 1
    assert f"NOT ACCEPTED: {extra}" in res.stderr and "accepted-conflicts.toml" in res.stderr


def test_same_package_other_requirement_is_not_accepted(tmp_path: Path) -> None:
    """Accepting vLLM's transformers cap must not accept a different requirement on the same package."""
    res = judge(
        tmp_path, ["vllm 0.18.0+empty has requirement transformers<4.50, but you have transformers 5.3.0.dev0."]
    )
    assert res.returncode == 1


def test_rehearsal_only_entries_need_the_flag(tmp_path: Path) -> None:
    line = "vllm-ascend 0.18.0 requires triton-ascend, which is not installed."  # pip names no specifier here
    assert judge(tmp_path, [line]).returncode == 1
    assert judge(tmp_path, [line], "--rehearsal").returncode == 0


def test_unknown_output_is_not_silently_passed(tmp_path: Path) -> None:
    res = judge(tmp_path, ["something pip never printed before"])
    assert res.returncode == 1 and "something pip never printed" in res.stderr


def test_clean_pip_check_passes_and_notes_stale_entries(tmp_path: Path) -> None:
    res = judge(tmp_path, ["No broken requirements found."])
    assert res.returncode == 0
    assert "no longer occurs" in res.stdout


@pytest.mark.parametrize(
    "toml",
    [
        '[[accepted]]\npackage = "vllm"\nrequirement = "x"\nkind = "conflict"\n',
        '[[accepted]]\npackage = "vllm"\nrequirement = "x"\nkind = "maybe"\nreason = "r"\n',
        '[[accepted]]\npackage = "vllm"\nrequirement = "x"\nkind = "missing"\nreason = "r"\nonly = "a3"\n',
        "not toml [",
    ],
)
def test_a_bad_accepted_list_is_a_usage_error(tmp_path: Path, toml: str) -> None:
    bad = tmp_path / "accepted.toml"
    bad.write_text(toml)
    out = tmp_path / "pip-check.txt"
    out.write_text("No broken requirements found.\n")
    res = subprocess.run([sys.executable, str(SCRIPT), str(bad), "--pip-check-output", str(out)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert res.returncode == 2 and res.stderr.startswith("pip-check: ")
    assert len(res.stderr.strip().splitlines()) == 1


def test_requirement_spelling_and_order_do_not_matter() -> None:
    assert pip_check.norm_req("transformers<5,>=4.56.0") == pip_check.norm_req("transformers >= 4.56.0, < 5")
    assert pip_check.norm_req("Torch_NPU==2.9.0") == pip_check.norm_req("torch-npu==2.9.0")
