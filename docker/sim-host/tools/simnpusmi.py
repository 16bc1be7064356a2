"""The `npu-smi` stand-in of a simulated A3 host: `npu-smi info` (the table), -m, -l and
-t board|health|spod-info. Output formats follow docs/a3-tools.md (its T<n> sections are cited below); values that
no source gives, marked SYNTHETIC (serials, error codes), are made up and the docs say so.
Standard library only: the simulated host's python3 has nothing else.
"""

from __future__ import annotations

import sys
from typing import Any

from simhostview import Host
from simstate import BUSY_TEXT, DIES, SimError, exclusive, hold, root_path

# Per-die values of the verbatim A3 sample (a3-tools T1): Bus-Id, power (die 0 only), temperature, HBM used.
BUS_IDS = ["9D", "9F", "99", "9B", "95", "97", "91", "93", "8D", "8F", "89", "8B", "85", "87", "81", "83"]
POWER = ["178.7", "186.4", "177.2", "178.5", "180.6", "189.2", "183.7", "186.1"]
TEMPS = [37, 36, 36, 36, 37, 37, 36, 37, 37, 37, 36, 36, 39, 37, 37, 38]
HBM_USED = [3419, 3196, 3413, 3189, 3412, 3190, 3411, 3187, 3403, 3200, 3398, 3202, 3400, 3203, 3418, 3187]
HBM_TOTAL = 65536

HEALTH_ERRORS = {  # SYNTHETIC error codes and texts (a3-tools T5 give the field names, not these values)
    "Warning": ("0x80E18402", "HBM single-bit ECC count over threshold (simulated)"),
    "Alarm": ("0x80CB8009", "AI core overheating, frequency reduced (simulated)"),
    "Critical": ("0x80E01801", "chip not responding (simulated)"),
}

BORDER = "+" + "-" * 96 + "+"
COLS_DASH = "+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 52 + "+"
COLS_EQ = "+" + "=" * 27 + "+" + "=" * 15 + "+" + "=" * 52 + "+"
HEAD_1 = "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|"
HEAD_2 = "| Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |"
PROC_HEAD = "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |"
INSTALL_WARNING = (
    "[WARNING]The driver package may not be completely installed, which may cause function abnormal. "
    "Please reinstall it."
)


def npu_count(dies: int) -> int:
    return (dies + 1) // 2


def npu_smi_table(h: Host) -> str:
    ver = h.driver_version()
    lines = [BORDER, f"| npu-smi {ver:<24} Version: {ver:<52} |", COLS_DASH, HEAD_1, HEAD_2, COLS_EQ]
    for die in range(h.dies):
        npu, chip = divmod(die, 2)
        power = POWER[npu] if chip == 0 else "-"
        lines.append(f"| {npu:<6}{'Ascend910':<20}| {h.health(die):<14}| {power:<12}{TEMPS[die]:<18}{0:<5}/ {0:<14}|")
        hbm = f"{HBM_USED[die]:<5}/ {HBM_TOTAL:<14}"
        lines.append(f"| {chip:<6}{die:<20}| {'0000:' + BUS_IDS[die] + ':00.0':<14}| {0:<12}{0:<5}/ {0:<11}{hbm}|")
        last_of_npu = chip == 1 or die == h.dies - 1
        lines.append(COLS_EQ if last_of_npu else BORDER)
    lines += [COLS_DASH, PROC_HEAD, COLS_EQ]
    for npu in range(npu_count(h.dies)):
        busy = [d for d in (2 * npu, 2 * npu + 1) if d < h.dies and h.busy(d)]
        if not busy:
            lines.append(f"| {'No running processes found in NPU ' + str(npu):<95}|")
        for die in busy:  # the layout of a busy A3 node's process block (openyuanrong's npu-smi fixture)
            pid, name, mem = busy_process(h, die)
            lines.append(f"| {npu:<8}{die % 2:<18}| {pid:<14}| {name:<25}| {mem:<24}|")
        lines.append(COLS_EQ)
    install = root_path("/etc/ascend_install.info")
    if "Driver_Install_Status=complete" not in (install.read_text() if install.exists() else ""):
        lines.append(INSTALL_WARNING)
    return "\n".join(lines)


def busy_process(h: Host, die: int) -> tuple[int, str, int]:
    """The process another job left on a die: SYNTHETIC pid, the name torch's main thread carries, 48 GiB."""
    return 950000 + 100 * h.index + die, "pt_main_thread", 49207


def field(key: str, value: object) -> str:
    return f"\t{key:<30} : {value}"


def npu_smi_mapping(h: Host) -> str:
    cols = ["NPU ID", "Chip ID", "Chip Logic ID", "Chip Phy-ID", "Chip Name"]
    lines = ["\t" + " ".join(f"{c:<30}" for c in cols)]
    for npu in range(npu_count(h.dies)):
        rows = [[str(npu), str(die % 2), str(die), str(die), "Ascend910"] for die in (2 * npu, 2 * npu + 1)]
        rows = [r for r in rows if int(r[2]) < h.dies]
        rows.append([str(npu), "2", "-", "-", "Mcu"])
        lines += ["\t" + " ".join(f"{c:<30}" for c in r) for r in rows]
    return "\n".join(lines)


def npu_smi_board(h: Host, npu: int, chip: int | None) -> str:
    die0 = 2 * npu
    chips = sum(1 for d in (die0, die0 + 1) if d < h.dies)
    lines = [
        field("NPU ID", npu),
        field("Product Name", "Atlas 800T A3 (simulated)"),
        field("Model", "NA"),
        field("Manufacturer", "Huawei"),
        field("Serial Number", f"SIM{h.index:02d}A3{npu:02d}"),
        field("Software Version", h.running_versions()[0]),
        field("Firmware Version", h.running_versions()[1]),
        field("Compatibility", "OK"),
        field("Board ID", "0xb0"),
        field("Main Board ID", "0x1a"),
        field("PCB ID", "A"),
        field("BOM ID", "1"),
        field("PCIe Bus Info", f"0000:{BUS_IDS[die0]}:00.0"),
        field("Slot ID", npu),
        field("Class ID", "NA"),
        field("PCI Vendor ID", "0x19E5"),
        field("PCI Device ID", "0xD803"),
        field("Subsystem Vendor ID", "0x19E5"),
        field("Subsystem Device ID", "0x3000"),
        field("Chip Count", chips),
    ]
    if chip is not None:
        die = die0 + chip
        lines += [
            field("Chip ID", chip),
            field("Chip Type", "Ascend"),
            field("Chip Name", "910_9392"),
            field("Chip Version", "V1"),
            field("VDie ID", f"SIM{h.index:02d}VD{die:02d}"),
            field("NDie ID", f"SIM{h.index:02d}ND{die:02d}"),
            field("Chip Position ID", chip),
        ]
    return "\n".join(lines)


def npu_smi_health(h: Host, npu: int, chip: int | None) -> str:
    dies = [2 * npu + chip] if chip is not None else [d for d in (2 * npu, 2 * npu + 1) if d < h.dies]
    order = ["OK", "Warning", "Alarm", "Critical"]
    worst = max((h.health(d) for d in dies), key=order.index)
    code, info = HEALTH_ERRORS.get(worst, ("NA", "NA"))
    return "\n".join([field("Health Status", worst), field("Error Code", code), field("Error Information", info)])


def npu_smi_spod(h: Host, npu: int, chip: int) -> str:
    die = 2 * npu + chip
    server = int(h.entry["rank"])
    # SDID: the sample (a3-tools T6) pairs server index 4 with 16777216 = 4 << 22; the die bits are SYNTHETIC.
    sdid = (server << 22) | (die << 16)
    return "\n".join(
        [field("SDID", sdid), field("Super Pod Size", len(self_cluster_hosts(h)) * DIES), field("Super Pod ID", 0)]
        + [field("Server Index", server)]
    )


def self_cluster_hosts(h: Host) -> list[dict[str, Any]]:
    return list(h.cluster["hosts"])


def npu_smi_list(h: Host) -> str:
    lines = [field("Total Count", npu_count(h.dies)), ""]
    for npu in range(npu_count(h.dies)):
        lines += [field("NPU ID", npu), field("Chip Count", sum(1 for d in (2 * npu, 2 * npu + 1) if d < h.dies)), ""]
    return "\n".join(lines).rstrip("\n")


NPU_SMI_USAGE = (
    "usage: npu-smi info [-m | -l | -t board|health -i <npu> [-c <chip>] | -t spod-info -i <npu> -c <chip>] "
    "(simulated A3 host: npu 0-7, chip 0-1)"
)


def _opts(args: list[str], allowed: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    it = iter(args)
    for a in it:
        if a not in allowed:
            raise SimError(f"unknown option '{a}'")
        out[a] = next(it, "")
        if out[a] == "":
            raise SimError(f"option '{a}' needs a value")
    return out


def npu_smi(argv: list[str]) -> int:
    if not argv or argv[0] != "info":
        print(NPU_SMI_USAGE, file=sys.stderr)
        return 2
    with exclusive("npu-smi") as mine:
        if not mine:
            print(BUSY_TEXT.format(tool="npu-smi", what="the device manager"), file=sys.stderr)
            return 1
        hold()
        return _npu_smi_info(argv)


def _npu_smi_info(argv: list[str]) -> int:
    h = Host.load()
    rest = argv[1:]
    if not rest:
        print(npu_smi_table(h))
        return 0
    if rest == ["-m"]:
        print(npu_smi_mapping(h))
        return 0
    if rest == ["-l"]:
        print(npu_smi_list(h))
        return 0
    try:
        o = _opts(rest, {"-t", "-i", "-c"})
    except SimError as e:
        print(f"npu-smi: {e}. {NPU_SMI_USAGE}", file=sys.stderr)
        return 2
    kind = o.get("-t", "")
    if kind not in ("board", "health", "spod-info") or "-i" not in o:
        print(NPU_SMI_USAGE, file=sys.stderr)
        return 2
    n = npu_count(h.dies)
    if not o["-i"].isdigit() or int(o["-i"]) >= n:
        print(f"npu-smi: the NPU ID {o['-i']} is invalid; this host has NPU IDs 0-{n - 1}", file=sys.stderr)
        return 1
    npu = int(o["-i"])
    chip: int | None = None
    if "-c" in o:
        if not o["-c"].isdigit() or 2 * npu + int(o["-c"]) >= h.dies or int(o["-c"]) > 1:
            print(f"npu-smi: the chip ID {o['-c']} is invalid for NPU {npu}", file=sys.stderr)
            return 1
        chip = int(o["-c"])
    if kind == "board":
        print(npu_smi_board(h, npu, chip))
    elif kind == "health":
        print(npu_smi_health(h, npu, chip))
    else:
        if chip is None:
            print("npu-smi: spod-info needs -c <chip>", file=sys.stderr)
            return 2
        print(npu_smi_spod(h, npu, chip))
    return 0
