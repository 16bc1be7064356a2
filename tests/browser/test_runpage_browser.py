"""The run page in headless Chromium with no network: it loads without console errors, fetches nothing, and its
plots are drawn with their points and alert marks visible."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import pytest
from verl_recipe.pages.run_page import write_run_page

from tests.browser import chromium
from tests.unit.test_runpage import make_run

pytestmark = pytest.mark.browser

PROBE = r"""<script>
(function(){
  var out = {errors: window.__errors || [], resources: performance.getEntriesByType('resource').length};
  out.plots = Array.prototype.map.call(document.querySelectorAll('figure.plot'), function(f){
    var r = f.querySelector('svg') ? f.querySelector('svg').getBoundingClientRect() : {width: 0, height: 0};
    return {id: f.id, pts: f.querySelectorAll('circle.pt').length, marks: f.querySelectorAll('g.mark').length,
            w: r.width, h: r.height};
  });
  var pre = document.createElement('pre'); pre.id = 'measure'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""
CATCH = (
    "<script>window.__errors=[];"
    "window.addEventListener('error',function(e){window.__errors.push(String(e.message))});</script>"
)


def test_run_page_loads_offline_with_plots_and_marks(chromium_bin: str, tmp_path: Path) -> None:
    d = make_run(tmp_path / "r", outcome={"exit_code": 0, "ended_utc": "e", "lost_nodes": []})
    alert = {"rule": "r", "metric": "timing_s/step", "value": 5.0, "threshold": 1, "step": 3, "line": "slow step"}
    (d / "alerts.json").write_text(json.dumps([alert]))
    page = write_run_page(d).read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("<head>", "<head>" + CATCH, 1).replace("</body>", PROBE + "</body>"))
    argv = [chromium_bin, *chromium.FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr",
            "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1280,1600",
            "--dump-dom", probe.as_uri()]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r'<pre id="measure">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stdout[-1500:]
    out = json.loads(html.unescape(m.group(1)))
    assert out["errors"] == [] and out["resources"] == 0
    assert "Uncaught" not in proc.stderr, proc.stderr[-2000:]
    by_id = {p["id"]: p for p in out["plots"]}
    assert {"step-time", "throughput", "reward", "response-length", "memory"} <= set(by_id)
    for p in by_id.values():
        assert p["pts"] == 6 and p["marks"] == 1 and p["w"] > 300 and p["h"] > 100, p


def test_runpage_screenshot_photographs_a_copy_and_never_writes_into_the_run(
    chromium_bin: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m tests.browser.runpage_screenshot RUN_DIR OUT.png`: the page drawn as `verl-recipe report RUN_DIR`
    draws it (naming RUN_DIR), into a copy; the run folder keeps exactly its files; the picture is the page's
    height at 1280 pixels."""
    from tests.browser import runpage_screenshot as shot

    d = make_run(tmp_path / "runs" / "20261202-100000", outcome={"exit_code": 0, "ended_utc": "e", "lost_nodes": []})
    (d / "alerts.json").write_text(json.dumps([{"rule": "r", "metric": "timing_s/step", "value": 5.0, "step": 3}]))
    (d / "train.log").write_text("step 1\n")
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in d.iterdir()}
    work = tmp_path / "work"
    page = shot.draw(d, work)
    text = page.read_text()
    assert page.parent.parent == work and page.name == "run.html"
    assert html.escape(str(d)) in text and str(work) not in text and 'id="step-time"' in text
    assert sorted(p.name for p in page.parent.iterdir()) == ["alerts.json", "metrics.jsonl", "outcome.json",
                                                             "run.html", "settings.json"]  # fmt: skip
    out = tmp_path / "img" / "run-page.png"
    assert shot.main([str(d), str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"{out}: ")
    width, height, _ = chromium.read_png(out, max_rows=1)
    assert width == 1280 and shot.MIN_HEIGHT <= height <= shot.MAX_HEIGHT
    m = chromium.measure(chromium_bin, page, tmp_path, 1280, 600)
    assert height == max(shot.MIN_HEIGHT, min(shot.MAX_HEIGHT, int(m["doc"][1])))  # the whole page
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in d.iterdir()} == before  # nothing written there
    # no run folder: one error line, exit 2, no picture
    assert shot.main([str(tmp_path / "nope"), str(tmp_path / "nope.png")]) == 2
    assert "not a folder" in capsys.readouterr().err and not (tmp_path / "nope.png").exists()
