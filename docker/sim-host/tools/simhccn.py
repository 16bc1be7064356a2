"""The `hccn_tool` stand-in of a simulated A3 host and its NPU network: /etc/hccn.conf's text, the per-die
queries (-link, -ip, -tls, -vnic, ...), -ping and -hccs_ping, and the responder (`simhost.py npud`) that answers
those pings for this host's dies. The NPU network is UDP between the hosts' cluster addresses; output formats
follow docs/a3-tools.md (its T<n> sections are cited below).
Standard library only: the simulated host's python3 has nothing else.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any

from simfaults import active_faults
from simhostview import Host, host_vnic_ips
from simstate import BUSY_TEXT, DIES, SimError, exclusive, hold

NPU_PORT = 4791  # UDP port of the NPU-network responder (the RoCE v2 port, for recognisability)


def npu_port() -> int:
    # The unit tests run a responder on loopback at a free port.
    return int(os.environ.get("VERL_SIM_NPU_PORT", NPU_PORT))


NPU_NETMASK = "255.255.0.0"


def die_mac(index: int, die: int) -> str:
    # The two dies of a module differ only in the last bit (a3-tools T10); locally administered prefix.
    return f"02:a3:{index:02x}:{die // 2:02x}:00:{0xDD - (die % 2):02x}"


def hccn_conf(h: Host) -> str:
    ips = h.npu_ips
    out: list[str] = []
    for die in range(DIES):
        peer = die ^ 1
        if h.has_ip(die):
            out += [f"address_{die}={h.conf_address(die)}", f"netmask_{die}={NPU_NETMASK}"]
        out += [
            f"gateway_{die}={h.gateway(die)}",
            f"arp_{die}=-i eth{die} -s {ips[peer]} {die_mac(h.index, peer)}",
            f"netdetect_{die}={h.gateway(die)}",
            f"send_arp_status_{die}=1",
            f"tls_enable_{die}={h.tls()}",
        ]
    return "\n".join(out) + "\n"


def find_npu_ip(cluster: dict[str, Any], ip: str, vnic: bool = False) -> tuple[dict[str, Any], int] | None:
    for h in cluster["hosts"]:
        ips = host_vnic_ips(h) if vnic else list(h["npu_ips"])
        if ip in ips:
            return h, ips.index(ip)
    return None


def ping_timeout() -> float:
    return float(os.environ.get("VERL_SIM_PING_TIMEOUT", "2.0"))


def hccn_ping(h: Host, die: int, target: str, count: int, vnic: bool = False) -> tuple[list[str], int]:
    """All packets leave at once and the answers are awaited together: a lost ping costs one timeout, not one per
    packet (a 16-host preflight pings one peer die per local die, one after another). vnic: `-hccs_ping` to a
    peer's virtual NIC address, over HCCS: the sending die's vNIC must be up, its RoCE link and address play no
    part, and hccs-loss (not ping-loss) cuts a route."""
    lines = [f"device {die} PING {target}"]
    received = 0
    found = find_npu_ip(h.cluster, target, vnic)
    lost = h.ping_lost_to(hccs=vnic)
    sender_up = h.vnic_up(die) if vnic else h.link_up(die) and h.has_ip(die)
    can_send = sender_up and found is not None
    if found is not None and (found[0]["name"] in lost or f"{found[0]['name']}:{found[1]}" in lost):
        can_send = False
    if can_send and found is not None:
        peer = found[0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            start = time.monotonic()
            waiting = {}
            for seq in range(count):
                nonce = os.urandom(4).hex()
                waiting[f"PONG {target} {seq} {nonce}"] = seq
                s.sendto(f"PING {target} {seq} {nonce}".encode(), (peer["cluster_ip"], npu_port()))
            deadline = start + ping_timeout()
            while waiting:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                s.settimeout(left)
                try:
                    data, _ = s.recvfrom(512)
                except (TimeoutError, ConnectionRefusedError):
                    break
                seq = waiting.pop(data.decode(errors="replace"), -1)
                if seq >= 0:
                    received += 1
                    lines.append(f"recv seq={seq},time={(time.monotonic() - start) * 1000:.6f}ms")
    loss = 100.0 * (count - received) / count
    lines.append(f"{count} packets transmitted, {received} received, {loss:.2f}% packet loss")
    return lines, 0 if received else 1


HCCN_USAGE = (
    "usage: hccn_tool -i <die 0-15> -link|-ip|-net_health|-netdetect|-gateway|-mac|-tls|-vnic -g | "
    "hccn_tool -i <die> -ping|-hccs_ping -g address <ip> [pkt <n>] (simulated A3 host)"
)


def hccn_tool(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "-i":
        print(HCCN_USAGE, file=sys.stderr)
        return 2
    h = Host.load()
    if not argv[1].isdigit() or int(argv[1]) >= h.dies:
        print(f"hccn_tool: device id {argv[1]} is invalid; this host has dies 0-{h.dies - 1}", file=sys.stderr)
        return 1
    die = int(argv[1])
    with exclusive(f"hccn-{die}") as mine:
        if not mine:
            print(BUSY_TEXT.format(tool="hccn_tool", what=f"device {die}"), file=sys.stderr)
            return 1
        hold()
        return _hccn_die(h, die, argv)


def _hccn_die(h: Host, die: int, argv: list[str]) -> int:
    cmd, rest = argv[2], argv[3:]
    if not rest or rest[0] != "-g":
        print(HCCN_USAGE, file=sys.stderr)
        return 2
    ips = h.npu_ips
    if cmd == "-link" and rest == ["-g"]:
        print(f"link status: {'UP' if h.link_up(die) else 'DOWN'}")
    elif cmd == "-ip" and rest == ["-g"]:
        if not h.has_ip(die):
            print("Get ipconf failed, because no ip was preset there!")
            return 1
        print(f"ipaddr:{ips[die]}\nnetmask:{NPU_NETMASK}")
    elif cmd == "-net_health" and rest == ["-g"]:
        print(f"net health status: {'Success' if h.net_ok(die) else 'Fault'}")
    elif cmd == "-netdetect" and rest == ["-g"]:
        print(f"netdetect addr: {h.gateway(die)}")
    elif cmd == "-gateway" and rest == ["-g"]:
        print(f"default gateway:{h.gateway(die)}, Iface:eth{die}")
    elif cmd == "-mac" and rest == ["-g"]:
        print(f"mac addr: {die_mac(h.index, die)}")
    elif cmd == "-tls" and rest == ["-g"]:
        print(
            f"dev_id:{die}, tls switch[{h.tls()}](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), "
            "tls alarm time threshold[60]days"
        )
    elif cmd == "-vnic" and rest == ["-g"]:
        # vnic-down: the link goes DOWN, the configured address stays (as -link -g DOWN leaves -ip -g alone)
        status = "UP" if h.vnic_up(die) else "DOWN"
        print(f"vnic link status: {status}\nvnic ipaddr: {h.vnic_ips[die]}\nvnic netmask: {NPU_NETMASK}")
    elif cmd in ("-ping", "-hccs_ping") and len(rest) in (3, 5) and rest[1] == "address":
        count = 3
        if len(rest) == 5:
            if rest[3] != "pkt" or not rest[4].isdigit() or not 1 <= int(rest[4]) <= 100:
                print(HCCN_USAGE, file=sys.stderr)
                return 2
            count = int(rest[4])
        lines, rc = hccn_ping(h, die, rest[2], count, vnic=cmd == "-hccs_ping")
        print("\n".join(lines))
        return rc
    else:
        print(HCCN_USAGE, file=sys.stderr)
        return 2
    return 0


def npud() -> int:
    """Answer NPU-network pings addressed to this host's dies: RoCE addresses whose link is up and address set,
    vNIC addresses whose vNIC is up."""
    h = Host.load()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((h.entry["cluster_ip"], npu_port()))
        while True:
            data, peer = s.recvfrom(512)
            parts = data.decode(errors="replace").split()
            if len(parts) != 4 or parts[0] != "PING":
                continue
            try:
                faults = active_faults()
            except (SimError, ValueError):
                continue
            now = Host(h.cluster, h.name, faults)
            ips = now.npu_ips
            vnics = now.vnic_ips
            if (parts[1] in ips and now.answers(ips.index(parts[1]))) or (
                parts[1] in vnics and now.answers_vnic(vnics.index(parts[1]))
            ):
                s.sendto(f"PONG {parts[1]} {parts[2]} {parts[3]}".encode(), peer)
