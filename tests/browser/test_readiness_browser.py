"""The readiness page as a person sees it: headless Chromium loads it from a file:// URL; the test checks which
dies and host pairs are coloured, that a click shows the check, found, expected and fix, the pixels at the faulty
dies in a screenshot, and that a 16 hosts x 16 dies page fits a 1024 and a 1280 pixel wide window with legible
labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from verl_recipe.pages.readiness import write_page

from tests.browser import chromium
from tests.browser.reports import FAULTY_16, preflight_report, rehearsal_report, write

pytestmark = pytest.mark.browser

GREEN, RED, GREY = "rgb(46, 158, 79)", "rgb(208, 49, 45)", "rgb(154, 160, 166)"
FAILING_DIES = {("a3-03", 7), ("a3-05", 2), ("a3-12", 4), ("a3-14", 11)}
HEIGHT = 1600


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pages")
    healthy = write_page(
        [write(d / "healthy.json", preflight_report()), write(d / "healthy-rehearsal.json", rehearsal_report())]
    )
    faulty = write_page(
        [
            write(d / "faulty.json", preflight_report(faults=FAULTY_16)),
            write(d / "faulty-rehearsal.json", rehearsal_report(slow="a3-06", broken="a3-10")),
        ]
    )
    return {"healthy": healthy, "faulty": faulty}


def fits(m: dict[str, Any]) -> None:
    """No horizontal overflow anywhere; every visible label at least 11 px; row labels never cut."""
    width = m["viewport"][0]
    assert m["doc"][0] <= width, f"page is {m['doc'][0]} px wide in a {width} px window"
    for box in m["boxes"]:
        assert box["sw"] <= box["cw"] and box["right"] <= width, f"{box['id']} overflows: {box}"
    for cell in m["cells"]:
        left, _, w, h = cell["rect"]
        assert left + w <= width and w >= 20 and h >= 18, f"die cell drawn too small or off-window: {cell}"
    small = [lab for lab in m["labels"] if lab["vis"] and lab["px"] < 11]
    assert not small, f"labels below 11 px: {small[:5]}"
    cut = [lab for lab in m["labels"] if lab["vis"] and "rowh" in lab["cls"] and lab["sw"] > lab["cw"]]
    assert not cut, f"host labels cut off: {cut[:5]}"


@pytest.mark.parametrize("width", [1024, 1280])
def test_healthy_16x16_all_green_and_readable(
    chromium_bin: str, pages: dict[str, Path], tmp_path: Path, width: int
) -> None:
    m = chromium.measure(chromium_bin, pages["healthy"], tmp_path, width, HEIGHT)
    assert m["ready"] == "1", "the page's script did not run"
    assert len(m["cells"]) == 256
    assert {(c["status"], c["bg"]) for c in m["cells"]} == {("ok", GREEN)}
    tried = [p for p in m["pairs"] if p["status"] == "ok"]
    assert len(m["pairs"]) == 16 * 15 and len(tried) == 16  # the ring: each host pings the next one
    assert {(p["from"], p["to"]) for p in tried} >= {("a3-01", "a3-02"), ("a3-16", "a3-01")}
    assert not [b for b in m["badges"] if b["status"] != "ok"]
    assert "panel" not in m  # nothing failed, so nothing to click
    fits(m)


@pytest.mark.parametrize("width", [1024, 1280])
def test_faulty_16x16_colours_exactly_the_faults(
    chromium_bin: str, pages: dict[str, Path], tmp_path: Path, width: int
) -> None:
    m = chromium.measure(chromium_bin, pages["faulty"], tmp_path, width, HEIGHT)
    by_die = {(c["host"], c["die"]): c for c in m["cells"]}
    assert len(by_die) == 256
    red = {k for k, c in by_die.items() if c["bg"] == RED}
    grey = {k for k, c in by_die.items() if c["bg"] == GREY}
    assert red == FAILING_DIES
    assert grey == {("a3-09", d) for d in range(16)}  # unreachable: no die data
    assert all(c["bg"] == GREEN for k, c in by_die.items() if k not in red | grey)
    lost = {(p["from"], p["to"]): p for p in m["pairs"] if p["bg"] == RED}
    assert set(lost) == {("a3-12", "a3-13")} and lost[("a3-12", "a3-13")]["text"] == "1"
    explained = {(p["from"], p["to"]) for p in m["pairs"] if p["status"] == "warn"}
    assert explained == {("a3-02", "a3-03"), ("a3-04", "a3-05"), ("a3-08", "a3-09"), ("a3-13", "a3-14")}
    bad_badges = {(b["host"], b["check"]) for b in m["badges"] if b["status"] == "fail" and b["bg"] == RED}
    assert bad_badges == {("a3-07", "free_disk"), ("a3-11", "time_sync"), ("a3-09", "ssh")}
    panel = m["panel"]
    assert panel["display"] == "block" and panel["key"] == "d:a3-03:7"
    for text in ("a3-03 die 7: fail", "npu_link", "die 7: DOWN", "link status UP on every die", "fix npu_link"):
        assert text in panel["text"], f"{text!r} not in the details panel: {panel['text'][:400]}"
    fits(m)


def test_faulty_screenshot_pixels(chromium_bin: str, pages: dict[str, Path], tmp_path: Path) -> None:
    """The colours a person sees: sample the screenshot at the centre of every faulty die and of healthy ones."""
    m = chromium.measure(chromium_bin, pages["faulty"], tmp_path, 1280, HEIGHT)
    shot = chromium.screenshot(chromium_bin, pages["faulty"], tmp_path / "faulty.png", 1280, HEIGHT)
    by_die = {(c["host"], c["die"]): c for c in m["cells"]}
    bottom = int(max(c["rect"][1] + c["rect"][3] for c in m["cells"])) + 1
    width, height, rows = chromium.read_png(shot, max_rows=bottom)  # the rows down to the grid's last line
    assert (width, height) == (1280, HEIGHT) and len(rows) == bottom

    def centre_colour(cell: dict[str, Any]) -> tuple[int, int, int]:
        left, top, w, h = cell["rect"]
        # a quarter in from the corner: the centre of a failing die carries its white mark
        return chromium.pixel(rows, int(left + w / 4), int(top + h / 4))

    for key in FAILING_DIES:
        assert centre_colour(by_die[key]) == (208, 49, 45), f"die {key} is not drawn red"
    for key in [("a3-01", 0), ("a3-03", 6), ("a3-16", 15)]:
        assert centre_colour(by_die[key]) == (46, 158, 79), f"die {key} is not drawn green"
    assert centre_colour(by_die[("a3-09", 3)]) == (154, 160, 166)
