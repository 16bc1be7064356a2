"""The recipe image the simulated hosts load, as a tarball a site would copy to its control node."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

from simkit.paths import SIM_IMAGE
from simkit.procs import checked, make


def save_sim_image(dest: Path) -> str:
    """`docker save` of the sim image (built first when this machine has none) to `dest`; returns its image ID."""
    if subprocess.run(["docker", "image", "inspect", SIM_IMAGE], capture_output=True, check=False).returncode != 0:
        checked(make("image-sim"), "make image-sim")
    subprocess.run(["docker", "save", SIM_IMAGE, "-o", str(dest)], check=True, capture_output=True)
    with tarfile.open(dest) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        config = json.load(member)[0]["Config"]
    return "sha256:" + Path(config).name.removesuffix(".json")
