"""The readiness page renderer on synthetic reports (tests/browser/reports.py builds them with the preflight
module's, its action plugin's and report plugin's own functions, and the rehearsal's all-to-all summary): what each
die, host pair and host is drawn as, the ping plan, the header, the rehearsal's all-reduce and all-to-all (and an
older report without the all-to-all), generic rows of checks the renderer has never heard of, escaping,
self-containment, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from verl_recipe.cli import main as cli_main
from verl_recipe.pages import readiness as rp
from verl_recipe.pages.kit import esc, source_commit
from verl_recipe.rehearse import NodeReport, write_report

from tests.browser.reports import FAULTY_16, ROTATION, act, hosts, npu_ips, preflight_report, rehearsal_report, write

REPO = Path(__file__).resolve().parents[2]
FAILING_DIES = {("a3-03", 7), ("a3-05", 2), ("a3-12", 4), ("a3-14", 11)}
# The pairs whose pings the plan (rotation ROTATION) sent into a faulty die or the unreachable a3-09: (sender die,
# target die) of each; the loss is explained by the target's own fault.
EXPLAINED = {
    ("a3-01", "a3-05"): {(15, 2)},
    ("a3-02", "a3-14"): {(8, 11)},
    ("a3-11", "a3-03"): {(4, 7)},
    **{(h, "a3-09"): {(d, (d + ROTATION) % 16)} for h, d in [
        ("a3-01", 4), ("a3-02", 3), ("a3-03", 2), ("a3-04", 1), ("a3-06", 14), ("a3-07", 13), ("a3-08", 12),
        ("a3-10", 11), ("a3-11", 10), ("a3-12", 9), ("a3-13", 8), ("a3-14", 7), ("a3-15", 6), ("a3-16", 5)]},
    ("a3-05", "a3-09"): {(0, 3), (15, 2)},
}  # fmt: skip


def model_of(*docs: dict) -> rp.Model:
    return rp.build([rp.classify(f"report-{i}.json", d) for i, d in enumerate(docs)])


def statuses(m: rp.Model) -> dict[tuple[str, int], str]:
    return {(h, d): m.die_status(h, d) for h in m.hosts for d in range(m.dies)}


def cell(page: str, host: str, die: int) -> str:
    m = re.search(rf'<button[^>]*data-host="{host}" data-die="{die}"[^>]*>', page)
    assert m, f"no cell for {host} die {die}"
    return m.group(0)


def test_healthy_16x16_everything_green() -> None:
    m = model_of(preflight_report())
    assert m.hosts == hosts(16) and m.dies == 16
    assert set(statuses(m).values()) == {"ok"}
    assert {h: m.host_status(h) for h in m.hosts} == dict.fromkeys(hosts(16), "ok")
    assert m.schedule_known and not m.failures
    # the plan: each host's 16 dies ping the 15 other hosts (one of them twice), each die of the cluster once
    tried = {k for k, p in m.pairs.items() if p.tried}
    assert tried == {(a, b) for a in hosts(16) for b in hosts(16) if a != b}
    assert sorted(len(p.tried) for p in m.pairs.values()) == [1] * 224 + [2] * 16
    assert all(p.status == "ok" for p in m.pairs.values())
    received = sorted((b, t) for (_, b), p in m.pairs.items() for _, t in p.tried)
    assert received == sorted((h, d) for h in hosts(16) for d in range(16))  # every die pinged exactly once
    page = rp.Page(m).render()
    assert page.count('class="cell ok"') == 256 + 240  # dies + host pairs
    assert "None: every reported check passed." in page
    assert (
        '<p class="note" id="ping-plan">Ping plan (rotation 3): 256 pings from 16 of 16 hosts; 120 of 120 host pairs '
        "and 256 of 256 dies pinged.</p>"
    ) in page


def test_faulty_16x16_names_exactly_the_faults() -> None:
    m = model_of(preflight_report(faults=FAULTY_16))
    st = statuses(m)
    assert {k for k, v in st.items() if v == "fail"} == FAILING_DIES
    assert {k for k, v in st.items() if v == "nodata"} == {("a3-09", d) for d in range(16)}
    assert {h for h in m.hosts if m.host_status(h) == "fail"} == {"a3-07", "a3-09", "a3-11"}
    by_status = {k: p.status for k, p in m.pairs.items()}
    # a3-12 die 4's route fault: its planned ping to a3-04 die 7 is lost
    assert {k for k, v in by_status.items() if v == "fail"} == {("a3-12", "a3-04")}
    assert m.pairs[("a3-12", "a3-04")].lost.keys() == {(4, 7)}
    # a lost ping whose target die (or host) failed its own check is drawn as explained, not as a link fault
    assert {k for k, v in by_status.items() if v == "warn"} == set(EXPLAINED)
    assert {k: set(m.pairs[k].explained) for k in EXPLAINED} == EXPLAINED
    # a3-12 lost one ping to a route fault and one to the unreachable a3-09: only the first is its fault
    assert st[("a3-12", 4)] == "fail" and st[("a3-12", 9)] == "warn"
    assert {k for k, v in st.items() if v == "warn"} == {("a3-12", 9)}
    # a3-09 sent nothing (unreachable): its row of the matrix is untried, every die of the others was pinged
    assert not any(p.tried for (a, _), p in m.pairs.items() if a == "a3-09")
    page = rp.Page(m).render()
    assert "240 pings from 15 of 16 hosts; 120 of 120 host pairs and 240 of 256 dies pinged" in page
    c = cell(page, "a3-03", 7)
    assert 'class="cell fail"' in c and "npu_link: fail" in c and "die 7: DOWN" in c
    assert 'class="cell ok"' in cell(page, "a3-03", 6)
    assert 'class="cell nodata"' in cell(page, "a3-09", 0) and "unreachable" in cell(page, "a3-09", 0)
    data = json.loads(re.search(r'id="readiness-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    shown = [data["rows"][i] for i in data["keys"]["d:a3-03:7"]["rows"]]
    assert ["npu_link", "fail", "die 7: DOWN", "link status UP on every die", "fix npu_link"] in shown
    assert re.search(r'data-host="a3-07" data-check="free_disk" data-status="fail"', page)
    problems = page[page.index('id="problems"') :]
    for row in preflight_report(faults=FAULTY_16)["failures"]:
        assert esc(row["fix"]) in problems and esc(row["found"]) in problems


def test_header_says_inventory_commit_sources_and_simulated(tmp_path: Path) -> None:
    pf = write(tmp_path / "preflight-sim16.json", preflight_report())
    page = rp.render(rp.load([pf]))
    head = page[: page.index('id="dies"')]
    assert "Cluster readiness: sim16" in head and "SIMULATED cluster" in head
    assert source_commit(REPO) in head and str(pf) in head
    real = rp.render([rp.classify("real.json", preflight_report(simulated=False))])
    assert "SIMULATED" not in real


def test_page_is_self_contained() -> None:
    page = rp.Page(model_of(preflight_report(faults=FAULTY_16), rehearsal_report(slow="a3-06"))).render()
    assert not re.search(r"https?:|//[a-z]", page.replace("<!DOCTYPE html>", "")), "a URL in the page"
    assert not re.search(r"\b(src|href)\s*=|@import|url\(", page)
    assert page.count("<script") == 2 and page.count("<style>") == 1
    assert len(page.encode()) < 400_000


def test_rehearsal_bars_slowest_node_and_placement() -> None:
    m = model_of(rehearsal_report(slow="a3-06", broken="a3-10"))
    page = rp.Page(m).render()
    assert '<p class="slowest" id="slowest" data-node="a3-06">slowest node: <b>a3-06</b>' in page
    assert page.count('<div class="pg" data-group=') == 16
    assert page.count('class="b st fail"') == 1 and "group 9 bundle 5" in page
    assert 'class="bar slow" data-node="a3-06"' in page and 'class="bar fail" data-node="a3-10"' in page
    assert 'id="dies"' not in page  # no preflight, no die grid
    assert "rehearsal: <b>15</b> of 16 nodes clean" in page


def alltoall_part(page: str) -> str:
    start = page.index('class="a2a-h"')
    return page[start : page.index('<h2 style="margin-top:12px">Placement groups', start)]


def test_rehearsal_alltoall_per_node_and_per_pattern() -> None:
    """The 397B layout's patterns as the rehearsal's alltoall_summary wrote them: per node its slowest pattern's
    time, bus bandwidth and slowest peer (the slow node amber, the broken one red), and a row per pattern."""
    doc = rehearsal_report(slow="a3-06", broken="a3-10")
    page = rp.Page(model_of(doc)).render()
    a2a = alltoall_part(page)
    assert '<p class="slowest a2a-slowest" data-node="a3-06">slowest all-to-all node: <b>a3-06</b>' in a2a
    assert a2a.count('class="bar slow" data-node=') == 1 and 'class="bar slow" data-node="a3-06"' in a2a
    assert a2a.count('class="bar fail" data-node=') == 1 and 'class="bar fail" data-node="a3-10"' in a2a
    assert a2a.count('<div class="peer">') == 16
    # the others' slowest pair is with the slow node; a figure drawn is the report's, to the thousandth
    a3_01 = next(n for n in doc["nodes"] if n["node"] == "a3-01")
    assert a3_01["alltoall_slowest_peer"] == "a3-06"
    assert f"<em>{a3_01['alltoall_ms']:.3f}</em>" in a2a and f"<em>{a3_01['alltoall_busbw_gbps']:.3f}</em>" in a2a
    rows = re.findall(r'<tr data-k="[^"]*" data-pattern="([^"]*)"[^>]*>(.*?)</tr>', a2a)
    assert [name for name, _ in rows] == ["train EP", "rollout EP"]
    train, rollout = (cells for _, cells in rows)
    assert "<td>64</td><td>4</td><td>4 groups of 64 ranks</td>" in train
    assert "<td>256</td><td>1</td><td>1 group of 256 ranks</td>" in rollout
    assert 'class="slow" data-node="a3-06"' in train and "a3-05 \u2194 a3-06" in train
    data = json.loads(re.search(r'id="readiness-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    panel = data["keys"]["t:report-0.json:1"]
    assert panel["title"] == "all-to-all rollout EP: every node" and len(panel["text"].splitlines()) == 16


def test_rehearsal_without_alltoall_still_draws_and_says_so(tmp_path: Path) -> None:
    """A report written before the rehearsal timed the all-to-alls (no summary.alltoall, no alltoall_* fields), as
    one of a layout without expert parallelism: the all-reduce is drawn and the page says the figure is absent."""
    doc = rehearsal_report(slow="a3-06")
    del doc["summary"]["alltoall"]
    for n in doc["nodes"]:
        for k in ("alltoall_ms", "alltoall_busbw_gbps", "alltoall_slowest_peer"):
            del n[k]
    page = rp.render(rp.load([write(tmp_path / "old.json", doc)]))
    assert 'data-node="a3-06">slowest node: <b>a3-06</b>' in page  # the all-reduce as before
    a2a = alltoall_part(page)
    assert '<p class="note a2a-absent">No all-to-all figures in this report' in a2a
    assert "a2a-slowest" not in a2a and 'class="bars a2a"' not in a2a
    # a 3-host rehearsal: the 397B layout does not fit 48 dies, so the synthetic report has no all-to-all either
    assert "No all-to-all figures" in rp.Page(model_of(rehearsal_report(n_hosts=3))).render()


def test_rehearsal_node_without_alltoall_figure_and_odd_numbers() -> None:
    """A node whose ranks reported no all-to-all (an error) is drawn with '-' and says why; NaN, infinity and an
    integer beyond a float are drawn as no figure, never a crash."""
    doc = rehearsal_report(n_hosts=16)
    doc["nodes"][2].update(alltoall_ms=None, alltoall_busbw_gbps=None, alltoall_slowest_peer=None)
    doc["nodes"][3].update(alltoall_ms=float("nan"), alltoall_busbw_gbps=10**400)
    doc["summary"]["alltoall"][0]["nodes"][0]["ms"] = float("inf")
    page = rp.Page(model_of(doc)).render()
    a2a = alltoall_part(page)
    assert re.search(r'data-node="a3-03"><span style="width:0.0%"></span><em>-</em>', a2a)
    assert re.search(r'data-node="a3-04"><span style="width:0.0%"></span><em>-</em>', a2a)
    assert "no all-to-all figure for this node" in page


@pytest.mark.parametrize(
    ("part", "value", "field"),
    [
        ("summary", {"pattern": "train EP", "nodes": [{"node": 3}]}, "summary.alltoall"),
        ("summary", [{"slowest_pair": {"nodes": ["a3-01"], "ms": 1.0}}], "summary.alltoall"),
        ("summary", "train EP", "summary.alltoall"),
        ("node", {"alltoall_ms": "12 ms"}, "nodes[0].alltoall_ms"),
        ("node", {"alltoall_slowest_peer": 7}, "nodes[0].alltoall_slowest_peer"),
    ],
)
def test_rehearsal_alltoall_of_another_shape_is_one_line(part: str, value: object, field: str) -> None:
    doc = rehearsal_report(n_hosts=16)
    if part == "summary":
        doc["summary"]["alltoall"] = [value] if isinstance(value, dict) else value
    else:
        doc["nodes"][0].update(value)  # type: ignore[call-overload]
    with pytest.raises(rp.ReportError, match=re.escape(field)) as err:
        rp.classify("r.json", doc)
    assert len(str(err.value).splitlines()) == 1 and "r.json" in str(err.value)


def test_rehearsal_placement_error_is_shown() -> None:
    doc = {"summary": {"nnodes": 2, "dies_per_node": 16, "device": "cpu", "error": "1 of 2 placement groups ..."},
           "nodes": []}  # fmt: skip
    page = rp.render([rp.classify("r.json", doc)])
    assert 'id="rehearsal-error">1 of 2 placement groups ...' in page


def test_rows_are_drawn_by_the_check_table_and_their_entries_not_by_wording() -> None:
    """A row is drawn on the dies or as a host badge by its check's level in the report's contract, on the dies its
    entries (or dies) name, whatever its text says; a ping entry's peer is the one the report plugin named."""
    doc = preflight_report(n_hosts=3)
    doc["rows"] += [
        {"host": "a3-02", "check": "npu_occupancy", "ok": False, "dies": [5], "peers": [],
         "entries": [{"die": 5, "text": "held by pid 4242 (train-old)"}],
         "found": "held by a process", "expected": "nothing", "fix": "stop it"},
        {"host": "a3-03", "check": "npu_tls", "ok": True, "status": "warn", "dies": [0, 1, 2, 3], "entries": [],
         "found": "TLS on", "expected": "the same switch", "fix": ""},
        {"host": "a3-01", "check": "host_ram", "ok": False, "dies": [2], "entries": [],
         "found": "256 GiB on die 2", "expected": ">= 1024 GiB", "fix": "add memory"},
        {"host": "a3-01", "check": "npu_ping", "ok": False, "dies": [3], "peers": ["a3-03"],
         "entries": [{"die": 3, "text": "100% loss", "address": "10.0.0.9", "peer": "a3-03", "peer_die": 9}],
         "found": "100% loss", "expected": "0% loss", "fix": "route"},
    ]  # fmt: skip
    m = model_of(doc)
    st = statuses(m)
    assert {k for k, v in st.items() if v == "fail"} == {("a3-02", 5), ("a3-01", 3)}  # a failed ping: its sender
    assert {k for k, v in st.items() if v == "warn"} == {("a3-03", d) for d in range(4)}
    # an unknown check is a host badge, though its text names a die
    assert m.host_status("a3-01") == "fail" and "host_ram" in [c.check for c in m.host_checks["a3-01"]]
    occupancy = [(c.check, t) for c, t in m.die_checks[("a3-02", 5)] if c.status == "fail"]
    assert occupancy == [("npu_occupancy", "die 5: held by pid 4242 (train-old)")]
    assert m.pairs[("a3-01", "a3-03")].lost.keys() == {(3, 9)}


def test_report_without_meta_still_draws() -> None:
    """A report without meta: no schedule and no dies per host; the dies are those the rows name, and the pairs come
    from the ping entries' peers."""
    doc = preflight_report(n_hosts=4, faults=FAULTY_16[:1])
    del doc["meta"]
    m = model_of(doc)
    assert m.hosts == hosts(4) and m.dies == 8 and not m.schedule_known  # a3-03 die 7 is the highest named
    assert m.pairs[("a3-01", "a3-03")].explained.keys() == {(4, 7)}  # the plan's ping into a3-03 die 7
    page = rp.Page(m).render()
    assert "do not record the ping schedule" in page and 'id="ping-plan"' not in page


def test_text_from_reports_is_escaped() -> None:
    doc = preflight_report(n_hosts=2)
    doc["rows"].append({"host": "a3-01", "check": "os", "ok": False, "found": "</script><script>alert(1)</script>",
                        "expected": "<b>x</b>", "fix": "\" onmouseover=\"alert(2)"})  # fmt: skip
    page = rp.render([rp.classify("x.json", doc)])
    assert "<script>alert(1)" not in page and "<b>x</b>" not in page and '" onmouseover="' not in page
    assert page.count("</script>") == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("{not json", "not JSON (line 1"),
        ('{"schema": 2, "rows": [{"check": "os"}]}', "rows[0] has no host/check fields"),
        # a report saved before the rows named their dies (intended difference 2 of the golden corpus)
        ('{"rows": [{"host": "a3-01", "check": "os", "ok": true}]}', "a preflight report of schema 1, not 2"),
        ('{"something": 1}', "neither a preflight report"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    good = write(tmp_path / "good.json", preflight_report(n_hosts=2))
    rc = cli_main(["report", str(good), str(bad), "-o", str(tmp_path / "page.html")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and message in err and str(bad) in err
    assert not (tmp_path / "page.html").exists() and not list(tmp_path.glob("*.html"))


def test_cli_report_writes_next_to_the_first_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pf = write(tmp_path / "preflight-site.json", preflight_report(n_hosts=3))
    rh = write(tmp_path / "3-nodes.json", rehearsal_report(n_hosts=3))
    assert cli_main(["report", str(pf), str(rh)]) == 0
    page = tmp_path / "preflight-site.html"
    assert capsys.readouterr().out.strip() == f"readiness page: {page.as_uri()}"
    text = page.read_text()
    assert 'id="dies"' in text and 'id="slowest"' in text and str(rh) in text


def test_rehearsal_write_report_writes_json_meta_and_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_RECIPE_SIMULATED", "1")
    out = tmp_path / "rehearsals" / "2-nodes.json"
    reports = [NodeReport("a3-01", "10.0.0.1", 16, [], 4.0, 1.0, 1.5), NodeReport("a3-02", "10.0.0.2", 16, [], 9.0)]
    summary = {"nnodes": 2, "dies_per_node": 16, "backend": "gloo", "placement": [{"group": 0, "node": "a3-01"}]}
    page = write_report(out, reports, summary)
    doc = json.loads(out.read_text())
    assert page == out.with_suffix(".html") and page.is_file()
    assert doc["meta"]["kind"] == "rehearsal" and doc["meta"]["simulated"] is True and doc["meta"]["generated"]
    text = page.read_text()
    assert "SIMULATED cluster" in text and 'data-node="a3-02">slowest node: <b>a3-02</b>' in text


def test_preflight_plugin_writes_the_page_and_names_it(tmp_path: Path) -> None:
    from tests.browser.reports import rep

    report = write(tmp_path / "preflight-sim.json", preflight_report(n_hosts=2))
    line = rep.write_readiness_page(str(report))
    assert line == f"readiness page: {(tmp_path / 'preflight-sim.html').as_uri()}"
    meta = json.loads(report.read_text())["meta"]
    assert meta["inventory"] == "sim2" and meta["hosts"]["a3-02"]["rank"] == 1
    assert meta["hosts"]["a3-01"]["ping_rotation"] == ROTATION and len(meta["hosts"]["a3-01"]["npu_ips"]) == 16
    assert meta["hosts"]["a3-01"]["ping_plan"] == act.ping_plan(hosts(2), "a3-01", 16, ROTATION, npu_ips(hosts(2), 16))
    # a page that cannot be drawn is said on the last line; it never fails the preflight
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    assert rep.write_readiness_page(str(broken)).startswith("readiness page not written (ReportError: ")


def test_recorded_ping_plan_gives_the_tried_pairs() -> None:
    """A schedule of {die, peer, peer_die, address} items (pings across die indices) marks exactly those die pairs
    tried; a key that is no schedule (a rotation number) marks nothing."""
    doc = preflight_report(n_hosts=3)
    names = hosts(3)
    for i, h in enumerate(names):
        info = doc["meta"]["hosts"][h]
        info["ping_rotation"] = 20788
        info["ping_plan"] = [
            {"die": d, "peer": names[(i + 1 + d % 2) % 3], "peer_die": (d + 5) % 16, "address": "x"} for d in range(16)
        ]
    m = model_of(doc)
    assert m.schedule_known
    assert m.pairs[("a3-01", "a3-02")].tried == {(d, (d + 5) % 16) for d in range(0, 16, 2)}
    assert m.pairs[("a3-01", "a3-03")].tried == {(d, (d + 5) % 16) for d in range(1, 16, 2)}
    assert sum(1 for p in m.pairs.values() if p.status == "ok") == 6
    for info in doc["meta"]["hosts"].values():
        del info["ping_plan"]
    bare = model_of(doc)
    assert not bare.schedule_known and not any(p.tried for p in bare.pairs.values())
