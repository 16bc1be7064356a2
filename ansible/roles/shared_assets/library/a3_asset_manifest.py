#!/usr/bin/python
"""Manifest of files under the shared asset paths: relative path, size, and sha256 of small files."""

# ruff: noqa: E402  # Ansible modules put DOCUMENTATION before the imports
from __future__ import annotations

DOCUMENTATION = r"""
module: a3_asset_manifest
short_description: Read-only manifest (file list, sizes, small-file hashes) of shared asset folders
description:
  - Lists every file under each path with its size; files up to O(hash_max_bytes) are also hashed (configs,
    tokenizer, index files), large weight shards are compared by size. Returns one sha256 over the manifest per path.
options:
  paths: {type: list, elements: str, required: true, description: Folders or files to describe.}
  hash_max_bytes: {type: int, default: 16777216, description: Files up to this size are hashed.}
author: verl-recipe
"""

EXAMPLES = r"""
- name: Manifest of the model and data on shared storage
  a3_asset_manifest:
    paths: [/mnt/shared/models/Qwen3.5-397B-A17B, /mnt/shared/data/gsm8k]
  register: asset_manifest
"""

RETURN = r"""
manifests:
  description: One entry per path, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    path: {description: The path described., type: str}
    present: {description: Whether it exists., type: bool}
    files: {description: Number of files., type: int}
    bytes: {description: Their total size., type: int}
    sha256: {description: sha256 over the manifest lines (empty when absent)., type: str}
    lines:
      description: "relative path, size and sha256 (or - above hash_max_bytes), tab-separated, sorted."
      type: list
"""

import hashlib
import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest(path: str, hash_max: int) -> dict[str, Any]:
    """Lines `relpath<TAB>size<TAB>sha256-or-dash`, sorted, plus their sha256."""
    if not os.path.exists(path):
        return {"path": path, "present": False, "files": 0, "bytes": 0, "sha256": "", "lines": []}
    entries = []
    walk: list[tuple[str, list[str], list[str]]]
    if os.path.isfile(path):
        walk = [(os.path.dirname(path), [], [os.path.basename(path)])]
        base = os.path.dirname(path)
    else:
        walk = list(os.walk(path))
        base = path
    for root, dirs, files in walk:
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            if not os.path.isfile(full):
                continue
            size = os.path.getsize(full)
            digest = file_sha256(full) if size <= hash_max else "-"
            entries.append(f"{os.path.relpath(full, base)}\t{size}\t{digest}")
    entries.sort()
    total = sum(int(e.split("\t")[1]) for e in entries)
    digest = hashlib.sha256("\n".join(entries).encode()).hexdigest()
    return {"path": path, "present": True, "files": len(entries), "bytes": total, "sha256": digest, "lines": entries}


# Must agree with DOCUMENTATION (tests/ansible/test_module_docs.py).
ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "paths": {"type": "list", "elements": "str", "required": True},
    "hash_max_bytes": {"type": "int", "default": 16 * 2**20},
}


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    out = [manifest(p, module.params["hash_max_bytes"]) for p in module.params["paths"]]
    module.exit_json(changed=False, manifests=out)


if __name__ == "__main__":
    main()
