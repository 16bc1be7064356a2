"""The site, chosen once (`make use INVENTORY=inventory/<site>`, scripts/site_choice.py): every target that acts on a
site's hosts reads it, none ever acts on the tracked sample or on nothing, and `ansible-playbook deploy.yml` typed
in ansible/ takes the same choice (ansible.cfg's default inventory is the link `make use` writes)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from simkit.paths import load_by_path

REPO = Path(__file__).resolve().parents[2]
sc = load_by_path("site_choice", REPO / "scripts" / "site_choice.py")

# What a target's recipe uses when it acts on the site's hosts.
ACTS_ON_SITE = re.compile(r"\$\((ON_HEAD|need_site)\)|-i \$\(INVENTORY\)|--inventory")


def site_targets() -> dict[str, list[str]]:
    """Every make target whose recipe reaches the site's hosts, with its recipe lines (read from mk/*.mk)."""
    found: dict[str, list[str]] = {}
    for mk in sorted((REPO / "mk").glob("*.mk")):
        target = ""
        for line in mk.read_text().splitlines():
            m = re.match(r"^([a-z][\w-]*):(?!=)", line)
            if m:
                target = m.group(1)
            elif line.startswith("\t") and target and ACTS_ON_SITE.search(line):
                found.setdefault(target, []).append(line.strip())
    return found


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_the_site_targets_are_found() -> None:
    # the scan must see the ones README names, or the tests below check nothing
    assert {"deploy", "preflight", "train", "smoke", "runs", "attach", "stop", "logs", "doctor"} <= set(site_targets())


@pytest.mark.parametrize("target", sorted(site_targets()))
def test_no_target_acts_on_no_site_or_on_the_sample(target: str) -> None:
    # SITE_LINK= : as on a control node where `make use` never ran (whatever this checkout chose)
    common = ["SITE_LINK=", "RECIPE=qwen3.5-35b-fsdp", "RUN=x"]
    none = make(target, *common)
    assert none.returncode == 2, (target, none.stdout[-500:], none.stderr[-500:])
    (line,) = [x for x in none.stderr.splitlines() if not x.startswith("make")]
    assert "no site chosen; fix: `make use INVENTORY=inventory/<site>`" in line, line
    for sample in ("inventory/sample", str(REPO / "ansible/inventory/sample"), "inventory/sample/hosts.yml"):
        p = make(target, *common, f"INVENTORY={sample}")
        assert p.returncode == 2, (target, sample, p.stderr[-500:])
        (line,) = [x for x in p.stderr.splitlines() if not x.startswith("make")]
        assert "is the tracked sample" in line and "make use INVENTORY=" in line, line


def test_the_remembered_site_reaches_every_target_and_a_command_line_wins(tmp_path: Path) -> None:
    for link, inventory in (("mysite", "inventory/mysite"), (str(tmp_path), str(tmp_path))):
        for target in ("runs", "train", "deploy"):
            dry = make("-n", target, f"SITE_LINK={link}", "RECIPE=qwen3.5-35b-fsdp")
            assert dry.returncode == 0, dry.stderr
            assert f"'{inventory}'" in dry.stdout or f"-i {inventory} " in dry.stdout, (target, dry.stdout)
            # the follow-up commands a detached run prints need no INVENTORY= for the remembered site
            assert "--site-hint ''" in dry.stdout or target == "deploy", dry.stdout
        given = make("-n", "runs", f"SITE_LINK={link}", "INVENTORY=inventory/other")
        assert "--inventory 'inventory/other'" in given.stdout and "--site-hint 'INVENTORY=inventory/other'" in (
            given.stdout
        )


def test_use_points_the_link_at_the_site_and_refuses_what_it_cannot_act_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ansible = tmp_path / "ansible"
    (ansible / "inventory" / "sample").mkdir(parents=True)
    (ansible / "inventory" / "sample" / "hosts.yml").write_text("all: {}\n")
    site = ansible / "inventory" / "a3-east"
    site.mkdir()
    monkeypatch.setattr(sc, "ANSIBLE", ansible)
    monkeypatch.setattr(sc, "SAMPLE", ansible / "inventory" / "sample")
    monkeypatch.setattr(sc, "CURRENT", ansible / "inventory" / "current")
    # a folder without hosts.yml, the sample, nothing, a missing one: refused, and no link is made
    for bad, why in (
        ("inventory/a3-east", "holds no hosts.yml"),
        ("inventory/sample", "tracked sample"),
        ("", "no site chosen"),
        ("inventory/a3-west", "does not exist"),
    ):
        assert sc.main(["use", bad]) == 2
        assert why in capsys.readouterr().err
        assert not (ansible / "inventory" / "current").is_symlink()
    (site / "hosts.yml").write_text("all: {}\n")
    assert sc.main(["use", "inventory/a3-east"]) == 0
    link = ansible / "inventory" / "current"
    assert link.is_symlink() and str(link.readlink()) == "a3-east" and link.resolve() == site.resolve()
    assert sc.problem("inventory/current") == ""
    # another site replaces it; an absolute one stays absolute
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "hosts.yml").write_text("all: {}\n")
    assert sc.main(["use", str(other)]) == 0 and link.readlink() == other
    assert sc.main(["use", "inventory/a3 east"]) == 2  # not a plain path: never written into the link


def test_ansible_playbook_typed_in_ansible_takes_the_same_choice() -> None:
    cfg = (REPO / "ansible" / "ansible.cfg").read_text()
    assert re.search(r"^inventory = inventory/current$", cfg, re.M), "ansible.cfg's default inventory"
    ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "ansible/inventory/current"], check=False)
    assert ignored.returncode == 0, "the choice is the machine's, never committed"
    assert sc.CURRENT == REPO / "ansible" / "inventory" / "current"
