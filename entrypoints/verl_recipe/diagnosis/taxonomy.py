"""General rules read from the vendors' documented taxonomies of errors, not from single threads.

Each rule or table below cites the taxonomy it follows:
- aclError return codes (CANN runtime API reference, "aclError"): 1XXXXX environment or code logic, 2XXXXX resources
  (207001/207002/207018 device memory), 3XXXXX services, 5XXXXX internal (507XXX a task the device failed).
- CANN error codes (CANN "ReportPredefinedErrMsg"/"ReportInnerErrMsg"): E, a module character, four digits;
  0000-8999 user errors, 9000-9999 internal. The classes families.py does not know are read here.
- aclnn return codes (CANN aclnn API reference): 561003 the operator's binary package is not installed.
- torch_npu's error codes ("ERR" + a two-digit submodule + a three-digit ErrCode: 006 memory, 011 timeout, 100 an ACL
  call failed, 200 an HCCL call failed) and HcclResult (hccl_types.h) for "HCCL function error ... error code is N".
- HCCL's initialisation errors (CANN HCCL user guide, "communicator initialisation"): socket listen, RDMA (HCCP),
  transport links and the root-info topology detection that lists the ranks that never connected.
- Ray's exception classes and death causes (docs.ray.io: "Fault tolerance", "Out-of-memory prevention").
- Python's exception hierarchy (docs.python.org "Built-in exceptions"; argparse; torch's load_state_dict) and
  OmegaConf/Hydra's override errors; a traceback's family by where it was raised (its innermost known frame).

A rule that only wraps another error (torch_npu's "ERR02200 ... call hccl api failed", "call aclnnX failed") is a
wrapper: the first-failure ordering follows it to the more specific error printed just below it (firstfailure.py).
The codes and a traceback's place are read in codes.py.
"""

from __future__ import annotations

from . import families as fam
from .families import LOW, MEDIUM, Rule
from .taxonomy_more import MORE_RULES

# How specific an event is: a wrapper < a code's class < a rule on the message < a known signature.
WRAPPER, CODE_CLASS, MESSAGE, SIGNATURE = 0, 1, 2, 3

CANN_DOC = "CANN's error taxonomy"
TORCH_NPU = "torch_npu's error format"
HCCL_INIT = "HCCL's initialisation errors"
SOURCE_RAY_EXCEPTIONS = "Ray's exception classes"
PYTHON = "Python's exception classes"

RULES: tuple[Rule, ...] = (
    Rule(
        "hydra-override",
        "code-config",
        MEDIUM,
        "a Hydra override names a key the config does not have",
        "OmegaConf/Hydra's override errors",
        (
            r"Could not override '[^'\n]{1,200}'",
            r"Key '[^'\n]{1,200}' is not in struct",
            r"\bConfigCompositionException\b",
            r"\bConfigAttributeError\b",
            r"\bMissingMandatoryValue\b",
        ),
        (
            "could not override",
            "is not in struct",
            "configcompositionexception",
            "configattributeerror",
            "missingmandatoryvalue",
        ),  # noqa: E501
        "a command-line override names a key that is not in verl's config (renamed or removed in this verl), or a "
        "required value is missing",
        fix="drop or rename the override (compare `python -m verl.trainer.main_ppo --cfg job`), or add a new key "
        "with a leading `+`; then `verl-recipe validate` with the same overrides",
    ),
    Rule(
        "argparse-args",
        "code-config",
        MEDIUM,
        "a command line that the program's argument parser refused",
        "Python's argparse",
        (r": error: unrecognized arguments:", r": error: the following arguments are required:", r": error: argument "),
        ("error: unrecognized arguments", "error: the following arguments", "error: argument "),
        "the launch command passes an argument the program does not (or no longer) accept",
        fix="run the program with `--help` and correct the launch command's arguments",
    ),
    Rule(
        "overlong-prompt",
        "data",
        MEDIUM,
        "a prompt longer than the rollout's maximum length",
        "the rollout's prompt-length check",
        (r"Prompt length of \d+ is longer than the maximum model length", r"prompt \(length \d+\) is longer than"),
        ("prompt length of", "is longer than"),
        "a prompt of the data set is longer than the rollout engine accepts (max_model_len)",
        fix="set data.filter_overlong_prompts=True, or raise data.max_prompt_length and the rollout's max_model_len",
    ),
    Rule(
        "state-dict-mismatch",
        "checkpoint",
        MEDIUM,
        "a checkpoint whose keys or shapes do not fit the model",
        "torch's load_state_dict errors",
        (
            r"Error\(s\) in loading state_dict for",
            r"(?:Missing|Unexpected) key\(s\) in state_dict",
            r"size mismatch for [\w.]{1,200}: copying a param",
        ),
        ("in loading state_dict", "in state_dict", "size mismatch for"),
        "the checkpoint loaded was written for another model, layout or format than the one being built",
        fix="load a checkpoint of this model and layout (or convert it first); with auto-resume, move the old "
        "global_step folders away or set RESUME_MODE=disable",
    ),
    Rule(
        "ckpt-file-missing",
        "checkpoint",
        MEDIUM,
        "a checkpoint file that is not there",
        PYTHON + " (FileNotFoundError, errno 2, on a checkpoint path)",
        (
            r"No such file or directory: '[^'\n]{0,300}"
            r"(?:checkpoint|ckpt|global_step|iter_\d{7}|\.distcp|\.safetensors)",
        ),
        ("no such file or directory",),
        "the checkpoint folder read lacks a file the loader expects (another format, a partial save, or storage that "
        "is not shared)",
        fix="`ls` the checkpoint folder on every host; point the load at a complete global_step folder on shared "
        "storage (CKPT_DIR), or RESUME_MODE=disable",
    ),
    Rule(
        "device-oom",
        "device-memory",
        MEDIUM,
        "the device ran out of memory",
        "the device runtime's out-of-memory errors",
        (
            r"\b(?:CUDA|GPU|NPU|HBM|device)\b[^\n]{0,40}\bout of memory",
            r"Cuda failure 2\b",
            r"\bcudaErrorMemoryAllocation\b",
            r"No available memory for the cache blocks",
            r"\bACL_ERROR_RT_MEMORY_ALLOCATION\b",
        ),
        ("out of memory", "cuda failure 2", "cudaerrormemoryallocation", "no available memory", "memory_allocation"),
        "a die ran out of device memory (an allocation, or the rollout's KV cache after the model's weights)",
        fix="lower GEN_MEM_UTIL or raise GEN_TP (rollout); lower PPO_MAX_TOKEN_LEN_PER_GPU (actor); `npu-smi info` "
        "shows what else holds the die",
    ),
    Rule(
        "ray-oom-doc",
        "host-memory",
        MEDIUM,
        "Ray's memory monitor killed a task",
        SOURCE_RAY_EXCEPTIONS + " (OOM prevention)",
        (r"ray-oom-prevention", r"\bRAY_memory_usage_threshold\b", r"running low on memory"),
        ("ray-oom-prevention", "ray_memory_usage_threshold", "running low on memory"),
        "host RAM on a node crossed Ray's memory threshold and Ray killed a worker",
        fix="`ray logs raylet.out -ip <node>` names the biggest processes; offload less to the host, run the "
        "reward model elsewhere, or add nodes",
    ),
    Rule(
        "ray-gcs-unreachable",
        "ray-lost",
        MEDIUM,
        "the Ray head (GCS) could not be reached",
        SOURCE_RAY_EXCEPTIONS + " (GCS fault tolerance)",
        (r"(?:Failed|Unable) to connect to (?:the )?GCS", r"GCS (?:has not responded|is not reachable|died)"),
        ("to connect to gcs", "to connect to the gcs", "gcs has not", "gcs is not", "gcs died"),
        "a node could not reach the Ray head's GCS: the head died, or the cluster network or a firewall blocks it",
        fix="`ray status` on the head and /tmp/ray/session_latest/logs/gcs_server.out there; start the nodes again "
        "with `verl-recipe node`",
    ),
    Rule(
        "ray-creation-task",
        "code-config",
        LOW,
        "an actor's constructor raised",
        SOURCE_RAY_EXCEPTIONS + " (ActorDiedError's cause)",
        (r"died because of an error raised in its creation task",),
        ("raised in its creation task",),
        "the actor's __init__ raised: its own exception, printed below, is the cause",
        fix="read the exception under this line (the actor's __init__) and fix what it names",
    ),
    Rule(
        "ray-task-error",
        "ray-lost",
        LOW,
        "a Ray actor the task called died: its own report is printed under this line",
        SOURCE_RAY_EXCEPTIONS + " (RayTaskError wraps the remote error)",
        (r"\bRayTaskError\((?:ActorDiedError|RayActorError|WorkerCrashedError|ActorUnavailableError)\): ",),
        ("raytaskerror(",),
        "Ray re-raised, in the caller, the death of an actor it called: the address on this line is the caller's; "
        "the remote traceback and the death report with the dead worker's address follow",
        fix="read the error under this line: its type and, for a dead actor, the worker's address and exit detail",
    ),
    Rule(
        "store-connect",
        "communication",
        MEDIUM,
        "a rank could not connect to the rendezvous store",
        "torch.distributed's rendezvous errors",
        (
            r"socket has timed out after \d+s while trying to connect to",
            r"\bRendezvousConnectionError\b",
            r"connection to the C10d store has failed",
        ),
        ("while trying to connect to", "rendezvousconnectionerror", "c10d store has failed"),
        "the ranks never connected: the store's address (MASTER_ADDR:MASTER_PORT) is not reachable from this rank "
        "(a container's bridge address, a firewall, the wrong interface)",
        fix="check that MASTER_ADDR is the head's cluster address and its port is open from every host "
        "(`nc -z <addr> <port>`); preflight row host_firewall",
    ),
    Rule(
        "hccl-api",
        "communication",
        MEDIUM,
        "an HCCL call failed",
        TORCH_NPU,
        (r"HCCL function error: [\w:]{1,80}", r"\bHCCL error in:", r"hcclCommInitRootInfo\w{0,20}\("),
        ("hccl function error", "hccl error in:", "hcclcomminitrootinfo"),
        "torch_npu's HCCL call failed (setting up a communicator or a collective)",
        fix="read the CANN error printed under it (EI/EJ codes) in the plog; then `deploy.yml --tags preflight` "
        "and `verl-recipe train ... --rehearse`",
    ),
    Rule(
        "hccl-link-init",
        "communication",
        MEDIUM,
        "HCCL could not open its NPU network links",
        HCCL_INIT,
        (
            r"\[HcclSocket\]\[Listen\][^\n]{0,200}\bfail",
            r"listen on ip\[[^\]\n]{1,60}\][^\n]{0,80}\bfail",
            r"\bra (?:rdma|rdev|nic) init(?: rdma)? fail",
            r"\brdma init fail",
            r"Transport init error",
            r"Create Dest error",
            r"Socket init failed",
        ),
        ("hcclsocket", "listen on ip", "init fail", "transport init error", "create dest error", "socket init failed"),
        "an NPU network link could not be set up: the die's NIC is down or has no IP, the port is taken, or the "
        "remote die is unreachable",
        fix="on that host `hccn_tool -i <die> -link -g` and `hccn_tool -i <die> -ip -g`; then "
        "`deploy.yml --tags preflight` (rows npu_link, npu_ip) and `verl-recipe train ... --rehearse`",
    ),
    Rule(
        "hccl-ranks-missing",
        "communication",
        MEDIUM,
        "ranks never joined the HCCL communicator",
        HCCL_INIT + " (root-info topology detection, EI0015)",
        (
            r"topo exchange server get socket timeout",
            r"TopoDetect ERROR",
            r"Failed to connect agent\[",
            r"List of unconnected ranks",
            r"\bget socket timeout\b",
            r"ranktable[^\n]{0,80}\b(?:invalid|error|fail)",
        ),
        (
            "topo exchange",
            "topodetect",
            "failed to connect agent",
            "unconnected ranks",
            "get socket timeout",
            "ranktable",
        ),  # noqa: E501
        "some ranks never connected to the root rank within HCCL_CONNECT_TIMEOUT: they failed or started late, or "
        "cannot reach the root's host address",
        fix="find the unconnected ranks' own errors first; check HCCL_SOCKET_IFNAME and the hosts' cluster network; "
        "raise env.HCCL_CONNECT_TIMEOUT only when ranks start slowly",
        symptom=True,
    ),
    Rule(
        "net-completion-error",
        "communication",
        MEDIUM,
        "the RDMA network lost packets",
        "InfiniBand/RoCE work-completion errors",
        (
            r"\bgot completion (?:from peer|with error)",
            r"\bncclSystemError\b",
            r"\bncclRemoteError\b",
            r"remote process exited or there was a network error",
            r"NCCL error in:[^\n]{0,200}(?:system error|remote process|network error)",
        ),
        ("got completion", "ncclsystemerror", "ncclremoteerror", "network error", "nccl error in:"),
        "a transfer between hosts failed on the RDMA network (a retry timeout, a link flapping, a wrong GID)",
        fix="check the NICs and links of both hosts (`ibv_devinfo`, `hccn_tool -i <die> -link -g` on NPU); run "
        "`verl-recipe train ... --rehearse` for the links",
    ),
    Rule(
        "device-exception",
        "kernel",
        MEDIUM,
        "a kernel failed on the device (AI Core / AI CPU exception)",
        CANN_DOC + " (AI Core error analysis)",
        (
            r"\bAICERROR\b",
            r"\bai ?core (?:error|exception)",
            r"exception of (?:aivec|aicore|aic) error",
            r"\baicpu (?:execute failed|exception|execution is abnormal)",
            r"exception occurred during AICPU execution",
            r"Kernel task happen error",
            r"The DDR address of the MTE instruction is out of range",
        ),
        ("aicerror", "aicore", "ai core", "aivec", "aicpu", "kernel task happen", "mte instruction"),
        "an operator's kernel raised an exception on the device (an address out of range, an illegal "
        "instruction): a kernel bug or inputs it does not support",
        fix="the plog names the operator (kernel name, op type); check CANN, torch_npu and vllm-ascend against "
        "docker/versions.yaml; ASCEND_LAUNCH_BLOCKING=1 finds the Python call",
    ),
    Rule(
        "op-binary-missing",
        "image-version",
        MEDIUM,
        "an operator has no binary in the installed CANN",
        CANN_DOC + " (aclnn 561003: operator binary package not installed)",
        (
            r"does not ha(?:s|ve) any binary",
            r"Cannot parse json for config file[^\n]{0,300}/opp/",
            r"\bACLNN_ERR_INNER_FIND_KERNEL_ERROR\b",
            r"errno:\s?561003\b",
        ),
        ("any binary", "cannot parse json for config", "find_kernel_error", "561003"),
        "CANN's operator package (opp kernels) is missing or from another CANN release than the toolkit",
        fix="run the pinned image (docker/versions.yaml) whose CANN kernels match the toolkit and the chip; "
        "`verl-recipe doctor` in it",
    ),
    Rule(
        "cann-python-env",
        "image-version",
        MEDIUM,
        "CANN could not import its own Python modules",
        CANN_DOC + " (EC0010)",
        (r"Failed to import Python module", r"\bset_env\.sh\b[^\n]{0,80}\b(?:not|fail)"),
        ("failed to import python module", "set_env.sh"),
        "CANN's Python packages (te, tbe) are not on this Python's path: set_env.sh was not sourced, or CANN's "
        "Python dependencies are missing",
        fix="start through the image's entrypoint (it sources /usr/local/Ascend/ascend-toolkit/set_env.sh); "
        "`verl-recipe doctor` in the container",
    ),
    Rule(
        "acl-graph-api",
        "rollout",
        MEDIUM,
        "the rollout could not capture its ACL graph",
        CANN_DOC + " (aclmdlRICapture, the graph-capture API)",
        (r"\baclmdlRICapture\w{0,20}", r"Capture (?:cuda|npu|acl) graph failed"),
        ("aclmdlricapture", "graph failed"),
        "the rollout engine's graph capture failed (an operator not allowed in capture, or too many capture sizes)",
        fix="give the rollout fewer cudagraph_capture_sizes, or run it eager (enforce_eager=True) to confirm",
    ),
    Rule(
        "device-visibility",
        "code-config",
        MEDIUM,
        "a process asked for a device it cannot see",
        CANN_DOC + " (aclError 107001, invalid device id)",
        (
            r"Set visible device failed",
            r"invalid device=\d+",
            r"reason=\[device id error\]",
            r"ACL_ERROR_RT_INVALID_DEVICEID",
        ),  # noqa: E501
        ("set visible device failed", "invalid device=", "device id error", "invalid_deviceid"),
        "the device id asked for is beyond ASCEND_RT_VISIBLE_DEVICES (Ray rewrites it for each worker)",
        fix="leave ASCEND_RT_VISIBLE_DEVICES to Ray, or set RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1 "
        "where the code picks devices itself",
    ),
    Rule(
        "module-version",
        "image-version",
        LOW,
        "an installed package is missing or of another version",
        PYTHON + " (ModuleNotFoundError, ImportError, AttributeError on a module)",
        # raised, not a library's message that it falls back: the exception's name comes before the text
        (
            r"\bModuleNotFoundError: No module named '[^'\n]{1,200}'",
            r"\bImportError: cannot import name '[^'\n]{1,200}' from",
            r"\bAttributeError: module '[\w.]{1,200}' has no attribute '",
            r"\b(?:ImportError|OSError): [^\n]{0,300}(?:undefined symbol: |version `?(?:GLIBC|GLIBCXX|CXXABI)_)",
        ),
        ("no module named", "cannot import name", "has no attribute", "undefined symbol", "version"),
        "the image lacks a package, or holds one of another version than its callers were written for",
        fix="run the pinned image (docker/versions.yaml) unchanged; `verl-recipe doctor` in it lists packages "
        "that differ from the pins",
    ),
    Rule(
        "dataset-load",
        "data",
        MEDIUM,
        "the data set could not be found or read",
        "the data loaders' errors (Hugging Face datasets, Megatron's indexed data set)",
        (
            r"\b(?:DatasetGenerationError|DataFilesNotFoundError|DatasetNotFoundError)\b",
            r"\b(?:Undefined dataset|Dataset does not exist)\b",
            r"No such file or directory: '[^'\n]{0,300}\.(?:parquet|jsonl?|arrow|csv)'",
        ),
        ("datasetgenerationerror", "datafilesnotfounderror", "datasetnotfounderror", "dataset", "no such file"),
        "the data files named (data.train_files, data.val_files) are missing, unreadable or not in the expected format",
        fix="check that data.train_files and data.val_files exist on every host (shared storage) and are parquet "
        "with the prompt column the recipe names; `verl-recipe validate` reads their columns",
    ),
    Rule(
        "host-enomem",
        "host-memory",
        MEDIUM,
        "the host could not allocate memory",
        PYTHON + " (errno 12 ENOMEM), C++'s std::bad_alloc",
        (r"\[Errno 12\] Cannot allocate memory", r"\bstd::bad_alloc\b", r"Memory on the node \(IP:"),
        ("cannot allocate memory", "bad_alloc", "memory on the node"),
        "a process could not get host RAM: the node's memory is full (offloaded state, many workers, a big reward "
        "model)",
        fix="`free -g` and `ray logs raylet.out -ip <node>` on that host; offload less to the host or add nodes; "
        "setting HOST_MEM_GIB",
    ),
    Rule(
        "sigkill",
        "host-memory",
        LOW,
        "a process was killed by SIGKILL",
        "POSIX signals (a negative exit code is the signal; SIGKILL is what the kernel's OOM killer sends)",
        (r"Signal 9 \(SIGKILL\) received by PID", r"\bexit ?code\s?[:=]?\s?-9\b", r"<Signals\.SIGKILL: 9>"),
        ("sigkill", "code"),
        "a process died of SIGKILL: most often the kernel's OOM killer (host RAM), else a person or `ray stop`",
        fix="`dmesg -T | grep -i -e oom -e killed` on that host names the killed process; offload less or add nodes",
    ),
    Rule(
        "device-in-use",
        "device-busy",
        MEDIUM,
        "the device is busy or held",
        PYTHON + " (errno 16 EBUSY) and the NPU driver's device-in-use errors",
        (
            r"\[Errno 16\] Device or resource busy",
            r"\bdevice (?:is )?(?:busy|occupied|already in use|being used)\b",
            r"\bbecause the device is used\b",
            r"\bDRV_ERROR_BUSY\b",
        ),
        (
            "resource busy",
            "device is busy",
            "device busy",
            "occupied",
            "already in use",
            "being used",
            "device is used",
            "drv_error_busy",
        ),
        "another process or container holds the device, or it is being reset",
        fix="`npu-smi info` on that host: stop the process or container that holds the dies, then start the run again",
    ),
    Rule(
        "vllm-engine-dead",
        "rollout",
        LOW,
        "the rollout engine died",
        "vLLM's engine errors",
        (
            r"\bEngineDeadError\b",
            r"EngineCore (?:encountered a fatal error|encountered an issue|hit an exception|failed to start)",
            r"Engine core initialization failed",
            r"WorkerProc failed to start",
        ),
        ("enginedeaderror", "enginecore", "engine core initialization", "workerproc failed"),
        "vLLM's engine core process died; its own error is printed above this line",
        fix="read the EngineCore's traceback above; with ACL graph errors try fewer cudagraph capture sizes or "
        "eager mode",
        symptom=True,
    ),
    Rule(
        "aclnn-call",
        "kernel",
        LOW,
        "an aclnn operator call failed",
        TORCH_NPU,
        (r"call aclnn\w{1,80} failed",),
        ("call aclnn",),
        "an aclnn operator returned an error; the CANN message under it says why",
        fix="read the CANN error printed under it (the plog has the full message); check CANN and torch_npu "
        "against docker/versions.yaml",
    ),
    *MORE_RULES,
)
# Rules that only wrap the error below them, and those that read only a code's class.
WRAPPER_IDS = frozenset({"hccl-api", "ray-creation-task", "ray-task-error", "torch-npu-code"})
CLASS_IDS = frozenset({"aclnn-call", "cann-code", "acl-code", "exception-type"})


def specificity(rule_id: str, confidence: str) -> int:
    if confidence == fam.HIGH:
        return SIGNATURE
    if rule_id in WRAPPER_IDS:
        return WRAPPER
    return CODE_CLASS if rule_id in CLASS_IDS else MESSAGE
