"""Run the CLI in-process and capture what it prints."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from verl_recipe.cli import main


@dataclass
class Result:
    rc: int
    out: str
    err: str

    @property
    def doc(self) -> dict[str, Any]:
        data = json.loads(self.out)
        assert isinstance(data, dict)
        return data

    def overrides(self) -> dict[str, str]:
        """Hydra key (without +) -> rendered value."""
        out: dict[str, str] = {}
        for arg in self.doc["argv"][3:]:
            key, _, value = arg.partition("=")
            out[key.lstrip("+")] = value
        return out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    rc = main(list(argv))
    captured = capsys.readouterr()
    return Result(rc, captured.out, captured.err)
