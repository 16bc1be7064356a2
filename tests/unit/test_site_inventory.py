"""`make inventory` (scripts/site_inventory.py) without Docker or a network: its fact script runs here under sh against
fake hosts (a folder each: /etc/hccn.conf, /dev/davinciN, npu-smi, version.info, /proc/meminfo, and stand-ins for
`ip`, `hostname` and hccn_tool), whose files and tool answers follow the real formats (docs/a3-tools.md: hccn.conf's
key family, `hccn_tool -i <die> -ip -g` / `-vnic -g`, version.info, `ip -o -4 addr show`). A stand-in for ssh
runs the script for the host its destination names, or fails the way ssh does. Every refusal is checked line by
line, with nothing written; what is written passes the project's inventory validator and yamllint."""

from __future__ import annotations

import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from verl_recipe import inventory as val
from verl_recipe.hostfacts import common, facts, probe

from simkit.paths import load_by_path

REPO = Path(__file__).resolve().parents[2]


si = load_by_path("site_inventory", REPO / "scripts" / "site_inventory.py")

# ssh's own words (OpenSSH 9), as the refusals quote them.
REFUSED = "ssh: connect to host {a} port 22: Connection refused\r\n"
KEY_UNKNOWN = (
    "No ED25519 host key is known for {a} and you have requested strict checking.\r\nHost key verification failed.\r\n"
)
KEY_CHANGED = (
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
    "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n"
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
    "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\r\n"
    "Offending ED25519 key in /k/known_hosts:2\r\n"
    "Host key for {a} has changed and you have requested strict checking.\r\nHost key verification failed.\r\n"
)
DENIED = "deploy@{a}: Permission denied (publickey).\r\n"

FAKE_SSH = r"""#!/bin/sh
# Stand-in for ssh: records its arguments, then runs `sh -s` for the fake host its destination names, or fails as
# ssh does (exit 255, ssh's message) when the host's folder says so.
for a in "$@"; do last_but_one="$prev"; prev="$a"; done
addr="$last_but_one"
d="$FAKE_SITE/$addr"
printf '%s\n' "$@" > "$d/argv"
if [ -f "$d/ssh_fails" ]; then cat "$d/ssh_fails" >&2; exit 255; fi
VERL_INVENTORY_ROOT="$d/root" PATH="$d/bin:$PATH" SSH_CONNECTION="$(cat "$d/ssh_connection")"
export VERL_INVENTORY_ROOT PATH SSH_CONNECTION
exec sh -s
"""

# hccn_tool's answers (docs/a3-tools.md T7): `ipaddr:%s` / `netmask:%s`, the unconfigured die's sentence, and the
# A3 vNIC query's three lines. The die's answers are files of the fake host (ip_<die>, vnic_<die>).
FAKE_HCCN_TOOL = r"""#!/bin/sh
here="$(dirname "$0")/../../../../.."
die="$2"
case "$3" in
  -ip)
    if [ -f "$here/.tool/ip_$die" ]; then printf 'ipaddr:%s\nnetmask:255.255.128.0\n' "$(cat "$here/.tool/ip_$die")"
    else echo 'Get ipconf failed, because no ip was preset there!'; exit 1; fi ;;
  -vnic)
    if [ -f "$here/.tool/vnic_$die" ]; then
      printf 'vnic link status: UP\nvnic ipaddr: %s\nvnic netmask: 255.255.255.0\n' "$(cat "$here/.tool/vnic_$die")"
    else echo 'Command execute failed!'; exit 1; fi ;;
  *) echo 'Command execute failed!'; exit 1 ;;
esac
"""

DRIVER_INFO = (
    "Version={v}\nascendhal_version=7.35.23\naicpu_version=1.0\ntdt_version=1.0\nlog_version=1.0\nprof_version=2.0\n"
    "dvppkernels_version=1.1\ntsfw_version=1.0\nInnerversion=V100R001C10SPC001B257\n"
    "compatible_version=[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C22],[V100R001C23]\n"
    "compatible_version_fw=[7.0.0,8.9.9]\npackage_version={v}\n"
)
FIRMWARE_INFO = (
    "Version=7.8.0.5.220\nfirmware_version=1.0\npackage_version={v}\ncompatible_version_drv=[25.0,25.0.],[26.0,26.0.]\n"
)


def npu_ips(host: int, dies: int = 16) -> list[str]:
    """Addresses with no pattern a formula would find: per host and die, from a small table."""
    third = [7, 131, 64, 200, 12, 99, 180, 33, 145, 5, 222, 71, 118, 250, 40, 163]
    return [f"10.{40 + host}.{third[d]}.{(d * 37 + host * 11) % 250 + 2}" for d in range(dies)]


def vnic_ips(host: int, dies: int = 16) -> list[str]:
    return [f"10.{90 + host}.{(d * 53) % 255}.{(d * 29 + host) % 250 + 3}" for d in range(dies)]


@dataclass
class FakeHost:
    """One A3 host as the fact script finds it (the defaults: a healthy A3 node)."""

    index: int
    name: str = ""
    cluster_ip: str = ""
    nic: str = "enp189s0f0"
    extra_inets: list[tuple[str, str]] = field(default_factory=list)
    npu: list[str] | None = None
    vnic: list[str] | None = None
    dies: int = 16
    missing_nodes: tuple[int, ...] = ()
    conf: bool = True
    conf_skip: tuple[int, ...] = ()  # dies with no address_<die> line
    tool: bool = True
    tool_skip: tuple[int, ...] = ()  # dies whose -ip -g finds no address
    npu_smi: tuple[str, ...] = ("/usr/local/bin/npu-smi", "/usr/local/sbin/npu-smi")
    hdk: str = "26.0.rc1"
    mem_kib: int = 1_584_000_000
    ssh_fails: str = ""
    reached: str = ""  # the server address $SSH_CONNECTION names (default: cluster_ip)

    def __post_init__(self) -> None:
        self.name = self.name or f"a3-{self.index:02d}"
        self.cluster_ip = self.cluster_ip or f"10.10.0.{10 + self.index}"
        self.npu = npu_ips(self.index, self.dies) if self.npu is None else self.npu
        self.vnic = vnic_ips(self.index, self.dies) if self.vnic is None else self.vnic

    @property
    def address(self) -> str:
        return self.cluster_ip

    def lay(self, site: Path) -> None:
        d = site / self.address
        root, bin_ = d / "root", d / "bin"
        for sub in ("etc", "dev", "usr/local/bin", "usr/local/sbin", "usr/local/Ascend/driver/tools",
                    "usr/local/Ascend/firmware", "proc", ".tool"):  # fmt: skip
            (root / sub).mkdir(parents=True, exist_ok=True)
        bin_.mkdir(parents=True, exist_ok=True)
        (d / "ssh_connection").write_text(f"10.10.0.2 51234 {self.reached or self.cluster_ip} 22\n")
        if self.ssh_fails:
            (d / "ssh_fails").write_text(self.ssh_fails.format(a=self.address))
        assert self.npu is not None and self.vnic is not None
        for die in range(self.dies):
            if die not in self.missing_nodes:
                (root / "dev" / f"davinci{die}").write_text("")
        for node in ("davinci_manager", "devmm_svm", "hisi_hdc"):
            (root / "dev" / node).write_text("")
        if self.conf:  # the A3 key family: address, netmask, gateway, arp to the module's other die, netdetect, ...
            lines = []
            for die in range(self.dies):
                peer = die ^ 1 if die ^ 1 < self.dies else die
                if die not in self.conf_skip:
                    lines += [f"address_{die}={self.npu[die]}", f"netmask_{die}=255.255.128.0"]
                lines += [
                    f"gateway_{die}=10.40.0.1",
                    f"arp_{die}=-i eth{die} -s {self.npu[peer]} bc:1e:85:d8:ca:{0xDD - die % 2:02x}",
                    f"netdetect_{die}=10.40.0.1",
                    f"send_arp_status_{die}=1",
                    f"tls_enable_{die}=0",
                ]
            (root / "etc" / "hccn.conf").write_text("\n".join(lines) + "\n")
        if self.tool:
            tool = root / "usr/local/Ascend/driver/tools/hccn_tool"
            tool.write_text(FAKE_HCCN_TOOL)
            tool.chmod(0o755)
            for die in range(self.dies):
                if die not in self.tool_skip:
                    (root / ".tool" / f"ip_{die}").write_text(self.npu[die])
                if die < len(self.vnic):
                    (root / ".tool" / f"vnic_{die}").write_text(self.vnic[die])
        for path in self.npu_smi:
            exe = root / path.lstrip("/")
            exe.write_text("#!/bin/sh\nexit 0\n")
            exe.chmod(0o755)
        (root / "usr/local/Ascend/driver/version.info").write_text(DRIVER_INFO.format(v=self.hdk))
        (root / "usr/local/Ascend/firmware/version.info").write_text(FIRMWARE_INFO.format(v=self.hdk))
        (root / "proc" / "meminfo").write_text(
            f"MemTotal:       {self.mem_kib} kB\nMemFree:        {self.mem_kib // 2} kB\n"
        )
        inets = [("lo", "127.0.0.1/8"), (self.nic, f"{self.cluster_ip}/24"), *self.extra_inets]
        ip_lines = [
            f"{i + 1}: {nic}    inet {addr} brd 10.255.255.255 scope global {nic}\\       valid_lft forever "
            "preferred_lft forever"
            for i, (nic, addr) in enumerate(inets)
        ]
        script("ip", bin_, "cat <<'EOF'\n" + "\n".join(ip_lines) + "\nEOF\n")
        script("hostname", bin_, f"echo {self.name}\n")
        script("sudo", bin_, "exit 1\n")  # never a password-less sudo here: hccn_tool runs as the user


def script(name: str, folder: Path, body: str) -> None:
    p = folder / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@dataclass
class Site:
    base: Path
    hosts: list[FakeHost]

    @property
    def dir(self) -> Path:
        return self.base / "hosts"

    @property
    def out(self) -> Path:
        return self.base / "inventory"

    def args(self, *extra: str, **over: str) -> list[str]:
        """The script's arguments for this site; `over` replaces one (site="", known_hosts="/x", ...)."""
        kh = self.base / "known_hosts"
        kh.write_text("")
        opts = {
            "site": "unit",
            "hosts": " ".join(h.address for h in self.hosts),
            "known_hosts": str(kh),
            "out": str(self.out),
            "ssh": str(self.base / "ssh"),
            **over,
        }
        return [*(w for k, v in opts.items() for w in (f"--{k.replace('_', '-')}", v)), *extra]

    def run(self, capsys: pytest.CaptureFixture[str], *extra: str, **over: str) -> tuple[int, str, str]:
        for h in self.hosts:
            h.lay(self.dir)
        rc = si.main(self.args(*extra, **over))
        out = capsys.readouterr()
        return rc, out.out, out.err

    def written(self) -> dict[str, Any]:
        data: dict[str, Any] = yaml.safe_load((self.out / "hosts.yml").read_text())
        return data


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    script("ssh", tmp_path, FAKE_SSH.removeprefix("#!/bin/sh\n"))
    monkeypatch.setenv("FAKE_SITE", str(tmp_path / "hosts"))
    yield Site(tmp_path, [FakeHost(1), FakeHost(2), FakeHost(3)])


def refusal(rc: int, err: str, site: Site) -> list[str]:
    """The problem lines of a refusal, after checking that it is one and that nothing was written."""
    assert rc == 2, err
    assert not (site.out / "hosts.yml").exists() and not (site.out / "group_vars").exists()
    lines = err.splitlines()
    assert lines[-1].startswith("inventory: nothing written ("), lines
    problems = lines[:-1]
    assert all("; fix: " in line for line in problems), problems
    return problems


# ---- a healthy site ----


def test_three_hosts_give_an_inventory_the_validator_accepts(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = site.run(capsys)
    assert rc == 0, err
    data = site.written()
    nodes = data["all"]["children"]["a3_nodes"]["hosts"]
    assert list(nodes) == ["a3-01", "a3-02", "a3-03"]
    assert list(data["all"]["children"]["ray_head"]["hosts"]) == ["a3-01"]
    for rank, h in enumerate(site.hosts):
        hv = nodes[h.name]
        assert hv == {
            "ansible_host": h.address,
            "a3_node_rank": rank,
            "a3_cluster_ip": h.cluster_ip,
            "a3_cluster_nic": "enp189s0f0",
            "a3_npu_ips": h.npu,
            "a3_vnic_ips": h.vnic,
        }
    assert val.check_hosts(list(nodes), ["a3-01"], nodes, 16) == []
    assert data["all"]["children"]["a3_nodes"]["vars"]["ansible_user"] == "deploy"
    # group_vars from the sample, as the site has none
    assert (site.out / "group_vars" / "all" / "site.yml").read_text() == (
        REPO / "ansible/inventory/sample/group_vars/all/site.yml"
    ).read_text()
    text = (site.out / "hosts.yml").read_text()
    for needle in (
        "a3_npu_ips: /etc/hccn.conf address_<die>; a3_vnic_ips: hccn_tool -i <die> -vnic -g",
        "dies: 16 (/dev/davinci0-15); npu-smi: /usr/local/bin/npu-smi and /usr/local/sbin/npu-smi",
        "HDK driver 26.0.rc1, firmware 7.8.0.5.220 (package 26.0.rc1)",
        "memory 1511 GiB (MemTotal)",
        "the address SSH reached ($SSH_CONNECTION)",
    ):
        assert text.count(needle) == 3, needle
    lint = subprocess.run(
        [str(Path(sys.executable).parent / "yamllint"), "--strict", "-c", str(REPO / ".yamllint"), str(site.out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout
    assert "inventory: 3 host(s), 16 dies each; Ray head a3-01 (10.10.0.11)" in out
    # one ssh per host, host keys checked, no prompt, the given known_hosts
    for h in site.hosts:
        argv = (site.dir / h.address / "argv").read_text().splitlines()
        assert argv[-2:] == [h.address, "sh -s"]
        assert "StrictHostKeyChecking=yes" in argv and "BatchMode=yes" in argv
        assert f"UserKnownHostsFile={site.base / 'known_hosts'}" in argv


def test_the_differences_real_sites_have_are_written_down(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    """npu-smi only in sbin, no hccn.conf (hccn_tool answers), another HDK, no vNIC, a port other than 22."""
    site.hosts[1] = FakeHost(2, npu_smi=("/usr/local/sbin/npu-smi",), conf=False, hdk="26.0.1", vnic=[])
    rc, out, err = site.run(capsys, port="2222", key=str(site.base / "ssh"))
    assert rc == 0, err
    nodes = site.written()["all"]["children"]["a3_nodes"]["hosts"]
    assert nodes["a3-02"]["a3_npu_ips"] == site.hosts[1].npu and "a3_vnic_ips" not in nodes["a3-02"]
    assert all(hv["ansible_port"] == 2222 for hv in nodes.values())
    text = (site.out / "hosts.yml").read_text()
    assert "npu-smi: /usr/local/sbin/npu-smi only (compose.yaml binds NPU_SMI_PATH" in text
    assert "a3_npu_ips: hccn_tool -i <die> -ip -g (no /etc/hccn.conf); a3_vnic_ips: none (hccn_tool -vnic -g: Comm" in (
        text
    )
    assert "HDK driver 26.0.1," in text
    assert "ansible_ssh_private_key_file:" in text
    assert "inventory: note: a3-02: npu-smi only in /usr/local/sbin" in out
    assert "inventory: note: HDK driver versions differ between hosts: 26.0.1, 26.0.rc1" in out
    argv = (site.dir / "10.10.0.12" / "argv").read_text().splitlines()
    assert argv[argv.index("-p") + 1] == "2222" and "IdentitiesOnly=yes" in argv


def test_cluster_net_picks_the_address_on_the_cluster_network(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    """SSH reaches the hosts on a management network; CLUSTER_NET names the cluster network."""
    site.hosts = [
        FakeHost(i, nic="eno1", extra_inets=[("enp189s0f0", f"192.168.50.{i}/24")], reached=f"10.10.0.{10 + i}")
        for i in (1, 2)
    ]
    rc, _, err = site.run(capsys, cluster_net="192.168.50.0/24")
    assert rc == 0, err
    nodes = site.written()["all"]["children"]["a3_nodes"]["hosts"]
    assert [(h["ansible_host"], h["a3_cluster_ip"], h["a3_cluster_nic"]) for h in nodes.values()] == [
        ("10.10.0.11", "192.168.50.1", "enp189s0f0"),
        ("10.10.0.12", "192.168.50.2", "enp189s0f0"),
    ]


def test_an_existing_inventory_is_kept_unless_forced(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    site.out.mkdir()
    (site.out / "hosts.yml").write_text("---\n# mine\n")
    (site.out / "group_vars").mkdir()
    rc, _, err = site.run(capsys)
    assert rc == 2 and err.splitlines() == [
        f"SITE: {site.out / 'hosts.yml'} exists; fix: FORCE=1 to write it anew from the hosts, or another SITE (the "
        "file is never merged)"
    ]
    assert (site.out / "hosts.yml").read_text() == "---\n# mine\n"
    assert not (site.dir / "10.10.0.11" / "argv").exists()  # no host was contacted
    rc, _, err = site.run(capsys, "--force")
    assert rc == 0, err
    assert "a3-03" in site.written()["all"]["children"]["a3_nodes"]["hosts"]
    assert list((site.out / "group_vars").iterdir()) == []  # the site's own group_vars are left alone


# ---- refusals: one line per problem, every host's, nothing written ----

A1, A2, A3 = "10.10.0.11", "10.10.0.12", "10.10.0.13"
CASES: dict[str, tuple[dict[int, dict[str, Any]], list[str]]] = {
    "unreachable": (
        {2: {"ssh_fails": REFUSED}},
        [
            f"{A3}: unreachable over SSH (ssh: ssh: connect to host {A3} port 22: Connection refused); fix: check "
            f"that the host is up and sshd listens on {A3} port 22 (the address in HOSTS, SSH_PORT, a firewall)"
        ],
    ),
    "host key unknown": (
        {1: {"ssh_fails": KEY_UNKNOWN}},
        [f"{A2}: its host key is not in {{kh}} (ssh: Host key verification failed); fix: `ssh-keyscan -p 22 {A2}"],
    ),
    "host key changed": (
        {1: {"ssh_fails": KEY_CHANGED}},
        [f"{A2}: its host key is not the one {{kh}} holds for it (ssh: Host key verification failed); fix: only if"],
    ),
    "login refused": (
        {0: {"ssh_fails": DENIED}},
        [f"{A1}: SSH refused the login as deploy (ssh: deploy@{A1}: Permission denied (publickey).); fix: SSH_USER="],
    ),
    "die without an address in hccn.conf": (
        {1: {"conf_skip": (7,)}},
        [f"{A2}: die 7 without an NPU address: no address_7 in /etc/hccn.conf; fix: configure each die's"],
    ),
    "dies without an address from hccn_tool": (
        {0: {"conf": False, "tool_skip": (3, 4, 5, 9)}},
        [
            f"{A1}: dies 3-5,9 without an NPU address: `hccn_tool -i <die> -ip -g` gives no address (Get ipconf "
            "failed, because no ip was preset there!); fix: configure each die's"
        ],
    ),
    "an NPU address on two hosts": (
        {2: {"npu": [*npu_ips(3)[:5], npu_ips(1)[5], *npu_ips(3)[6:]]}},
        [f"{A3}: NPU address {npu_ips(1)[5]} of die 5 is also {A1}'s die 5; fix: every die of every host needs"],
    ),
    "an NPU address on two dies": (
        {0: {"npu": [*npu_ips(1)[:9], npu_ips(1)[2], *npu_ips(1)[10:]]}},
        [f"{A1}: NPU address {npu_ips(1)[2]} of die 9 is also this host's die 2; fix: every die of every host"],
    ),
    "a vNIC address on two hosts": (
        {1: {"vnic": [vnic_ips(1)[0], *vnic_ips(2)[1:]]}},
        [f"{A2}: vNIC address {vnic_ips(1)[0]} of die 0 is also {A1}'s die 0; fix: every die of every host"],
    ),
    "a cluster address on two hosts": (
        {1: {"reached": A1, "extra_inets": [("bond0", f"{A1}/24")]}},
        [f"{A2}: cluster address {A1} is also that of {A1}; fix: HOSTS lists one host twice"],
    ),
    "no npu-smi": (
        {2: {"npu_smi": ()}},
        [f"{A3}: npu-smi is in neither /usr/local/bin nor /usr/local/sbin; fix: install the HDK driver package"],
    ),
    "no hccn.conf and no hccn_tool": (
        {0: {"conf": False, "tool": False}},
        [f"{A1}: no /etc/hccn.conf and no hccn_tool (neither on PATH nor /usr/local/Ascend/driver/tools/hccn_tool)"],
    ),
    "die counts that differ": (
        {2: {"dies": 15}},
        [f"{A3}: 15 dies (/dev/davinci0-14), while 2 other host(s) have 16; fix: every host of a cluster has"],
    ),
    "a device node missing": (
        {1: {"missing_nodes": (6,)}},
        [
            f"{A2}: /dev/davinci6 missing while /dev/davinci15 exists; fix: a die did not come up",
            f"{A2}: 15 dies (/dev/davinci0-5,7-15), while 2 other host(s) have 16; fix:",
        ],
    ),
    "SSH reached no interface of the host": (
        {0: {"reached": "203.0.113.9"}},
        [f"{A1}: the address SSH reached (203.0.113.9) is on no interface of the host (NAT, a jump host or IPv6)"],
    ),
    "every problem of every host in one pass": (
        {0: {"conf_skip": (0,)}, 1: {"ssh_fails": REFUSED}, 2: {"npu_smi": (), "dies": 8}},
        [
            f"{A1}: die 0 without an NPU address",
            f"{A2}: unreachable over SSH",
            f"{A3}: npu-smi is in neither",
            f"{A3}: 8 dies (/dev/davinci0-7), while 1 other host(s) have 16",
        ],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refusals(site: Site, capsys: pytest.CaptureFixture[str], case: str) -> None:
    changes, expected = CASES[case]
    for index, kw in changes.items():
        site.hosts[index] = FakeHost(index + 1, **kw)
    rc, _, err = site.run(capsys)
    problems = refusal(rc, err, site)
    kh = str(site.base / "known_hosts")
    assert len(problems) == len(expected), problems
    for line, start in zip(problems, expected, strict=True):
        assert line.startswith(start.replace("{kh}", kh)), f"{line!r} does not start with {start!r}"


def test_host_key_refusals_name_the_scan_the_check_and_known_hosts(
    site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    site.hosts[1] = FakeHost(2, ssh_fails=KEY_UNKNOWN)
    site.hosts[2] = FakeHost(3, ssh_fails=KEY_CHANGED)
    rc, _, err = site.run(capsys)
    unknown, changed = refusal(rc, err, site)
    kh = site.base / "known_hosts"
    for line in (unknown, changed):
        assert "ssh-keyscan -p 22" in line and "ssh-keygen -l -F" in line and "KNOWN_HOSTS=" in line
        assert "the fingerprint the host's console shows" in line and "\n" not in line
    assert f"`ssh-keygen -R {A3} -f {kh}`" in changed and "otherwise something may be in between" in changed


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"site": "", "hosts": ""}, ["SITE: is empty", "HOSTS: is empty"]),
        ({"site": "My Site"}, ["SITE: 'My Site' is not a site name"]),
        ({"site": "sample"}, ["SITE: sample is the project's own inventory"]),
        ({"hosts": "a3-01 -oProxyCommand=x"}, ["HOSTS: '-oProxyCommand=x' is not a host name or IP address"]),
        ({"hosts": "10.10.0.11,10.10.0.11"}, ["HOSTS: 10.10.0.11 is listed twice"]),
        ({"port": "0", "user": "Root;"}, ["SSH_USER: 'Root;' is not a user name", "SSH_PORT: is not a TCP port"]),
        ({"cluster_net": "10.0.0.0/33"}, ["CLUSTER_NET: '10.0.0.0/33' is not an IPv4 network"]),
        ({"known_hosts": "/nonexistent/kh"}, ["KNOWN_HOSTS: /nonexistent/kh does not exist"]),
        ({"key": "/nonexistent/key"}, ["SSH_KEY: /nonexistent/key is no file"]),
    ],
)
def test_bad_requests_contact_no_host(
    site: Site, capsys: pytest.CaptureFixture[str], over: dict[str, str], expected: list[str]
) -> None:
    rc, _, err = site.run(capsys, **over)
    lines = err.splitlines()
    assert rc == 2 and len(lines) == len(expected), lines
    assert all(line.startswith(want) and "; fix: " in line for line, want in zip(lines, expected, strict=True)), lines
    assert not any((site.dir / h.address / "argv").exists() for h in site.hosts)
    assert not (site.out / "hosts.yml").exists()


# ---- the parts ----


def test_parse_facts_keeps_repeated_keys_and_skips_noise() -> None:
    kv = facts.parse_facts("davinci=0\ndavinci=1\nnot a fact\nX=1\nconf_address=3 10.0.0.1 \nend=1\n")
    assert kv == {"davinci": ["0", "1"], "conf_address": ["3 10.0.0.1"], "end": ["1"]}


def test_die_list() -> None:
    assert common.die_list(list(range(16))) == "0-15"
    assert common.die_list([0, 1, 2, 4, 6, 7]) == "0-2,4,6-7"
    assert common.die_list([]) == ""


def test_a_cut_answer_is_refused() -> None:
    reply = probe.Reply("h1", 0, "format=1\nhostname=a3-01\n", "", "t")
    _, errors = facts.interpret(reply)
    assert errors == [
        "h1: its answer was cut short (the fact script did not finish); fix: log in and run `sh -s` with "
        "scripts/site_inventory.py's script by hand to see where it stops"
    ]


def test_ssh_said_takes_the_cause_not_the_banner() -> None:
    assert probe.ssh_said(KEY_CHANGED.format(a="h")) == "Host key verification failed."
    assert probe.ssh_said("") == "no message"
