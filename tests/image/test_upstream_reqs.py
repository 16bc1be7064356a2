"""docker/tools/upstream_reqs.py (`make lock-npu-upstream-check`): docker/lock/upstream/*.txt against the requirement
declarations read back from `make sources` tarballs. The tarballs here are built from the committed files in each
package's own format (requirements.txt, setup.py lists, transformers' deps table, pyproject dependencies)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import yaml

from simkit.paths import load_by_path

ROOT = Path(__file__).resolve().parents[2]
upstream_reqs = load_by_path("verl_recipe_upstream_reqs", ROOT / "docker" / "tools" / "upstream_reqs.py")

UPSTREAM = ROOT / "docker" / "lock" / "upstream"


def declared(name: str) -> list[str]:
    return list(upstream_reqs.declared_in_file(UPSTREAM / name))


def trees(drop: str = "") -> dict[str, dict[str, str]]:
    """Each source's files, written the way that project declares its requirements."""

    def lines(name: str) -> list[str]:
        return [r for r in declared(name) if r != drop]

    def pyproject(name: str) -> str:
        return f"[project]\nname = 'x'\ndependencies = {json.dumps(lines(name))}\n"

    tf = lines("transformers.txt")
    names = [upstream_reqs.norm(r).split(">")[0].split("<")[0].split("=")[0].split("!")[0] for r in tf]
    return {
        "verl": {"setup.py": "install_requires = []\n", "requirements-npu.txt": "\n".join(lines("verl.txt"))},
        "vllm": {"requirements/common.txt": "# comment\n" + "\n".join(f"{r}  # why" for r in lines("vllm.txt"))},
        "vllm_ascend": {"requirements.txt": "\n".join(lines("vllm_ascend.txt"))},
        "megatron_lm": {"pyproject.toml": pyproject("megatron_lm.txt")},
        "mindspeed": {"requirements.txt": "\n".join(lines("mindspeed.txt"))},
        "megatron_bridge": {"pyproject.toml": pyproject("megatron_bridge.txt")},
        "transformers": {
            "setup.py": f"_deps = {json.dumps(tf)}\ninstall_requires = [{', '.join(f'deps[{n!r}]' for n in names)}]\n"
        },
    }


def sources(tmp_path: Path, drop: str = "") -> tuple[Path, Path]:
    dest = tmp_path / "sources"
    dest.mkdir()
    entries = {}
    for key, files in trees(drop).items():
        archive = f"{key}-0123456789ab.tar"
        with tarfile.open(dest / archive, "w") as t:
            for path, text in files.items():
                data = text.encode()
                info = tarfile.TarInfo(path)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        entries[key] = {"archive": archive, "commit": "0123456789ab" * 3 + "0123"}
    lock = tmp_path / "sources.lock"
    lock.write_text(yaml.safe_dump({"schema": 1, "sources": entries}))
    return dest, lock


def test_the_committed_files_match_sources_that_declare_the_same(tmp_path: Path) -> None:
    dest, lock = sources(tmp_path)
    assert upstream_reqs.main(["check", "--dest", str(dest), "--lock", str(lock)]) == 0


def test_a_requirement_upstream_added_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest, lock = sources(tmp_path, drop="blake3")
    # The source lacks blake3 here: the file records something upstream does not declare (and vice versa).
    assert upstream_reqs.main(["check", "--dest", str(dest), "--lock", str(lock)]) == 1
    assert "vllm.txt: records blake3" in capsys.readouterr().err


def test_additions_and_left_out_lines_are_told_apart() -> None:
    verl = declared("verl.txt")
    assert "cachetools" not in verl, "verl's undeclared imports are this project's additions, not upstream's"
    bridge = declared("megatron_bridge.txt")
    assert "transformer-engine[pytorch,core_cu13]" in bridge, "a line left out of the lock is still upstream's"
    assert "pybind11" not in declared("megatron_lm.txt")


def test_missing_sources_are_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert upstream_reqs.main(["check", "--dest", str(tmp_path), "--lock", str(tmp_path / "none.lock")]) == 2
    assert "make sources" in capsys.readouterr().err
