"""Failure families, the general rules that put an unknown failure into one, and the lines that are never a failure.

Every finding of `verl-recipe diagnose` belongs to a family (FAMILIES): a known signature (signatures.py) names its
own, with high confidence; a failure no signature knows is put into one here, by a general rule, with the confidence
said plainly:
- Ray's own death reasons (an actor or worker that died, a node marked dead, the memory monitor): medium. Ray words
  them the same way in every release since 2.x (ray-project/ray#44680, verl-project/verl#2987, #4921).
- watchdog and store timeouts (torch's ProcessGroup watchdog, c10d's store): medium, and a symptom: a collective that
  timed out waited for a rank that failed or hung first (verl-project/verl#5607).
- CANN's error codes, by their class (the two letters after E): EI is HCCL and EJ is HCCP (the NPU network), EL is
  the runtime's resource state (EL0005 Resource_Busy, hw-native-sys/PTOAS#765), EE the runtime and EZ an operator
  (EZ9999 Inner Error, vllm-project/vllm-ascend PR #5287): low, the code's class says where, not why.
- the Python exception type of the last traceback: low (KeyError in a data loader and in a config look alike).

NOISE lists lines that look like errors and never are (MindSpeed's mstx range patch, verl-ascend-recipe
sapo/README.md Q2; Ray's raylet INFO lines; vLLM's and Python's warnings): they are never reported as the last error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

HIGH, MEDIUM, LOW = "high", "medium", "low"


@dataclass(frozen=True)
class Family:
    id: str
    title: str
    fix: str  # the next step for any failure of the family, when no signature says better
    prevent: str


FAMILIES: tuple[Family, ...] = (
    Family(
        "communication",
        "communication between ranks (HCCL, HCCP, gloo, the NPU network)",
        "find the rank that failed first (the first failure below, or HCCL's heartbeat lines in the plogs); then "
        "`deploy.yml --tags preflight` and `verl-recipe train ... --rehearse` for the links",
        "preflight rows npu_link, npu_ip, npu_tls, npu_ping; `--rehearse`",
    ),
    Family(
        "device-busy",
        "a device held by another process or not ready",
        "`npu-smi info` on that host: stop the process or container that holds the dies, or wait for a reset to end",
        "preflight row npu_occupancy",
    ),
    Family(
        "device-memory",
        "device (NPU) memory",
        "lower GEN_MEM_UTIL (rollout) or PPO_MAX_TOKEN_LEN_PER_GPU (actor), or spread the model wider",
        "the memory plan in `verl-recipe validate` (MEMORY_CHECK=refuse); `verl-recipe plan`",
    ),
    Family(
        "host-memory",
        "host memory and Ray's OOM killer",
        "`ray logs raylet.out -ip <node>` and the kernel log (`dmesg`) of that host name the biggest processes; "
        "offload less to the host or use more nodes",
        "setting HOST_MEM_GIB and preflight row host_memory",
    ),
    Family(
        "ray-lost",
        "a Ray node or actor lost",
        "read that host's kernel log (`dmesg | tail`: an OOM kill or a segfault) and its Ray logs "
        "(/tmp/ray/session_latest/logs/raylet.out, the dead worker's worker-*.err)",
        "setting HOST_MEM_GIB (the host-RAM estimate); `verl-recipe train` restarts a run that lost a node",
    ),
    Family(
        "rollout",
        "the rollout engine (vLLM, vllm-ascend) and its ACL graphs",
        "read the EngineCore's traceback; with ACL graph errors try fewer cudagraph capture sizes or eager mode",
        "the pinned vLLM and vllm-ascend (docker/versions.yaml); GEN_* settings",
    ),
    Family(
        "kernel",
        "a kernel that did not compile or an operator that failed",
        "the operator's message in the plog (EZ/EE codes) names it; check triton-ascend and CANN against the pins",
        "`verl-recipe doctor` and the image's import smoke",
    ),
    Family(
        "checkpoint",
        "checkpoint save or load",
        "read the exception under the save or load frames; check CKPT_DIR (shared, writable, free space)",
        "`verl-recipe doctor` check ckpt-space; the resume check of `verl-recipe validate`",
    ),
    Family(
        "image-version",
        "image and version mismatch",
        "run the pinned image (docker/versions.yaml) unchanged; `verl-recipe doctor` in it",
        "`verl-recipe doctor` and the image's import smoke",
    ),
    Family(
        "timeout-hang",
        "a timeout or hang",
        "a timeout is a symptom: the rank that did not arrive failed or hung first (its own error is earlier in its "
        "log); a rank with no error hung",
        "settings env.HCCL_EXEC_TIMEOUT and env.HCCL_CONNECT_TIMEOUT; the stall rule of the watch",
    ),
    Family(
        "data",
        "the training data",
        "check the data files' columns and the rows around the failing step (docs/faq.md, your own data)",
        "`verl-recipe validate` reads the data files' columns",
    ),
    Family(
        "code-config",
        "the run's own code or configuration (a reward function, a Hydra override, a value of the wrong type)",
        "read the traceback's last frames: the file and line it names are the site's own (a reward function on "
        "shared storage) or an override's value; fix it and run the same command",
        "`verl-recipe validate` with the same overrides; import the reward function once by hand",
    ),
)
BY_FAMILY = {f.id: f for f in FAMILIES}


@dataclass(frozen=True)
class Rule:
    """A general rule: a line that puts a failure into a family without knowing its exact cause."""

    id: str
    family: str
    confidence: str
    title: str
    basis: str  # which general rule: said in the finding, so its confidence can be judged
    patterns: tuple[str, ...]
    needles: tuple[str, ...]  # lower-case literals every matching line holds (a fast substring search first)
    cause: str
    symptom: bool = False  # a timeout or a broken link: it follows a failure elsewhere
    fix: str = ""  # the rule's own next step; empty: its family's
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile("|".join(f"(?:{p})" for p in self.patterns), re.IGNORECASE))


RAY = "Ray's death reason"
WATCHDOG = "a watchdog or store timeout"
PEER = "a peer that went away"

RULES: tuple[Rule, ...] = (
    Rule(
        "custom-code-load",
        "code-config",
        MEDIUM,
        "the run's own reward function could not be loaded or sent to the workers",
        "verl's loader of a custom reward function",
        (r"Error loading module from", r"Can't pickle <function[^>]*>: it's not the same object as"),
        ("error loading module from", "can't pickle <function"),
        "reward.custom_reward_function.path names a file verl could not import (a syntax error, a missing import), "
        "or a function that cannot be pickled to the reward workers",
    ),
    Rule(
        "ray-memory-monitor",
        "host-memory",
        MEDIUM,
        "Ray's memory monitor killed a worker",
        RAY,
        (r"killed by the memory monitor", r"NODE_OUT_OF_MEMORY", r"Workers? \(tasks / actors\) killed due to memory"),
        ("memory monitor", "node_out_of_memory", "killed due to memory"),
        "host RAM crossed Ray's memory threshold on that node and Ray killed a worker",
    ),
    Rule(
        "host-oom-kill",
        "host-memory",
        MEDIUM,
        "the kernel's OOM killer killed a process",
        "the kernel's OOM killer",
        (r"Out of memory: Kill(?:ed)? process", r"\boom-kill(?:er)?\b", r"invoked oom-killer"),
        ("out of memory: kill", "oom-kill"),
        "the host ran out of memory and the kernel killed a process (its log line names the pid)",
    ),
    Rule(
        "ray-node-dead",
        "ray-lost",
        MEDIUM,
        "Ray marked a node dead",
        RAY,
        (
            # Ray's wording across releases: "has been marked dead because the detector (monitor) has missed too
            # many heartbeats", the raylet's own "This node has been marked as dead" (docs.ray.io fault tolerance).
            r"has been marked dead because the (?:detector|monitor) has missed too many heartbeats",
            r"\bThis node has be(?:en|em) marked as dead\b",
            r"node manager has mistakenly been marked as dead",
            r"\bNodeDiedError\b",
            r"Local raylet died",
        ),
        ("marked dead", "marked as dead", "nodediederror", "raylet died"),
        "a node stopped answering Ray's health checks: its raylet crashed (out of memory, a reboot, a power loss) or "
        "the cluster network to it failed",
    ),
    Rule(
        "ray-worker-died",
        "ray-lost",
        MEDIUM,
        "a Ray worker process died",
        RAY,
        (
            r"The actor is dead because its worker process has died",
            r"The actor died unexpectedly before finishing this task",
            r"A worker died or was killed while executing a task",
            r"Worker exit type: SYSTEM_ERROR",
            r"\b(?:ActorDiedError|RayActorError|WorkerCrashedError|ActorUnavailableError)\b",
        ),
        (
            "actor is dead",
            "actor died",
            "worker died or was killed",
            "system_error",
            "actordiederror",
            "rayactorerror",
            "workercrashederror",
            "actorunavailableerror",
        ),  # fmt: skip
        "a worker process ended without an exception of its own: SIGKILL (the kernel's OOM killer, `ray stop "
        "--force`, a person), or a crash (SIGSEGV) in native code",
    ),
    Rule(
        "segfault",
        "ray-lost",
        LOW,
        "a process crashed in native code",
        "a fatal signal",
        (r"Segmentation fault", r"\bSIGSEGV\b", r"Fatal Python error", r"\bSIGABRT\b|Aborted \(core dumped\)"),
        ("segmentation fault", "sigsegv", "fatal python error", "sigabrt", "core dumped"),
        "a process died of a signal in native code (torch_npu, CANN, a kernel)",
    ),
    Rule(
        "peer-gone",
        "communication",
        MEDIUM,
        "a rank lost its connection to a peer",
        PEER,
        (
            r"Connection closed by (?:remote )?peer",
            r"Connection reset by peer",
            r"connectFullMesh failed",
            r"\bDistNetworkError\b",
            r"hcclCommInitRootInfo\w* failed|HcclCommInitRootInfo failed",
        ),
        (
            "closed by peer",
            "closed by remote peer",
            "reset by peer",
            "connectfullmesh",
            "distnetworkerror",
            "hcclcomminitrootinfo",
        ),
        "a rank's connection to another rank broke: the peer died or the network between them failed",
        symptom=True,
    ),
    Rule(
        "watchdog-timeout",
        "timeout-hang",
        MEDIUM,
        "a collective or store operation timed out",
        WATCHDOG,
        (
            r"Watchdog caught collective operation timeout",
            r"\bDistStoreError\b",
            r"client socket has timed out",
            r"\bGetTimeoutError\b",
            r"event wait timeout",
            r"Timed out (?:after|waiting)",
        ),
        ("watchdog caught", "diststoreerror", "has timed out", "gettimeouterror", "wait timeout", "timed out"),
        "a collective or a store wait ran past its timeout: another rank failed or hung before it",
        symptom=True,
    ),
)
RULE_BY_ID = {r.id: r for r in RULES}

# CANN's error codes: E, a class letter, four digits (EI0006, EL0005, EZ9999). The class says which part of CANN
# raised it; a signature knows the exact code where one does.
CANN_CODE = re.compile(r"(?<![A-Za-z0-9])(E[EIJLZ])(\d{4})(?![0-9])")
CANN_CLASSES: dict[str, tuple[str, str, bool]] = {
    # class: (family, what raised it, symptom)
    "EI": ("communication", "HCCL (collective communication)", True),
    "EJ": ("communication", "HCCP (the NPU network process)", False),
    "EL": ("device-busy", "the runtime's resource state", False),
    "EE": ("kernel", "the runtime (a task on the device failed)", False),
    "EZ": ("kernel", "an operator (aclnn)", False),
}

# The exception type of a traceback's last line. Order matters: the first name found wins.
EXCEPTIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "ray-lost",
        re.compile(
            r"\b(?:ActorDiedError|RayActorError|WorkerCrashedError|NodeDiedError|OwnerDiedError|"
            r"ObjectLostError|RaySystemError)\b"
        ),
    ),  # fmt: skip
    ("device-memory", re.compile(r"\btorch\.(?:cuda\.|npu\.)?OutOfMemoryError\b")),
    ("host-memory", re.compile(r"\b(?:MemoryError|OutOfMemoryError)\b")),
    ("timeout-hang", re.compile(r"\b(?:TimeoutError|GetTimeoutError|DistStoreError)\b")),
    (
        "communication",
        re.compile(
            r"\b(?:DistNetworkError|DistBackendError|ConnectionResetError|ConnectionError|"
            r"ConnectionRefusedError|BrokenPipeError)\b"
        ),
    ),  # fmt: skip
    (
        "image-version",
        re.compile(
            r"\b(?:ImportError|ModuleNotFoundError|InvalidVersion)\b|undefined symbol|"
            r"cannot open shared object file"
        ),
    ),  # fmt: skip
    (
        "checkpoint",
        re.compile(
            r"\bCheckpoint\w*(?:Error|Exception)\b|\bFileNotFoundError\b.*(?:ckpt|checkpoint|"
            r"global_step)",
            re.IGNORECASE,
        ),
    ),  # fmt: skip
    (
        "data",
        re.compile(
            r"\b(?:KeyError|IndexError|StopIteration|UnicodeDecodeError|JSONDecodeError|ArrowInvalid|"
            r"ArrowTypeError|ParserError)\b"
        ),
    ),  # fmt: skip
    # Last, as the widest: Python's own errors of code and values, and verl's "Error loading module" of a
    # custom reward function (verl/utils/import_utils.py load_module), at low confidence as every type rule.
    (
        "code-config",
        re.compile(
            r"\b(?:SyntaxError|IndentationError|NameError|AttributeError|TypeError|ValueError|AssertionError|"
            r"NotImplementedError)\b|Error loading module from"
        ),
    ),  # fmt: skip
)

# Lines that look like errors and are not. Each pattern says where it comes from.
NOISE: tuple[re.Pattern[str], ...] = (
    # MindSpeed redirects nvtx.range_pop to mstx.range_end, which wants an argument: printed every step, harmless
    # (verl-project/verl-ascend-recipe sapo/README.md, Q2).
    re.compile(r"mstx\.range_(?:end|start)\(\)|Call range_(?:end|start) failed"),
    # Ray's raylet forwards its INFO and WARNING records to the driver: "(raylet) [2024-.. I 12 34] ..." or INFO.
    re.compile(r"^\(raylet[^)]*\)\s*(?:\[[^\]]*\d [IW] \d+ \d+\]|INFO\b|WARNING\b)"),
    # A line whose level is INFO/DEBUG/WARNING (vLLM's "WARNING 06-09 06:57:48 [file.py:1]", Python logging's
    # "... - WARNING - ..."), after a Ray actor prefix: a warning is never the failure.
    re.compile(r"^(?:\([^)]*\)\s*)?(?:\[?(?:INFO|DEBUG|WARNING|WARN)\]?)[\s:]"),
    # A line the program itself calls a warning ("Warning: Failed to set NUMA affinity: libnuma.so: cannot open
    # shared object file", verl's worker on a host without libnuma, every healthy run): not the failure either.
    re.compile(r"^(?:\([^)]*\)\s*)?Warning:\s"),
    re.compile(r"\b(?:UserWarning|FutureWarning|DeprecationWarning|RuntimeWarning|ResourceWarning)\b"),
    # NCCL's INFO lines (its debug trace, NCCL_DEBUG=INFO) and Ray's own C++ log records at level I or W
    # ("[2022-02-16 12:45:07,907 W 149 199] node_manager.cc:157: ..."): never the failure.
    re.compile(r"\bNCCL INFO\b"),
    re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [IW] \d{1,10} \d{1,10}\]"),
)


def is_noise(line: str) -> bool:
    return any(rx.search(line) for rx in NOISE)


def exception_family(line: str) -> str | None:
    """The family of a traceback's last line, by its exception type (a general rule, low confidence)."""
    for family, rx in EXCEPTIONS:
        if rx.search(line):
            return family
    return None


def cann_code(line: str) -> tuple[str, str, str, bool] | None:
    """(code, family, what raised it, symptom) of the first CANN error code of a known class in `line`."""
    m = CANN_CODE.search(line)
    if not m:
        return None
    family, where, symptom = CANN_CLASSES[m.group(1)]
    return m.group(0), family, where, symptom
