"""Regenerate README's picture of the readiness page: `make readiness-screenshot` (docs/img/readiness.png).

A 16-host, 16-die report with the faults of reports.FAULTY_16, pinging on the preflight's own plan, and a rehearsal
of the 397B layout with one slow and one broken node (all-reduce and all-to-all), rendered by
verl_recipe.pages.readiness and photographed by headless Chromium."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from verl_recipe.pages.readiness import write_page

from tests.browser import chromium
from tests.browser.reports import FAULTY_16, preflight_report, rehearsal_report, write

# The header, the die grid, the pair matrix with the ping plan, the host badges and the rehearsal down to its
# all-to-all table (the placement groups and the problem list below it are left out).
WIDTH, HEIGHT = 1100, 2762


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.browser.screenshot OUT.png", file=sys.stderr)
        return 2
    binary = chromium.find_or_say()
    if not binary:
        return 2
    out = Path(argv[0]).resolve()
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        os.chdir(d)  # the header names the reports as given: short relative names in the picture
        try:
            pf = write(Path("preflight-sim16.json"), preflight_report(faults=FAULTY_16))
            rh = write(Path("16-nodes.json"), rehearsal_report(slow="a3-06", broken="a3-10"))
            page = write_page([pf, rh]).resolve()
        finally:
            os.chdir(here)
        chromium.keep(chromium.screenshot(binary, page, d / "shot.png", WIDTH, HEIGHT), out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
