"""What every doctor check shares: a Finding (name, status, detail, fix), the usage error, and the paths, pins
and names the checks read."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..contracts import runfiles

DRIVER_INFO = Path("/usr/local/Ascend/driver/version.info")
IMAGE_RECORD_DIR = Path(runfiles.IMAGE_RECORD_DIR)
RECORD_FILE = runfiles.IMAGE_RECORD_FILE
FREEZE_FILE = "pip-freeze.txt"
# Free space for checkpoints on the simulated cluster, whose stand-in saves are tiny; a real site's figure is each
# recipe's kept saves (doctor/storage.py check_recipes_space, from checks/storage.py).
MIN_FREE_GB_SIM = 1.0

# Manifest key -> distribution name. Only the packages that the simulated runtime also carries are checked
# strictly there; the rest exist only in the NPU image.
DIST_NAMES = {
    "torch": "torch",
    "torchvision": "torchvision",
    "torch_npu": "torch-npu",
    "triton_ascend": "triton-ascend",
    "ray": "ray",
    "transfer_queue": "TransferQueue",
    "flash_linear_attention": "flash-linear-attention",
    "hydra_core": "hydra-core",
    "omegaconf": "omegaconf",
    "pyyaml": "PyYAML",
    "megatron_core": "megatron-core",
}
SIM_STRICT = ("ray", "hydra_core", "omegaconf", "pyyaml")
# git_sources entries installed as distributions (with their release version) in the NPU image.
GIT_DISTS = {"verl": "verl", "vllm": "vllm", "vllm_ascend": "vllm-ascend"}
NIC_VARS = ("HCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME")
PATH_VARS = ("SHARED_ROOT", "MODEL_PATH", "TRAIN_FILES", "VAL_FILES")
# The driver's control nodes a3-tools T11 lists beside the dies /dev/davinci0..15.
CONTROL_NODES = ("davinci_manager", "devmm_svm", "hisi_hdc")
_DIE_NODE = re.compile(r"^davinci(\d+)$")


@dataclass
class Finding:
    name: str
    status: str  # ok | warn | fail | expected
    detail: str
    fix: str = ""


class UsageError(Exception):
    pass
