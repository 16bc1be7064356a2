"""A picture of a run's page: `python -m tests.browser.runpage_screenshot RUN_DIR OUT.png` (`make runpage-screenshot
RUN_DIR=... OUT=docs/img/run-page.png`).

What `verl-recipe report RUN_DIR` does (pages/run_page.py write_run_page), into a temporary copy of the files the
run page reads, so nothing is ever written into RUN_DIR; the page names RUN_DIR, not the copy. Headless Chromium
photographs the whole page, as tall as it is (at most MAX_HEIGHT)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from verl_recipe.contracts import runfiles
from verl_recipe.pages.kit import esc
from verl_recipe.pages.run_page import RunPageError, write_run_page

from tests.browser import chromium

WIDTH = 1280
MIN_HEIGHT, MAX_HEIGHT = 600, 6000
# The files load_run reads; the rest of the run folder (train.log, the node logs' link, ...) is not drawn.
READ = (runfiles.SETTINGS, runfiles.METRICS, runfiles.OUTCOME, runfiles.ALERTS, runfiles.DIAGNOSIS, runfiles.LOST_NODES)


def draw(run_dir: Path, work: Path) -> Path:
    """The run page of run_dir, written into work/<run_dir's name>/ (a copy of the files it reads); returns it.
    Raises RunPageError for a folder that is no run folder, as `verl-recipe report` does."""
    run_dir = run_dir.resolve()
    if not run_dir.is_dir():
        raise RunPageError(f"{run_dir}: not a folder; fix: give a run folder")
    copy = work / (run_dir.name or "run")
    copy.mkdir(parents=True)
    for name in READ:
        src = run_dir / name
        if os.path.isfile(src):  # a regular file (or a link to one): never a fifo, a folder or a device
            shutil.copyfile(src, copy / name)
    page = write_run_page(copy)
    # the page as `verl-recipe report RUN_DIR` would draw it: the run folder it names is RUN_DIR, not the copy
    text = page.read_text(encoding="utf-8")
    text = text.replace(esc(str(copy)), esc(str(run_dir))).replace(str(copy), str(run_dir))
    page.write_text(text, encoding="utf-8")
    return page


def height_of(binary: str, page: Path, work: Path, width: int) -> int:
    """The page's own height at this width, within MIN_HEIGHT and MAX_HEIGHT."""
    m = chromium.measure(binary, page, work, width, MIN_HEIGHT)
    return max(MIN_HEIGHT, min(MAX_HEIGHT, int(m["doc"][1])))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.browser.runpage_screenshot",
        description="Photograph a run folder's page (drawn into a temporary copy; RUN_DIR is never written).",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path)
    parser.add_argument("out", metavar="OUT.png", type=Path)
    parser.add_argument("--width", type=int, default=WIDTH, help=f"window width in pixels (default {WIDTH})")
    ns = parser.parse_args(argv)
    binary = chromium.find_or_say()
    if not binary:
        return 2
    out = ns.out.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        try:
            page = draw(ns.run_dir, work / "copy")
        except RunPageError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        shot = chromium.screenshot(binary, page, work / "shot.png", ns.width, height_of(binary, page, work, ns.width))
        chromium.keep(shot, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
