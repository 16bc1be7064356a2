"""The readiness page as a person sees it: headless Chromium loads it from a file:// URL; the test checks which
dies and host pairs are coloured (the pairs the preflight's ping plan tried), that a click shows the check, found,
expected and fix, the pixels at the faulty dies in a screenshot, the rehearsal's all-to-all rows drawn, and that a
16 hosts x 16 dies page fits a 1024 and a 1280 pixel wide window with legible labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from verl_recipe.pages.readiness import write_page

from tests.browser import chromium
from tests.browser.reports import FAULTY_16, preflight_report, rehearsal_report, write
from tests.unit.test_readiness_page import EXPLAINED

pytestmark = pytest.mark.browser

GREEN, RED, GREY = "rgb(46, 158, 79)", "rgb(208, 49, 45)", "rgb(154, 160, 166)"
AMBER, BLUE = "rgb(224, 161, 0)", "rgb(76, 120, 168)"
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
    assert len(m["pairs"]) == 16 * 15 and len(tried) == 16 * 15  # the ping plan: every host pings every other
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
    assert red == FAILING_DIES, red
    assert grey == {("a3-09", d) for d in range(16)}  # unreachable: no die data
    amber = {k for k, c in by_die.items() if c["bg"] == AMBER}
    assert amber == {("a3-12", 9)}  # its planned ping into the unreachable a3-09: explained, not its fault
    assert all(c["bg"] == GREEN for k, c in by_die.items() if k not in red | grey | amber)
    assert {k for k, c in by_die.items() if c["status"] == "warn"} == amber
    lost = {(p["from"], p["to"]): p for p in m["pairs"] if p["bg"] == RED}
    assert set(lost) == {("a3-12", "a3-04")} and lost[("a3-12", "a3-04")]["text"] == "1"
    explained = {(p["from"], p["to"]) for p in m["pairs"] if p["status"] == "warn"}
    assert explained == set(EXPLAINED)
    assert {(p["from"], p["to"]) for p in m["pairs"] if p["status"] == "untried"} == {
        ("a3-09", h) for h in (f"a3-{i:02d}" for i in range(1, 17)) if h != "a3-09"
    }  # unreachable: it sent nothing
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


def test_rehearsal_alltoall_rows_drawn(chromium_bin: str, pages: dict[str, Path], tmp_path: Path) -> None:
    """The all-to-all bars of every node (the slow node amber, the broken one red), its slowest peer and the
    pattern rows are laid out inside the window, and a click on a pattern row lists its nodes."""
    m = chromium.measure(chromium_bin, pages["faulty"], tmp_path, 1280, HEIGHT, extra=A2A_JS)
    a2a = m["extra"]
    assert len(a2a["bars"]) == 16 and all(b["w"] > 100 and b["h"] >= 14 for b in a2a["bars"]), a2a["bars"][:3]
    colours = {b["node"]: b["fill"] for b in a2a["bars"]}
    assert colours["a3-06"] == AMBER and colours["a3-10"] == RED
    assert {c for n, c in colours.items() if n not in ("a3-06", "a3-10")} == {BLUE}
    assert len(a2a["peers"]) == 16 and set(a2a["peers"]) == {"a3-06", "a3-16"}
    assert [r["pattern"] for r in a2a["rows"]] == ["train EP", "rollout EP"]
    assert all(r["right"] <= 1280 and r["h"] >= 14 for r in a2a["rows"])
    assert a2a["panel"].startswith("close\nall-to-all train EP: every node") and "a3-16: " in a2a["panel"]


A2A_JS = r"""
  var a2a = document.querySelector('.bars.a2a');
  out.extra = {
    bars: Array.prototype.map.call(a2a.querySelectorAll('.bar[data-node]'), function(b){
      var r = b.getBoundingClientRect();
      return {node: b.dataset.node, w: r.width, h: r.height, fill: bg(b.querySelector('span'))};
    }),
    peers: Array.prototype.map.call(a2a.querySelectorAll('.peer'), function(p){ return p.textContent; }),
    rows: Array.prototype.map.call(document.querySelectorAll('table.a2a-patterns tr[data-pattern]'), function(t){
      var r = t.getBoundingClientRect(); return {pattern: t.dataset.pattern, right: r.right, h: r.height};
    })
  };
  document.querySelector('table.a2a-patterns tr[data-pattern]').click();
  out.extra.panel = document.getElementById('details').innerText;
"""
