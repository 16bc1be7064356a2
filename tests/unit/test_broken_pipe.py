"""A reader that closes the output early (`verl-recipe diagnose RUN | head`): every command that writes to stdout
stops quietly with 141 (the shell's 128 + SIGPIPE), never a traceback or "Exception ignored". The pipe's reading end
is closed before the command starts, so its first write fails every time, whatever its size."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from verl_recipe.exitcodes import EXIT_BROKEN_PIPE

from .fixtures import make_shared

COMMANDS = [
    ["list"],
    ["list", "--json"],
    ["render", "qwen3.5-397b", "--skip-path-checks"],
    ["render", "qwen3.5-35b", "--json", "--skip-path-checks"],
    ["plan", "qwen3.5-35b", "--nodes", "1", "--skip-path-checks", "--top", "3"],
]
# argparse's own help writer drops a write that fails (argparse._print_message): quiet, and its exit 0 stands
HELP = [["--help"], ["export", "--help"], ["runs", "--help"]]


def closed_pipe_run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(
            [sys.executable, "-c", "import sys; from verl_recipe.cli import main; sys.exit(main())", *args],
            stdout=w, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=cwd, timeout=120, check=False,
        )  # fmt: skip
    finally:
        os.close(w)
    return subprocess.CompletedProcess(p.args, p.returncode, b"", p.stderr)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_a_closed_output_ends_the_command_quietly(args: list[str], tmp_path: Path) -> None:
    p = closed_pipe_run(args, tmp_path)
    err = p.stderr.decode(errors="replace")
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipeError" not in err, err
    assert p.returncode == EXIT_BROKEN_PIPE, (p.returncode, err)


@pytest.mark.parametrize("args", HELP, ids=lambda a: " ".join(a))
def test_help_into_a_closed_output_is_quiet(args: list[str], tmp_path: Path) -> None:
    p = closed_pipe_run(args, tmp_path)
    err = p.stderr.decode(errors="replace")
    assert "Traceback" not in err and "Exception ignored" not in err and "BrokenPipeError" not in err, err
    assert p.returncode in (0, EXIT_BROKEN_PIPE), (p.returncode, err)


def test_an_open_output_is_not_mistaken_for_a_closed_one(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-c", "import sys; from verl_recipe.cli import main; sys.exit(main())", "list"],
        capture_output=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert p.returncode == 0 and b"qwen3.5-397b" in p.stdout, p.stderr


def test_diagnose_into_a_closed_pipe(tmp_path: Path) -> None:
    paths = make_shared(tmp_path / "shared")
    run = Path(paths["LOG_DIR"]) / "p" / "e" / "runs" / "20261205T000000Z"
    run.mkdir(parents=True)
    (run / "train.log").write_text("RuntimeError: [Errno 28] No space left on device\n" * 2000)
    p = closed_pipe_run(["diagnose", str(run)], tmp_path)
    err = p.stderr.decode(errors="replace")
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert p.returncode in (EXIT_BROKEN_PIPE, 2), (p.returncode, err)
