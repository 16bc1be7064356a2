"""Property-based tests (hypothesis) of the deploy's input handling, loaded in-process as the other unit tests load
the plugins: the inventory validator and every preflight parser, fed values nobody wrote by hand.

The contract: the validator returns a list of problem lines, each one line in the shape `SUBJECT: WHAT; fix: FIX`
naming what it is about; a parser returns its result type; a check returns a row with every field. Never an
exception. Each test is bounded (max_examples, no per-example deadline on a busy machine) and derandomized;
the file runs in well under a minute on two cores.
"""

from __future__ import annotations

import importlib
import os
import re
import string
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from verl_recipe import inventory as val
from verl_recipe.inventory import fields

from tests.ansible.helpers import load_plugin, preflight_module, valid_hosts, valid_site

pre = preflight_module()
rep = load_plugin("roles/preflight/action_plugins/a3_preflight_report.py")

# Derandomized: CI and `make test` see the same examples every run (a red unit tier is a fault, never a draw);
# a hunt for new faults is FUZZ_RANDOM=1 FUZZ_EXAMPLES=5000.
BOUNDED = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "200")),
    deadline=None,
    derandomize=os.environ.get("FUZZ_RANDOM") != "1",
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
CONTROL = {"ansible_version": "2.19.0", "ansible_min": "2.19", "ansible_max": "2.20", "required_files": []}
LINE = re.compile(r"^(inventory|control node)(: .+?)?: .+; fix: .+$")

# Text as tools and people produce it: ASCII, digits other scripts write (superscripts, Arabic-Indic, full-width),
# GBK-looking CJK, control characters, replacement characters, separators the parsers split on.
TRICKY = "²³¹٣۴０１９߀ \t\r\n\x00\x1b\ufffd中文错误|:=%/.-_,;$()[]{}\"'"
text = st.text(alphabet=st.sampled_from(string.printable + TRICKY), max_size=80)
lines = st.lists(text, max_size=12).map("\n".join)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=True), text
)
junk = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=3), max_leaves=8
)
raw_bytes = st.binary(max_size=200)
# Paths, addresses and names as a site might mistype them, beside any value at all.
path_like = st.builds(lambda a, b: a + b, st.sampled_from(["", "/", "./", "../", "/etc/", "/mnt/shared/", "~/"]), text)
address_like = st.builds(
    lambda a, b: f"{a}.{b}", st.sampled_from(["127.0.0", "0.0.0", "255.255.255", "224.0.0", "10.0.0", "240.1.1"]), text
)
values = st.one_of(text, path_like, address_like, junk)


def good_site() -> dict[str, Any]:
    return valid_site()


def good_hosts(n: int = 3, dies: int = 4) -> dict[str, dict[str, Any]]:
    return valid_hosts(n, dies)


def assert_lines(errors: Any) -> None:
    assert isinstance(errors, list)
    for e in errors:
        assert isinstance(e, str) and "\n" not in e and "\r" not in e, repr(e)
        assert LINE.match(e), e
        assert len(e) < 1200, e  # a value of any size is shown cut short


def assert_row(row: Any) -> None:
    assert isinstance(row, dict)
    assert set(row) == {"check", "ok", "status", "dies", "peers", "entries", "found", "expected", "fix"}
    assert {e["die"] for e in row["entries"]} <= set(row["dies"])  # an entry is about a die the row names
    assert isinstance(row["ok"], bool) and row["status"] == ("ok" if row["ok"] else "failed")
    assert row["ok"] or row["fix"], row  # a failed row always says what to do


# ---- the inventory validator ----


@BOUNDED
@given(st.dictionaries(st.sampled_from(val.SITE_KEYS), junk))
def test_any_site_values_give_problem_lines(site: dict[str, Any]) -> None:
    assert_lines(val.check_site(site, {**CONTROL, "image_stage": True}))


@BOUNDED
@given(st.sampled_from(val.SITE_KEYS), values)
def test_one_bad_site_value_is_named_by_every_line(key: str, value: Any) -> None:
    site = {**good_site(), key: value}
    errors = val.check_site(site, {**CONTROL, "image_stage": False})
    assert_lines(errors)
    for e in errors:
        assert key in e, (key, e)


@BOUNDED
@given(text.map(lambda t: "site_" + t))
def test_unknown_site_names_are_refused(key: str) -> None:
    errors = val.check_site({**good_site(), key: "x"}, CONTROL)
    assert_lines(errors)
    if key not in val.SITE_KEYS:
        assert len(errors) == 1 and "is not a site setting" in errors[0], errors


HOST_KEYS = ["ansible_host", "ansible_port", "a3_node_rank", "a3_cluster_ip", "a3_cluster_nic", "a3_npu_ips"]


@BOUNDED
@given(st.sampled_from(HOST_KEYS), values | st.lists(address_like, max_size=5))
def test_one_bad_host_value_is_named_by_every_line(key: str, value: Any) -> None:
    hosts = good_hosts()
    hosts["h1"][key] = value
    errors = val.check_hosts(list(hosts), ["h0"], hosts, 4)
    assert_lines(errors)
    for e in errors:
        assert key in e or (key == "a3_npu_ips" and "NPU addresses" in e), (key, e)


@BOUNDED
@given(text)
def test_any_host_name_is_checked_in_one_line(name: str) -> None:
    hosts = good_hosts()
    hosts[name] = hosts.pop("h2")
    errors = val.check_hosts(list(hosts), ["h0"], hosts, 4)
    assert_lines(errors)
    if not fields.HOST_NAME_RE.fullmatch(name):
        assert errors and all(fields._show(name) in e for e in errors), errors
    else:
        assert errors == [], errors


@BOUNDED
@given(st.dictionaries(text, st.dictionaries(st.sampled_from(HOST_KEYS + ["a3_vnic_ips"]), junk), max_size=4), junk)
def test_any_hosts_give_problem_lines(hosts: dict[str, dict[str, Any]], dies: Any) -> None:
    names = list(hosts)
    assert_lines(val.check_hosts(names, names[:1], hosts, dies))
    assert_lines(val.check_vnic(names, hosts, dies))


# ---- the preflight module's parsers and checks ----


@BOUNDED
@given(lines)
def test_text_parsers_return_their_types(t: str) -> None:
    for parse in (pre.parse_kv, pre.parse_colon, pre.parse_hccn_conf, pre.os_release, pre.parse_ip_addr):
        out = parse(t)
        assert isinstance(out, dict) and all(isinstance(k, str) for k in out)
    assert isinstance(pre.parse_mountpoints(t), set)
    loss = pre.parse_ping_loss(t)
    assert loss is None or loss >= 0
    dies, procs = pre.parse_npu_table(t)
    assert all(isinstance(n, int) and isinstance(c, int) for n, c in dies)
    assert all(isinstance(p["pid"], int) for p in procs)
    assert all(isinstance(v, int) for v in pre.parse_chip_map(t).values())
    policies, rules = pre.parse_iptables(t)
    assert isinstance(pre.firewall_blocks(policies, rules, "10.0.0.2"), str)
    assert all(isinstance(v, int) for v in pre.parse_limits(t).values())
    assert isinstance(pre.parse_holders(t, "verl-recipe"), list)
    assert isinstance(pre.first_line(t), str) and "\n" not in pre.first_line(t)
    assert isinstance(pre.os_allowed(pre.os_release(t), ["openEuler 22.03 (LTS-SP4)", t]), bool)


@BOUNDED
@given(
    st.lists(st.sampled_from(["Max open files", "Max locked memory", " ", "unlimited", "1024", "²", "12"]), max_size=8)
)
def test_truncated_limits_lines_are_left_out(words: list[str]) -> None:
    out = pre.parse_limits("".join(words))
    assert set(out) <= {"nofile", "memlock"} and all(isinstance(v, int) for v in out.values())


@BOUNDED
@given(st.text(alphabet=st.sampled_from(string.digits + "²³٣０ .-"), max_size=12))
def test_digits_int_refuses_are_not_numbers(t: str) -> None:
    got = pre.as_int(t)
    assert got is None or (t.isascii() and got == int(t))
    table = f"| {t} Ascend910 | OK |\n| 0 {t} | 0000:C1:00.0 |\nProcess id\n| {t} 0 | {t} | x |"
    dies, procs = pre.parse_npu_table(table)
    assert all(isinstance(k[0], int) for k in dies) and all(isinstance(p["npu"], int) for p in procs)


@BOUNDED
@given(lines, st.floats(min_value=0, max_value=4096))
def test_memory_row_from_any_meminfo(t: str, want: float) -> None:
    import tempfile

    with tempfile.NamedTemporaryFile("w", encoding="utf-8", errors="replace", suffix="meminfo") as fh:
        fh.write(t)
        fh.flush()
        row = pre.memory_check({"meminfo_file": fh.name, "min_host_ram_gib": want})
    assert_row(row)
    assert row["check"] == "host_memory"


def test_empty_memtotal_fails_its_row(tmp_path: Path) -> None:
    for text_ in ("MemTotal:\n", "MemTotal:   ²³ kB\n", "MemFree: 1 kB\n"):
        (tmp_path / "m").write_text(text_)
        row = pre.memory_check({"meminfo_file": str(tmp_path / "m"), "min_host_ram_gib": 0})
        assert not row["ok"] and "MemTotal" in row["found"] and row["fix"], row


@BOUNDED
@given(text, junk.map(lambda v: __import__("json").dumps(v, default=str)))
def test_docker_runtimes_of_any_shape_give_a_row(name: str, runtimes: str) -> None:
    host = pre.Host({"command_timeout": 5, "tool_dirs": []})
    for rc in (0, 1):
        row = pre.default_runtime_check(rc, f"{name}|{runtimes}", host)
        assert_row(row)
        assert row["check"] == "docker_default_runtime"


def test_runtimes_not_a_map_fails_with_a_clear_finding() -> None:
    host = pre.Host({"command_timeout": 5, "tool_dirs": []})
    for runtimes in ("[1, 2]", '"runc"', "null", "{not json"):
        row = pre.default_runtime_check(0, f"runc|{runtimes}", host)
        assert not row["ok"] and "no runtime table" in row["found"], row
    row = pre.default_runtime_check(0, 'runc|{"runc": "not a map"}', host)  # an entry that is no map: by name
    assert row["found"].startswith("runc (runc")


@BOUNDED
@given(raw_bytes)
def test_tool_output_that_is_not_utf8_fails_one_row(raw: bytes) -> None:
    host = pre.Host({"command_timeout": 5, "tool_dirs": []})
    out = host.decode(["/usr/local/sbin/npu-smi", "info"], raw)
    assert isinstance(out, str)
    row = pre.tool_output_check(host)
    assert_row(row)
    try:
        raw.decode("utf-8")
        assert row["ok"]
    except UnicodeDecodeError:
        assert not row["ok"] and row["found"].startswith("`npu-smi info` byte "), row


def test_a_gbk_tool_fails_a_row_not_the_module(tmp_path: Path) -> None:
    """A tool that prints GBK (a Chinese-language host) or output cut mid-character, run through Host.run as on a
    host: the text comes back with replacement characters and the tool_output row fails, naming it."""
    tool = tmp_path / "npu-smi"
    tool.write_bytes(b"#!/bin/sh\nprintf '\\325\\375\\263\\243 \\344\\270'\n")  # GBK "normal", a cut UTF-8 char
    tool.chmod(0o755)
    host = pre.Host({"command_timeout": 5, "tool_dirs": [str(tmp_path)]})
    rc, out = host.run([str(tool), "info"])
    assert rc == 0 and "\ufffd" in out
    row = pre.tool_output_check(host)
    assert not row["ok"] and row["found"].startswith("`npu-smi info` byte 0: b'\\xd5'"), row


def test_a_check_that_breaks_becomes_a_row() -> None:
    def broken(*_: Any) -> None:
        raise KeyError("surprise")

    row = pre.guarded("npu_checks", broken)
    assert_row(row)
    assert not row["ok"] and row["found"] == "the check itself failed: KeyError: 'surprise'"


def test_truncated_dockerd_limits_fail_the_engine_limits_row(tmp_path: Path, monkeypatch: Any) -> None:
    import os

    pid = tmp_path / "docker.pid"
    pid.write_text(f"{os.getpid()}\n")
    real = pre.read
    node_checks = importlib.import_module("ansible.module_utils.a3_checks_node")
    monkeypatch.setattr(
        node_checks,
        "read",
        lambda p: "Limit  Soft  Hard\nMax open files  1024" if p.endswith(f"/{os.getpid()}/limits") else real(p),
    )
    limits, row = pre.engine_limits(str(pid))
    assert_row(row)
    assert not row["ok"] and "nofile and memlock" in row["found"], row
    assert set(limits) == {"nofile", "memlock"}  # this process's own, so the engine play still gets caps
    pid.write_text("²\n")
    limits, row = pre.engine_limits(str(pid))
    assert row["ok"] and row["found"] == "no running dockerd: this process's limits"


@BOUNDED
@given(text, text)
def test_hdk_versions_of_any_text_compare_or_fail_the_row(driver: str, firmware: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for name, value in (("driver", driver), ("firmware", firmware)):
            Path(d, name).write_text(f"Version={value}\npackage_version={value}\n", encoding="utf-8", errors="replace")
        rows, _ = pre.version_checks(
            {"hdk_min": "26.0.RC1", "driver_version_file": f"{d}/driver", "firmware_version_file": f"{d}/firmware"}
        )
    for row in rows:
        assert_row(row)


# ---- the report: any module result becomes rows ----


@BOUNDED
@given(st.dictionaries(st.sampled_from(["a3-01", "a3-02"]), junk | st.fixed_dictionaries({"checks": junk})))
def test_any_module_result_becomes_rows(results: dict[str, Any]) -> None:
    s = rep.summarize(["a3-01", "a3-02"], results, {"a3-01": ["10.0.0.1"], "a3-02": ["10.0.0.2"]})
    assert {r["host"] for r in s["rows"]} <= {"a3-01", "a3-02"}
    for r in s["rows"]:
        assert list(r) == ["host", "check", "status", "ok", "dies", "peers", "entries", "found", "expected", "fix"]
        assert all(isinstance(d, int) for d in r["dies"])
    assert isinstance(rep.render(s["failures"]), str)
