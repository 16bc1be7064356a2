"""The preflight's NPU checks, every device query one after another: npu-smi (health, processes, the dies' holders,
running versions), hccn_tool (links, addresses, network health, vNIC) and the NPU pings of the ping plan."""

from __future__ import annotations

import re
from typing import Any

from ansible.module_utils.a3_host import Host, PreflightRow, check, read
from ansible.module_utils.a3_parse import (
    as_int,
    first_line,
    in_subnet,
    parse_chip_map,
    parse_colon,
    parse_hccn_conf,
    parse_holders,
    parse_npu_table,
    parse_ping_loss,
)


def _die_list(bad: dict[int, str]) -> str:
    return "; ".join(f"die {d}: {v}" for d, v in sorted(bad.items()))


def npu_checks(p: dict[str, Any], host: Host, installed: dict[str, str]) -> tuple[list[PreflightRow], dict[str, Any]]:
    """Every device query, one after another: one `npu-smi info` (health and process table of all dies), `-m`
    (die -> NPU id/chip), `-t board` per NPU (running versions), hccn_tool per die, then the planned pings."""
    dies = p["expected_dies"]
    npu_smi, hccn = host.tool("npu-smi"), host.tool("hccn_tool")
    out: list[PreflightRow] = []
    net: dict[str, Any] = {}
    if not npu_smi:
        for name in ("npu_map", "chip_health", "npu_occupancy", "running_versions"):
            out.append(check(name, False, "npu-smi not found", f"{dies} dies", "install the Ascend HDK driver"))
    else:
        out += npu_smi_checks(p, host, npu_smi, installed)
    if not hccn:
        for name in ("npu_link", "npu_ip", "hccn_conf", "npu_net_health", "npu_gateway", "npu_tls", "npu_ping"):
            out.append(
                check(name, False, "hccn_tool not found", f"{dies} dies", "install the Ascend HDK driver (hccn_tool)")
            )
    else:
        rows, net = hccn_checks(p, host, hccn)
        out += rows
    return out, net


def npu_smi_checks(p: dict[str, Any], host: Host, npu_smi: str, installed: dict[str, str]) -> list[PreflightRow]:
    dies = p["expected_dies"]
    out: list[PreflightRow] = []
    rc_m, text_m = host.query([npu_smi, "info", "-m"])
    chip_map = parse_chip_map(text_m) if rc_m == 0 else {}
    phys = sorted(chip_map.values())
    missing = sorted(set(range(dies)) - set(phys))
    dup = sorted({d for d in phys if phys.count(d) > 1})
    if rc_m != 0 or not chip_map:
        found = f"`npu-smi info -m` failed: {first_line(text_m)}"
    elif missing or dup:
        found = "; ".join(
            x
            for x in (f"no die with Phy-ID {', '.join(map(str, missing))}" if missing else "",)
            + (f"Phy-ID listed twice: {', '.join(map(str, dup))}" if dup else "",)
            if x
        )
    else:
        found = f"{len(phys)} dies (Phy-ID 0..{dies - 1}) on {len({n for n, _ in chip_map})} NPU ids"
    out.append(
        check(
            "npu_map",
            rc_m == 0 and bool(chip_map) and not missing and not dup,
            found,
            f"Phy-ID 0..{dies - 1} once each in `npu-smi info -m`",
            "a die is missing from the driver's view: check `npu-smi info -m`, reseat or replace the module, "
            "reinstall the driver",
            dies=missing + dup,
        )
    )
    rc, text = host.query([npu_smi, "info"])
    table, procs = parse_npu_table(text) if rc == 0 else ({}, [])

    def die_of(npu: int, chip: int) -> int:
        if (npu, chip) in chip_map:
            return chip_map[(npu, chip)]
        phy = as_int(table.get((npu, chip), {}).get("phy", ""))
        return -1 if phy is None else phy

    health_bad: dict[int, str] = {}
    seen = set()
    for (npu, chip), row in table.items():
        die = die_of(npu, chip)
        seen.add(die)
        if row["health"] != "OK":
            health_bad[die] = f"{row['health'] or 'no health'} (NPU {npu} chip {chip})"
    if rc == 0:
        for die in sorted(set(range(dies)) - seen):
            health_bad[die] = "not listed by `npu-smi info`"
        found = _die_list(health_bad) or f"{dies} dies OK"
    else:
        found = f"`npu-smi info` failed: {first_line(text)}"
    out.append(
        check(
            "chip_health",
            rc == 0 and not health_bad,
            found,
            "Health OK on every die (`npu-smi info`)",
            "see `npu-smi info -t health -i <npu> -c <chip>` for the error code; reset or replace the module",
            dies=list(health_bad),
            entries=health_bad,
        )
    )
    busy: dict[int, str] = {}
    for pr in procs:
        die = die_of(pr["npu"], pr["chip"])
        busy[die] = (busy.get(die, "") + ", " if die in busy else "") + f"pid {pr['pid']} {pr['name']}".strip()
    holders = device_holders(p, host)
    found_parts = [_die_list(busy)] if busy else []
    if holders:
        found_parts.append("containers holding NPU devices: " + ", ".join(holders))
    out.append(
        check(
            "npu_occupancy",
            rc == 0 and not busy and not holders,
            "; ".join(found_parts)
            or ("no process on any die" if rc == 0 else f"`npu-smi info` failed: {first_line(text)}"),
            "no process on any die; no other container holding /dev/davinci*",
            "a previous job still holds the dies (-8005 dcmi init / -8020 device is used / EJ0001 on the next "
            "start): stop it (`docker ps`, `kill <pid>`), or wait for it to end",
            dies=list(busy),
            entries=busy,
        )
    )
    out.append(running_versions(p, host, npu_smi, chip_map, installed))
    return out


def _span(nums: list[int]) -> str:
    nums = sorted(nums)
    if len(nums) > 1 and nums == list(range(nums[0], nums[-1] + 1)):
        return f"{nums[0]}-{nums[-1]}"
    return ",".join(map(str, nums))


def device_holders(p: dict[str, Any], host: Host) -> list[str]:
    """Running containers outside this recipe's Compose project that were handed /dev/davinci* (ascend-deployer
    asks `docker inspect` the same question)."""
    docker = host.tool("docker")
    if not docker:
        return []
    rc, ids = host.run([docker, "ps", "-q"])
    if rc != 0 or not ids.split():
        return []
    fmt = (
        '{{.Name}}|{{index .Config.Labels "com.docker.compose.project"}}|'
        "{{range .HostConfig.Devices}}{{.PathOnHost}} {{end}}"
    )
    rc, text = host.run([docker, "inspect", "--format", fmt, *ids.split()])
    return parse_holders(text, p["compose_project"]) if rc == 0 else []


def running_versions(
    p: dict[str, Any], host: Host, npu_smi: str, chip_map: dict[tuple[int, int], int], installed: dict[str, str]
) -> PreflightRow:
    """`npu-smi info -t board -i <npu>` shows the driver and firmware that run now; after an upgrade without the
    reboot they differ from version.info (the installer's exit code 2 asks for the reboot)."""
    npus = sorted({n for n, _ in chip_map}) or list(range((p["expected_dies"] + 1) // 2))
    bad: list[str] = []
    running = set()
    for npu in npus:
        rc, text = host.query([npu_smi, "info", "-t", "board", "-i", str(npu)])
        board = parse_colon(text)
        if rc != 0 or "software version" not in board:
            bad.append(f"NPU {npu}: query failed ({first_line(text)})")
            continue
        sw, fw = board.get("software version", ""), board.get("firmware version", "")
        compat = board.get("compatibility", "")
        running.add(f"driver {sw}, firmware {fw}")
        problems = []
        if installed.get("driver") and sw.lower() != installed["driver"].lower():
            problems.append(f"driver {sw} runs, {installed['driver']} installed")
        if installed.get("firmware") and fw.lower() != installed["firmware"].lower():
            problems.append(f"firmware {fw} runs, {installed['firmware']} installed")
        if compat not in ("OK", "NOT SUPPORT"):
            problems.append(f"Compatibility {compat or 'missing'}")
        if problems:
            bad.append(f"NPU {npu}: " + ", ".join(problems))
    dies = [d for (n, _), d in chip_map.items() if any(b.startswith(f"NPU {n}:") for b in bad)]
    # the same finding on several NPUs becomes one entry ("NPU 0-7: ...")
    grouped: dict[str, list[int]] = {}
    for entry in bad:
        head, _, what = entry.partition(": ")
        grouped.setdefault(what, []).append(int(head.split()[1]))
    shown = [f"NPU {_span(n)}: {what}" for what, n in grouped.items()]
    return check(
        "running_versions",
        not bad,
        "; ".join(shown) if bad else ", ".join(sorted(running)),
        "running driver/firmware = installed (version.info), Compatibility OK",
        "reboot the host to load the upgraded driver and firmware (the HDK installer asked for it)",
        dies=dies,
    )


def hccn_checks(p: dict[str, Any], host: Host, hccn: str) -> tuple[list[PreflightRow], dict[str, Any]]:
    dies = p["expected_dies"]
    ips = p["npu_ips"]
    conf_text = read(p["hccn_conf_file"])
    conf = parse_hccn_conf(conf_text or "")
    link_bad: dict[int, str] = {}
    ip_bad: dict[int, str] = {}
    conf_bad: dict[int, str] = {}
    health_bad: dict[int, str] = {}
    gw_bad: dict[int, str] = {}
    tls: dict[int, str] = {}
    masks: dict[int, str] = {}
    vnic_bad: dict[int, str] = {}
    for die in range(dies):

        def hccn_query(*args: str, die: int = die) -> tuple[int, str]:
            return host.query([hccn, "-i", str(die), *args])

        rc, text = hccn_query("-link", "-g")
        status = parse_colon(text).get("link status", "")
        if rc != 0 or status != "UP":
            link_bad[die] = status or f"query failed ({first_line(text)})"
        rc, text = hccn_query("-ip", "-g")
        ip_fields = parse_colon(text)
        addr, mask = ip_fields.get("ipaddr", ""), ip_fields.get("netmask", "")
        want = ips[die] if die < len(ips) else ""
        if rc != 0 or not addr:
            ip_bad[die] = f"no address ({first_line(text)})"
        elif addr != want:
            ip_bad[die] = f"{addr} (inventory {want})"
        if mask:
            masks[die] = mask
        c_addr, c_mask = conf.get(f"address_{die}", ""), conf.get(f"netmask_{die}", "")
        if conf_text is not None and addr:
            if c_addr != addr:
                conf_bad[die] = f"address_{die}={c_addr or '(none)'}, device has {addr}"
            elif mask and c_mask and c_mask != mask:
                conf_bad[die] = f"netmask_{die}={c_mask}, device has {mask}"
        rc, text = hccn_query("-net_health", "-g")
        status = parse_colon(text).get("net health status", "")
        if rc != 0 or status != "Success":
            health_bad[die] = status or f"query failed ({first_line(text)})"
        rc, text = hccn_query("-gateway", "-g")
        m = re.search(r"default gateway:\s*([\d.]+)", text)
        gw = m.group(1) if m and rc == 0 else ""
        problems = []
        if not gw:
            problems.append("no gateway")
        elif addr and mask and not in_subnet(addr, mask, gw):
            problems.append(f"gateway {gw} outside {addr}/{mask}")
        if problems:
            gw_bad[die] = ", ".join(problems)
        rc, text = hccn_query("-tls", "-g")
        m = re.search(r"tls switch\[(\d+)\]", text)
        tls[die] = m.group(1) if m and rc == 0 else "?"
        if p["inter_server_link"] == "hccs":
            rc, text = hccn_query("-vnic", "-g")
            vnic = parse_colon(text)
            want = p["vnic_ips"][die] if die < len(p["vnic_ips"]) else ""
            if rc != 0 or vnic.get("vnic link status") != "UP" or not vnic.get("vnic ipaddr"):
                vnic_bad[die] = vnic.get("vnic link status") or f"query failed ({first_line(text)})"
            elif want and vnic["vnic ipaddr"] != want:  # the peers would ping the inventory's address, not this one
                vnic_bad[die] = f"vNIC {vnic['vnic ipaddr']}, a3_vnic_ips[{die}] says {want}"
    n = f"{dies} dies OK"
    out = [
        check(
            "npu_link",
            not link_bad,
            _die_list(link_bad) or n,
            "link status UP on every die",
            "check the cable/optics and switch port of the listed dies (`hccn_tool -i <die> -link -g`, `-lldp -g`)",
            dies=list(link_bad),
            entries=link_bad,
        ),
        check(
            "npu_ip",
            not ip_bad,
            _die_list(ip_bad) or n,
            "hccn address = inventory a3_npu_ips",
            "configure /etc/hccn.conf address_<die> and run `hccn_tool -a -cfg recovery`, or fix a3_npu_ips",
            dies=list(ip_bad),
            entries=ip_bad,
        ),
        check(
            "hccn_conf",
            conf_text is not None and not conf_bad,
            (_die_list(conf_bad) or "address_N and netmask_N match the device")
            if conf_text is not None
            else f"{p['hccn_conf_file']} missing",
            "/etc/hccn.conf address_N/netmask_N = what each die has",
            "correct /etc/hccn.conf (ascend-deployer writes it) and run `hccn_tool -a -cfg recovery`; a stale "
            "address_N makes that NPU unreachable after the next recovery or reboot",
            dies=list(conf_bad),
            entries=conf_bad,
        ),
        check(
            "npu_net_health",
            not health_bad,
            _die_list(health_bad) or n,
            "net health Success on every die",
            "set netdetect_<die> in /etc/hccn.conf and check the NPU network gateway",
            dies=list(health_bad),
            entries=health_bad,
        ),
        check(
            "npu_gateway",
            not gw_bad,
            _die_list(gw_bad) or n,
            "a gateway inside the die's subnet on every die (a missing netdetect address shows in npu_net_health)",
            "set gateway_<die> (and netdetect_<die>) in /etc/hccn.conf, then `hccn_tool -a -cfg recovery`",
            dies=list(gw_bad),
            entries=gw_bad,
        ),
    ]
    switch = sorted(set(tls.values()))
    out.append(
        check(
            "npu_tls",
            len(switch) == 1 and switch != ["?"],
            f"TLS switch {switch[0]} on all {dies} dies"
            if len(switch) == 1
            else _die_list({d: f"switch {v}" for d, v in tls.items()}),
            "one TLS switch value on every die of every host",
            "make the TLS switch the same everywhere (`hccn_tool -i <die> -tls -s enable <0|1>`): HCCL links "
            "between dies with different switches never establish (EI0006)",
            dies=[d for d, v in tls.items() if v == "?"] if len(switch) == 1 else list(tls),
            entries={} if len(switch) == 1 else {d: f"switch {v}" for d, v in tls.items()},
        )
    )
    if p["inter_server_link"] == "hccs":
        out.append(
            check(
                "npu_vnic",
                not vnic_bad,
                _die_list(vnic_bad) or n,
                "vNIC UP on every die at the inventory's a3_vnic_ips address (HCCS between servers)",
                "check the super-pod's HCCS links (`hccn_tool -i <die> -vnic -g`) and correct a3_vnic_ips to what it "
                "reports, or set site_inter_server_link: roce",
                dies=list(vnic_bad),
                entries=vnic_bad,
            )
        )
    out.append(ping_check(p, host, hccn, link_bad))
    mask_values = sorted(set(masks.values()))
    net = {
        "tls": switch[0] if len(switch) == 1 else "mixed",
        "netmask": mask_values[0] if len(mask_values) == 1 else "mixed",
    }
    return out, net


def ping_check(p: dict[str, Any], host: Host, hccn: str, link_bad: dict[int, str]) -> PreflightRow:
    plan = p["ping_plan"]
    bad: dict[int, str] = {}
    pinged: dict[int, str] = {}
    peers = set()
    for item in plan:
        die, addr = int(item["die"]), str(item["address"])
        peers.add(str(item.get("peer", "")))
        cmd = "-hccs_ping" if item.get("path") == "hccs" else "-ping"
        rc, text = host.query([hccn, "-i", str(die), cmd, "-g", "address", addr])
        pinged[die] = addr
        loss = parse_ping_loss(text)
        if loss is None:
            bad[die] = f"ping {addr} failed ({first_line(text)})"
        elif loss > 0:
            bad[die] = f"{loss:.2f}% loss to {addr}"
    hosts = sorted(x for x in peers if x)
    found = _die_list(bad) or f"{len(plan)} pings to {len(hosts)} hosts OK"
    return check(
        "npu_ping",
        not bad,
        found if plan else "no peers (single host)",
        "0% loss from every die to its planned peer die (every other host covered)",
        "check the NPU-network route between these dies (switch, VLAN, ip_rule/ip_route in hccn.conf, "
        "`hccn_tool -i <die> -lldp -g` for mis-cabling)",
        dies=list(bad),
        peers=[str(i["peer"]) for i in plan if int(i["die"]) in bad],
        entries=bad,
        addresses=pinged,
    )
