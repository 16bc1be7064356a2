"""Section 5, rebuild: a full no-cache build of the simulated image, then the recipe layer after a one-line change,
in a `git archive HEAD` copy under the bench's own image tags."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

from bench.benchlib import Figure, build_steps, layers_rebuilt, ratio
from bench.common import timed
from simkit.paths import REPO, VENV_BIN
from simkit.procs import checked, run


def rebuild_section(run_id: str) -> list[Figure]:
    venv = VENV_BIN.parent
    stamp = venv / ".stamp"
    tag = f"bench{os.getpid()}"
    runtime, recipe = f"{tag}-runtime:sim", f"{tag}-recipe:sim"
    work = Path(tempfile.mkdtemp(prefix="bench-src-"))
    try:
        # A copy of the commit: the shared working tree is never touched.
        checked(run(["bash", "-c", f"git archive HEAD | tar -x -C {shlex.quote(str(work))}"], cwd=REPO), "copy")
        base = [
            "make",
            "--no-print-directory",
            "-C",
            str(work),
            "-o",
            str(stamp),
            f"VENV={venv}",
            f"IMAGE_BUILD_DIR={work}/build/image",
        ]
        # The copy's files carry the commit's time: make must not think the shared .venv is out of date.
        checked(
            run(["bash", "-c", f"cd {shlex.quote(str(work))} && touch -d 2000-01-01 pyproject.toml requirements/*"]),
            "touch",
        )

        def full_build() -> subprocess.CompletedProcess[str]:
            rt = run([*base, "image-runtime-sim", f"SIM_RUNTIME_IMAGE={runtime}", "DOCKER_BUILD_EXTRA=--no-cache"])
            if rt.returncode != 0:
                return rt
            rc = run([*base, "image-recipe", f"RUNTIME_IMAGE={runtime}", f"RECIPE_IMAGE={recipe}"])
            return subprocess.CompletedProcess(rc.args, rc.returncode, rt.stdout + rc.stdout, rt.stderr + rc.stderr)

        full_s, full = timed(full_build)
        checked(full, "full no-cache build")
        init = work / "entrypoints" / "verl_recipe" / "__init__.py"
        init.write_text(init.read_text() + "# bench: a one-line change\n")
        reb_s, reb = timed(
            lambda: run([*base, "image-recipe", f"RUNTIME_IMAGE={runtime}", f"RECIPE_IMAGE={recipe}"], timeout=3600)
        )
        checked(reb, "recipe-layer rebuild")
    finally:
        run(["docker", "rmi", recipe, runtime])
        run(["rm", "-rf", str(work)])
    steps, cached = build_steps(reb.stdout)
    lines = re.findall(r"^Step \d+/\d+ : (.*)$", reb.stdout, re.M)
    first_change = next((i for i, s in enumerate(lines) if "entrypoints" in s), len(lines))
    ideal = len(lines) - first_change
    full_steps, _ = build_steps(full.stdout)
    detail = {
        "full_s": round(full_s, 1),
        "rebuild_s": round(reb_s, 1),
        "rebuild_steps": steps,
        "rebuild_cached": cached,
        "full_steps": full_steps,
        "rebuild_log": [
            ln[:100] for ln in reb.stdout.splitlines() if re.match(r"^(Step \d| ---> (Using|Running))", ln)
        ],
    }
    return [
        Figure(
            "5",
            "recipe-layer rebuild / full no-cache build of the simulated image",
            ratio(reb_s, full_s, 3),
            "small (only the recipe layer reruns)",
            "after a one-line change in entrypoints/verl_recipe/__init__.py (in a `git archive HEAD` copy): "
            "wall time of `make image-recipe` / of `make image-sim DOCKER_BUILD_EXTRA=--no-cache` (runtime + "
            "recipe layer, torch from the local wheel cache when present), same run, own image tags",
            run_id,
            detail,
        ),
        Figure(
            "5",
            f"layers rebuilt after the change (of {steps} steps)",
            layers_rebuilt(reb.stdout),
            f"{ideal} (the steps from `COPY entrypoints/` on)",
            "steps of the classic builder's output without ` ---> Using cache`",
            run_id,
        ),
    ]
