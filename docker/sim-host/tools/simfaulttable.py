"""The simulated host's faults as data: what `simhost.py fault add` takes, the preflight rows each one is made to
fail, and what it changes on the host and on its peers. simfaults.py derives its grammar (the die, flag and
single-value faults, FAULT_HELP) from this table, scripts/gen_docs.py writes the fault table of
docs/simulated-cluster.md from it, and tests/ansible/test_preflight_checks.py checks the `trips` of the NPU faults.
Standard library only, no imports: the simulated host's python3 has nothing else."""

from __future__ import annotations

from dataclasses import dataclass

# What a fault's argument is: a die, nothing (a flag), one value per host, a peer host [and die], a device node, or
# the host's power.
DIE, FLAG, SINGLE, PEER, NODE, POWER = "die", "flag", "single", "peer", "node", "power"


@dataclass(frozen=True)
class FaultSpec:
    kinds: tuple[str, ...]  # the names it goes by (several when they differ only in degree)
    arg: str
    forms: tuple[str, ...]  # as `simhost.py fault add` takes them
    trips: tuple[str, ...]  # the preflight rows of this host it fails (peers' rows: `peers`)
    doc: str  # the fault column of docs/simulated-cluster.md
    effect: str  # what changes on that host, and only there
    peers: str = "-"  # what the other hosts see


FAULTS: tuple[FaultSpec, ...] = (
    FaultSpec(
        ("dev-missing",),
        NODE,
        ("dev-missing:<die|davinci_manager|devmm_svm|hisi_hdc>",),
        ("device_nodes",),
        "`dev-missing:<die>` / `dev-missing:davinci_manager\\|devmm_svm\\|hisi_hdc`",
        "that device node is removed",
    ),
    FaultSpec(
        ("dies",),
        SINGLE,
        ("dies:<1-15>",),
        ("npu_map", "device_nodes"),
        "`dies:<1-15>`",
        (
            "`npu-smi info` and `-m` list that many dies (the last ones go), `-t board -i 7` Chip Count, "
            '`/dev/davinci<N..15>` removed, `hccn_tool -i <N..15>` "device id ... is invalid"'
        ),
    ),
    FaultSpec(
        ("health-warning", "health-alarm", "health-critical"),
        DIE,
        ("health-warning:<die>", "health-alarm:<die>", "health-critical:<die>"),
        ("chip_health",),
        "`health-warning:<die>` / `health-alarm:<die>` / `health-critical:<die>`",
        "that die's Health in `npu-smi info` and `-t health` (with an error code)",
    ),
    FaultSpec(
        ("link-down",),
        DIE,
        ("link-down:<die>",),
        ("npu_link",),
        "`link-down:<die>`",
        "`hccn_tool -i <die> -link -g`: `link status: DOWN`; pings from that die are lost",
        "pings to that die's address are lost",
    ),
    FaultSpec(
        ("ip-missing",),
        DIE,
        ("ip-missing:<die>",),
        ("npu_ip",),
        "`ip-missing:<die>`",
        (
            "`-ip -g`: `Get ipconf failed, because no ip was preset there!` (exit 1); "
            "`address_<die>`/`netmask_<die>` leave `/etc/hccn.conf`"
        ),
        "pings to that address are lost",
    ),
    FaultSpec(
        ("net-health",),
        DIE,
        ("net-health:<die>",),
        ("npu_net_health",),
        "`net-health:<die>`",
        "`-net_health -g`: `net health status: Fault`",
    ),
    FaultSpec(
        ("ping-loss",),
        PEER,
        ("ping-loss:<host>[:<die>]",),
        ("npu_ping",),
        "`ping-loss:<host>[:<die>]`",
        (
            "this host's RoCE pings (`-ping`) to every NPU address of `<host>` (or only to its die "
            "`<die>`: a route that fails between chosen dies) are lost; HCCS (`-hccs_ping`) still works"
        ),
    ),
    FaultSpec(
        ("vnic-down",),
        DIE,
        ("vnic-down:<die>",),
        ("npu_vnic",),
        "`vnic-down:<die>`",
        (
            "`-vnic -g`: `vnic link status: DOWN` (the address stays configured); `-hccs_ping` from that "
            "die is lost; its RoCE NIC (`-link`, `-ip`, `-ping`) is untouched"
        ),
        "`-hccs_ping` to that die's vNIC address is lost",
    ),
    FaultSpec(
        ("hccs-loss",),
        PEER,
        ("hccs-loss:<host>[:<die>]",),
        ("npu_ping",),
        "`hccs-loss:<host>[:<die>]`",
        (
            "this host's HCCS pings (`-hccs_ping`) to every vNIC address of `<host>` (or only to its die "
            "`<die>`) are lost, while RoCE to it still works: a super-pod's HCCS path that fails on its "
            "own"
        ),
    ),
    FaultSpec(
        ("npu-busy",),
        DIE,
        ("npu-busy:<die>",),
        ("npu_occupancy",),
        "`npu-busy:<die>`",
        (
            "`npu-smi info`'s process table lists a process of another job on that die (`pt_main_thread`,"
            " SYNTHETIC pid, 49207 MB), in the layout of a busy A3 node"
        ),
    ),
    FaultSpec(
        ("hccn-drift",),
        DIE,
        ("hccn-drift:<die>",),
        ("hccn_conf",),
        "`hccn-drift:<die>`",
        ("`/etc/hccn.conf` names an old `address_<die>` (last octet moved); the device (`-ip -g`) keeps its own"),
    ),
    FaultSpec(
        ("gateway-wrong",),
        DIE,
        ("gateway-wrong:<die>",),
        ("npu_gateway",),
        "`gateway-wrong:<die>`",
        (
            "`-gateway -g`, `-netdetect -g` and `gateway_<die>`/`netdetect_<die>` name 10.255.255.1, "
            "outside the die's subnet"
        ),
    ),
    FaultSpec(
        ("tls-on",),
        FLAG,
        ("tls-on",),
        ("npu_tls",),
        "`tls-on`",
        "the TLS switch of every die is 1 (`-tls -g`, `tls_enable_<die>`); the other hosts keep 0",
    ),
    FaultSpec(
        ("not-rebooted",),
        FLAG,
        ("not-rebooted",),
        ("running_versions",),
        "`not-rebooted`",
        (
            "the HDK packages on disk are `host.hdk_min`, but `npu-smi info -t board` shows the "
            "year-older driver and firmware still running (an upgrade without the reboot)"
        ),
    ),
    FaultSpec(
        ("os",),
        SINGLE,
        ("os:<release>",),
        ("os",),
        "`os:<release>`",
        "`/etc/os-release` is that release's (`ubuntu-24.04`, `openeuler-22.03`, `openeuler-22.03-sp4`)",
    ),
    FaultSpec(
        ("low-ram",),
        SINGLE,
        ("low-ram[:<GiB>]",),
        ("host_memory",),
        "`low-ram[:<GiB>]`",
        "`/proc/meminfo` shows MemTotal of 1 GiB (or GiB): a file bound over it, as LXCFS does",
    ),
    FaultSpec(
        ("nic-moved",),
        FLAG,
        ("nic-moved",),
        ("cluster_nic",),
        "`nic-moved`",
        (
            "the cluster address leaves `eth0` for an interface `verlsim0` (a bridge without ports); the "
            "subnet stays routed through `eth0`, so SSH and pings still work"
        ),
    ),
    FaultSpec(
        ("firewall",),
        FLAG,
        ("firewall",),
        ("host_firewall",),
        "`firewall`",
        (
            "iptables drops new TCP from the cluster subnet except on a fixed port list (22, Ray's fixed "
            "ports, 10002-19999, 60000-60050, 18080), the way a port-list firewall treats Gloo's and "
            "verl's ephemeral ports"
        ),
        "connections to its ephemeral ports time out",
    ),
    FaultSpec(
        ("driver-old",),
        SINGLE,
        ("driver-old[:<version>]",),
        ("driver_version",),
        "`driver-old[:<version>]`",
        (
            "driver `version.info` Version/package_version, the `npu-smi` header and board Software "
            "Version drop below `host.hdk_min` (default: the year before, `26.0.RC1` -> `25.5.0`)"
        ),
    ),
    FaultSpec(
        ("firmware-old",),
        SINGLE,
        ("firmware-old[:<version>]",),
        ("firmware_version",),
        "`firmware-old[:<version>]`",
        "firmware `version.info` package_version (and the 7.x Version), board Firmware Version",
    ),
    FaultSpec(
        ("no-docker",),
        FLAG,
        ("no-docker",),
        ("container_runtime",),
        "`no-docker`",
        "dockerd stopped, `/usr/bin/docker` and `/usr/sbin/dockerd` moved to `/usr/lib/verl-sim/disabled/`",
    ),
    FaultSpec(
        ("no-shared",),
        FLAG,
        ("no-shared",),
        ("shared_storage_mounted",),
        "`no-shared`",
        "`/mnt/shared` unmounted (an empty folder stays)",
    ),
    FaultSpec(
        ("clock-skew",),
        SINGLE,
        ("clock-skew:<seconds>",),
        ("time_sync",),
        "`clock-skew:<s>`",
        "the wall clock of every new process is off by `s` seconds (`date`, Python, Ansible facts)",
    ),
    FaultSpec(
        ("low-disk",),
        SINGLE,
        ("low-disk[:<MiB free>]",),
        ("free_disk",),
        "`low-disk[:<MiB>]`",
        "`df`/`statvfs` report at most 512 MiB (or MiB) free on every file system except the shared storage",
    ),
    FaultSpec(
        ("arch",),
        SINGLE,
        ("arch:<machine>",),
        ("architecture",),
        "`arch:<machine>`",
        "`uname -m`, Python's `platform.machine()`, Ansible's `ansible_architecture` report `<machine>`",
    ),
    FaultSpec(
        ("down",),
        POWER,
        ("down:ssh",),
        ("ssh",),
        "`down:ssh`",
        "sshd stops: new SSH connections are refused",
    ),
    FaultSpec(
        ("down",),
        POWER,
        ("down",),
        ("ssh",),
        "`down`",
        (
            "power loss: every process of the host is killed at once, the containers its own engine runs "
            "included; its address disappears from the network (SSH, Ray and NPU pings get no answer at "
            "all, not even a refusal). `clear` boots it (below)"
        ),
        "pings to all its addresses are lost; connections to it time out or find no route",
    ),
)


def kinds_of(arg: str) -> set[str]:
    return {k for f in FAULTS if f.arg == arg for k in f.kinds}


def fault_help() -> str:
    """Every form a fault takes, for `simhost.py fault add` and `make sim-fault`'s refusals."""
    return ", ".join([*(form for f in FAULTS for form in f.forms), "clear"])


def markdown_table() -> str:
    """docs/simulated-cluster.md's table of the faults."""
    lines = ["| fault | what changes on that host (and only there) | seen by peers |", "|---|---|---|"]
    lines += [f"| {f.doc} | {f.effect} | {f.peers} |" for f in FAULTS]
    return "\n".join(lines)
