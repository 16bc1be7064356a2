"""Errors read by their codes and places (the taxonomies named in taxonomy.py's docstring): CANN's codes by class,
aclError's and torch_npu's codes by class, HcclResult's names, the place an HCCL link error points to, and a Python
traceback's exception (after the prefixes a forwarded line carries) with the part of the run it was raised in.
Every pattern is bounded and reads at most the first 4096 characters of a line."""

from __future__ import annotations

import re
from collections.abc import Sequence

from . import families as fam

_IPV4 = r"(\d{1,3}(?:\.\d{1,3}){3})"

# CANN codes of classes families.CANN_CLASSES does not hold (read from the tune texts' messages).
CANN_ANY = re.compile(r"(?<![A-Za-z0-9])(E[A-Z0-9])(\d{4})(?![0-9])")
CANN_MORE: dict[str, tuple[str, str, bool]] = {
    "EH": ("kernel", "the runtime (waiting for a device task)", False),
    "E1": ("kernel", "the graph engine (GE)", False),
    "E3": ("kernel", "an AI CPU operator", False),
    "E6": ("kernel", "an operator's tiling", False),
    "EC": ("image-version", "CANN's compiler environment", False),
}


def cann_code(line: str) -> tuple[str, str, str, bool] | None:
    """(code, family, what raised it, symptom) of the first CANN code of a known class (families' or these)."""
    for m in CANN_ANY.finditer(line[:4096]):
        known = fam.CANN_CLASSES.get(m.group(1)) or CANN_MORE.get(m.group(1))
        if known:
            return (m.group(0), *known)
    return None


# aclError by its class (CANN "aclError"): the code follows these words in torch_npu's and CANN's messages.
ACL_CODE = re.compile(r"(?:error code is|error code\s?[:=]|runtime result\s?=|errno\s?[:=])\s?([1-5]\d{5})\b")
ACL_EXACT: dict[str, tuple[str, str]] = {
    "107001": ("code-config", "an invalid device id (ACL_ERROR_RT_INVALID_DEVICEID)"),
    "207001": ("device-memory", "device memory allocation failed"),
    "207002": ("device-memory", "device memory could not be freed or allocated"),
    "207018": ("device-memory", "device memory is insufficient"),
}


def acl_code(line: str) -> tuple[str, str, str] | None:
    """(code, family, meaning) of an aclError in `line` whose class names a family."""
    m = ACL_CODE.search(line[:4096])
    if not m:
        return None
    code = m.group(1)
    if code in ACL_EXACT:
        return (code, *ACL_EXACT[code])
    if code.startswith("507"):
        return code, "kernel", "a task failed on the device (aclError 507XXX: driver or execution)"
    return None


# The NPU driver's return codes (drvError_t in the driver's ascend_hal.h), as CANN's logs print them ("drvErr=87",
# "drvRetCode=13"): only codes whose meaning names a family.
DRV_CODE = re.compile(r"\bdrv(?:Err|RetCode|_ret|Ret)\s?[=:]\s?(\d{1,5})\b", re.IGNORECASE)
DRV_EXACT: dict[str, tuple[str, str]] = {
    "6": ("device-memory", "the driver is out of device memory (DRV_ERROR_OUT_OF_MEMORY)"),
    "13": ("device-busy", "the device is busy (DRV_ERROR_BUSY)"),
    "45": ("device-busy", "the device is being hot-reset (DRV_ERROR_HOT_RESET_IN_PROGRESS)"),
    "87": ("device-busy", "the device is held by another process or container (DRV_ERROR_RESOURCE_OCCUPIED)"),
}


def drv_code(line: str) -> tuple[str, str, str] | None:
    """(code, family, meaning) of an NPU driver return code in `line` whose meaning names a family."""
    m = DRV_CODE.search(line[:4096])
    if not m or m.group(1) not in DRV_EXACT:
        return None
    return (f"drvError {m.group(1)}", *DRV_EXACT[m.group(1)])


# torch_npu's "ERR<submodule><code>": only codes whose class says a family (100, an ACL call, waits for its code).
TORCH_NPU_CODE = re.compile(r"\bERR\d\d(\d{3})\b")
TORCH_NPU_CLASSES = {
    "006": ("device-memory", "a memory error"),
    "011": ("timeout-hang", "a timeout"),
    "200": ("communication", "an HCCL call failed"),
}


def torch_npu_code(line: str) -> tuple[str, str, str] | None:
    m = TORCH_NPU_CODE.search(line[:4096])
    if not m or m.group(1) not in TORCH_NPU_CLASSES:
        return None
    return (m.group(0), *TORCH_NPU_CLASSES[m.group(1)])


# HcclResult names (hccl_types.h), said in the cause of an "HCCL function error ... error code is N".
HCCL_RESULTS = {
    "1": "HCCL_E_PARA", "2": "HCCL_E_PTR", "3": "HCCL_E_MEMORY", "4": "HCCL_E_INTERNAL", "5": "HCCL_E_NOT_SUPPORT",
    "6": "HCCL_E_NOT_FOUND", "7": "HCCL_E_UNAVAIL", "8": "HCCL_E_SYSCALL", "9": "HCCL_E_TIMEOUT",
    "11": "HCCL_E_TCP_CONNECT", "12": "HCCL_E_ROCE_CONNECT", "13": "HCCL_E_TCP_TRANSFER",
    "14": "HCCL_E_ROCE_TRANSFER", "15": "HCCL_E_RUNTIME", "19": "HCCL_E_NETWORK", "21": "HCCL_E_REMOTE",
}  # fmt: skip
HCCL_RESULT = re.compile(r"HCCL function error: [^\n]{0,300}?error code is (\d{1,2})\b")


def hccl_result(line: str) -> str | None:
    m = HCCL_RESULT.search(line[:4096])
    return HCCL_RESULTS.get(m.group(1)) if m else None


# The host and rank an HCCL line points to: the address it could not listen on, or the remote it could not reach.
_POINTS = (
    re.compile(r"listen on ip\[" + _IPV4 + r"\]"),
    re.compile(r"dst_rank\[(\d{1,6})\][^\n]{0,80}?remote_?ip(?:_?addr)?\[" + _IPV4 + r"\]"),
    re.compile(r"remote_?ip(?:_?addr)?\[" + _IPV4 + r"\]"),
)


def pointed_place(line: str) -> tuple[str, str | None] | None:
    """(address, rank) of the place an HCCL link error points to, or None."""
    text = line[:4096]
    for rx in _POINTS:
        m = rx.search(text)
        if m:
            groups = m.groups()
            return (groups[-1], groups[0]) if len(groups) == 2 else (groups[0], None)
    return None


# The ranks a communicator's set-up names as never connected (CANN HCCL guide, root-info topology detection: the
# agents that never reached the server; torch.distributed's monitored barrier: the ranks that failed to pass it).
_UNCONNECTED = (
    re.compile(r"Failed to connect agent\[([\d,\s]{1,400})\]"),
    re.compile(r"unconnected ranks?\W{0,10}\[?([\d,\s]{1,400})"),
    re.compile(r"\bRanks? ([\d,\s]{1,400}?) failed to pass monitoredBarrier"),
)


def unconnected_ranks(line: str) -> str | None:
    """ "1,3,5" for the ranks `line` names as never having joined a communicator or passed a barrier, or None."""
    text = line[:4096]
    for rx in _UNCONNECTED:
        m = rx.search(text)
        if m:
            ranks = [r for r in re.split(r"[,\s]+", m.group(1)) if r]
            if ranks:
                return ",".join(ranks[:64])
    return None


# The prefixes a forwarded line carries before its text: colour codes, Ray's "(Actor pid=N, ip=X)", torch's
# "[rank3]:", vLLM's "ERROR 06-09 06:57:48 [file.py:12]", docker compose's "service  | ", a "[TAG] ".
_PREFIX = re.compile(
    r"(?:\x1b?\[[\d;]{0,20}m"
    r"|\([^()\n]{0,200}\)\s?"
    r"|\[rank\d{1,6}\]:\s?"
    r"|(?:ERROR|WARNING|INFO|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})? \[?[\w.\-]{1,100}:\d{1,6}\]\s?"
    r"|[\w.\-]{1,64}\s{1,8}\|\s?"
    r"|\[[A-Z][A-Z ]{1,30}\]\s?)"
)
EXCEPTION = re.compile(r"([A-Za-z_][\w.]{0,200}(?:Error|Exception|Exit|Iteration))\b(?:\((\w{1,80})\))?")


def strip_prefix(line: str) -> str:
    text = line[:4096].lstrip()
    for _ in range(8):
        m = _PREFIX.match(text)
        if not m or not m.end():
            break
        text = text[m.end() :].lstrip()
    return text


def exception_at(line: str) -> tuple[str, str] | None:
    """(name, type read for its family) of a traceback's last line, after its prefixes; Ray's
    RayTaskError(KeyError) is read as its cause (Ray's as_instanceof_cause)."""
    m = EXCEPTION.match(strip_prefix(line))
    if not m:
        return None
    return m.group(1), m.group(2) or m.group(1)


# Where a traceback was raised: its innermost frame that names a part of a run (Python's traceback format).
FRAME = re.compile(r'^\s{0,40}File "([^"\n]{1,500})", line \d{1,7}, in ([\w<>.]{1,200})')
TRACEBACK_HEAD = "Traceback (most recent call last)"
AREAS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # a checkpoint module or function (not torch.utils.checkpoint: that is activation recomputation)
    (
        "checkpoint",
        re.compile(
            r"(?<!utils/)checkpoint\w{0,20}\.py|/dist_checkpointing/|\b_?(?:save|load)_(?:checkpoint|state_dict)\b"
        ),
    ),
    # the run's own reward function: a file of the site's, not an installed library's reward code
    ("code-config", re.compile(r"^(?!.*/(?:site|dist)-packages/).*reward", re.IGNORECASE)),
    (
        "data",
        re.compile(r"/(?:data|datasets?)/[^/]{1,200}$|dataset|dataloader|data_loader|collate|__getitem__", re.I),
    ),
    ("rollout", re.compile(r"/(?:vllm|vllm_ascend|sglang)/|/rollout/")),
)
BACK_LINES = 80


def raised_in(lines: Sequence[str], i: int) -> str | None:
    """The family of the part of the run a traceback ending at lines[i] was raised in, innermost frame first."""
    frames: list[str] = []
    for j in range(i - 1, max(-1, i - BACK_LINES), -1):
        text = strip_prefix(lines[j])
        if TRACEBACK_HEAD in text:
            break
        m = FRAME.match(text)
        if m:
            frames.append(f"{m.group(1)} {m.group(2)}")
    for frame in frames:  # innermost first: the lines were read upwards
        for family, rx in AREAS:
            if rx.search(frame):
                return family
    return None


# Where an exception's message ends: a new traceback, Python's chaining line, or a frame. torch_npu and CANN print
# their own explanation on the lines under "RuntimeError: ..." ("[ERROR] ... ERR00100", "EZ9999: Inner Error!").
MESSAGE_END = re.compile(
    r"Traceback \(most recent call last\)|During handling of the above exception|The above exception was the direct"
)
MESSAGE_LINES = 12


def message_reach(lines: Sequence[str], i: int) -> int:
    """How many lines under the exception line lines[i] still belong to its message (at most MESSAGE_LINES)."""
    n = 0
    for j in range(i + 1, min(len(lines), i + 1 + MESSAGE_LINES)):
        text = strip_prefix(lines[j])
        if MESSAGE_END.search(text) or FRAME.match(text):
            break
        n += 1
    return n


# Families a traceback's place may overrule: the generic ones a type alone gives (or none, for RuntimeError).
PLACE_DECIDES = (None, "code-config", "data")


def exception_family(lines: Sequence[str], i: int) -> tuple[str, str, bool] | None:
    """(name, family, by place) of the exception a traceback ends with at lines[i], or None."""
    found = exception_at(lines[i])
    if found is None:
        return None
    name, kind = found
    family = fam.exception_family(kind)
    if family in PLACE_DECIDES:
        place = raised_in(lines, i)
        if place is not None:
            return name, place, True
    return (name, family, False) if family else None
