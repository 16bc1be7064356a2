"""More general rules read from documented error classes (taxonomy.py's docstring says how rules are chosen).

- torch.utils.data's DataLoader worker errors: a worker killed by SIGBUS is out of shared memory (/dev/shm, host RAM);
  NumPy's and torch's CPU allocator errors ("Unable to allocate", "DefaultCPUAllocator").
- safetensors' SafetensorError and torch.load's zip reader (PytorchStreamReader): a weights or checkpoint file that is
  not a whole file of its format (a partial copy, a Git LFS pointer).
- Apache Arrow's exception classes (pyarrow.lib.ArrowInvalid, "Parquet magic bytes not found"), Hugging Face datasets'
  and pandas' missing-column errors, torch's "Caught X in DataLoader worker process N": the data set.
- The dynamic loader's errors (ld.so: "cannot open shared object file", "cannot allocate memory in static TLS block",
  "version `GLIBCXX_...' not found") and Transformers' and vLLM's unknown model type or architecture: the image.
- aclError's 5000XX class (CANN "aclError": ACL_ERROR_INTERNAL_ERROR 500000, ACL_ERROR_FAILURE 500001 ... 500005)
  returned by a call that sets up ACL or the device (aclInit, aclrtSetDevice, torch_npu's AclSetCompileopt): the
  runtime under torch_npu does not work with it (a CANN, driver or firmware of another release), the image.
"""

from __future__ import annotations

from .families import MEDIUM, Rule

TORCH_DATA = "torch.utils.data's DataLoader worker errors"

MORE_RULES: tuple[Rule, ...] = (
    Rule(
        "host-shm-exhausted",
        "host-memory",
        MEDIUM,
        "the host ran out of shared or process memory",
        TORCH_DATA + " (SIGBUS: shared memory); NumPy's and torch's CPU allocator errors",
        (
            # SIGBUS only: SIGKILL ("Killed") is also how a finished job's data loader workers end, every healthy run
            r"DataLoader worker \(pid[^)\n]{0,80}\) is killed by signal: Bus error",
            r"insufficient shared memory \(shm\)",
            r"out of shared memory",
            r"Unable to allocate [\d.]{1,20} [KMGTP]?i?B for an array",
            r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)",
        ),
        ("is killed by signal", "shared memory", "unable to allocate", "defaultcpuallocator"),
        "a process could not get host memory: the container's /dev/shm is too small for the data loader's workers, "
        "or the node's RAM is full",
        fix="give the container more shared memory (`--shm-size`, or mount a larger /dev/shm), use fewer data "
        "loader workers, and check `free -g` on that host",
    ),
    Rule(
        "weights-file-unreadable",
        "checkpoint",
        MEDIUM,
        "a weights or checkpoint file could not be parsed",
        "safetensors' SafetensorError and torch.load's zip reader errors",
        (
            r"\bSafetensorError\b",
            r"Error while deserializing header",
            r"PytorchStreamReader failed reading",
            r"\bUnpicklingError\b",
            r"Weights only load failed",
        ),
        ("safetensorerror", "deserializing header", "pytorchstreamreader failed", "unpicklingerror", "weights only"),
        "a checkpoint or weights file is not a whole file of its format: a partial download or copy, a Git LFS "
        "pointer instead of the file, or another format than the loader expects",
        fix="check the file's size against its source (`ls -l`, `git lfs pull`), copy or download it again; "
        "point the load at a complete checkpoint",
    ),
    Rule(
        "dataset-format",
        "data",
        MEDIUM,
        "a data file could not be read or lacks a column",
        "Apache Arrow's exception classes, Hugging Face datasets' and pandas' column errors, " + TORCH_DATA,
        (
            r"\bArrow(?:Invalid|TypeError|CapacityError|NotImplementedError)\b",
            r"Parquet magic bytes not found",
            r"Could not open Parquet input source",
            r"Column [^\n]{1,200} not in the dataset",
            r"None of \[Index\([^\n]{0,300}\)\] are in the \[columns\]",
            r"Caught \w{1,80} in DataLoader worker process \d{1,6}",
        ),
        ("arrow", "parquet", "not in the dataset", "are in the [columns]", "in dataloader worker process"),
        "a data file is not valid parquet/arrow (broken, a Git LFS pointer, another format), or its rows lack a "
        "column the loader reads (data.prompt_key)",
        fix="open the data files by hand (`python -c 'import pandas; print(pandas.read_parquet(F).columns)'`); "
        "regenerate or download them again and match data.prompt_key to a column; `verl-recipe validate`",
    ),
    Rule(
        "image-loader-model-type",
        "image-version",
        MEDIUM,
        "a library or model type this image does not have",
        "the dynamic loader's errors (ld.so) and Transformers' and vLLM's unknown model types",
        (
            r"\.so[\w.]{0,20}: cannot open shared object file",
            r"cannot allocate memory in static TLS block",
            r"version `[^'\n]{1,60}' not found",
            r"Transformers does not recognize this architecture",
            r"your version of Transformers is out of date",
            r"Model architectures? \[[^\]\n]{1,300}\] (?:is|are) not supported",
        ),
        (
            "cannot open shared object file",
            "static tls block",
            "not found",
            "does not recognize this architecture",
            "transformers is out of date",
            "not supported",
        ),
        "the image lacks a shared library, holds one of another version, or its Transformers or vLLM is older "
        "than the model",
        fix="run the pinned image (docker/versions.yaml) unchanged and a model its vLLM and Transformers support; "
        "`verl-recipe doctor` in it lists packages that differ from the pins",
    ),
    Rule(
        "acl-setup-internal",
        "image-version",
        MEDIUM,
        "ACL or the device could not be set up (an internal ACL error)",
        "CANN's aclError 5000XX class on ACL's and the device's set-up calls",
        (
            r"NPU function error: [^\n]{0,200}?\b(?:AclSetCompileopt|aclInit|aclrtSetDevice|SetDevice|"
            r"aclrtGetDeviceCount)\b[^\n]{0,300}?error code is 50000[0-5]\b",
            r"\baclInit failed[^\n]{0,80}\b50000[0-5]\b",
        ),
        ("npu function error", "aclinit failed"),
        "the first ACL call of the process failed inside CANN: the toolkit, driver or firmware is of another release "
        "than torch_npu was built for, or the toolkit's environment is not set",
        fix="run the pinned image (docker/versions.yaml) on a host whose driver and firmware match it "
        "(`npu-smi info` prints their versions); `verl-recipe doctor` in the container",
    ),
)
