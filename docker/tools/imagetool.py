#!/usr/bin/env python3
"""Image build helper: turns docker/versions.yaml into build arguments and lock inputs.

Every version a Dockerfile or a lock input needs is read here from the manifest, so nothing repeats a pin by hand.
Subcommands (all print to stdout or write the file named by -o):
  build-args TARGET [--soc a3|a2] [--set NAME=VALUE ...]   one `--build-arg NAME=VALUE` per line, then the
                                                           `--label KEY=VALUE` lines of BUILD_LABELS
  lock-input {npu,npu-ascend,sim,sim-verl,dev-verl}        the declared input of a lock file
  image-tag {npu-runtime,npu}                              the tag the NPU images get
  label-check IMAGE                                        fail when an image lacks an OCI label
  get KEY                                                  one manifest value (dotted key)
  sim-context DIR [--find-links D] [--ca-bundle F]         assemble the sim runtime's build context
Stdlib + PyYAML only; Python 3.11.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "docker" / "versions.yaml"
SIM_PINS = ROOT / "docker" / "sim-runtime" / "sim-pins.yaml"
# The shape of the CANN base that only the rehearsal's stand-in needs (docker/npu-standin).
STANDIN = ROOT / "docker" / "npu-standin" / "standin.yaml"
NPU_TEMPLATE = ROOT / "docker" / "lock" / "npu.in.tmpl"
# The requirement sets of what the NPU image builds from git (at the pinned commits) and of CANN itself.
UPSTREAM_REQS = ROOT / "docker" / "lock" / "upstream"
# Distributions the NPU image builds from the git sources: never resolved from an index, never emitted in a lock.
GIT_BUILT = ("verl", "vllm", "vllm-ascend", "megatron-core", "mindspeed", "megatron-bridge", "transformers")
# Distributions only Ascend's own index serves: they go to docker/lock/npu-ascend.in, not the main lock.
ASCEND_INDEX_ONLY = ("triton-ascend",)
# sim-host: the simulated A3 host (docker/sim-host/build.sh, `make sim-image`), which takes only its labels' values.
TARGETS = ("sim-runtime", "npu", "npu-standin", "recipe", "sim-host")
# The OCI labels that say where and when an image comes from, the same for every image: the build sets them
# (`docker build --label`, the lines `build-args` prints after the build arguments) from the build argument
# named here, so no Dockerfile spells them; each Dockerfile labels only what is its own (title, description,
# version, io.verl-recipe.*). The classic builder and BuildKit both put --label on the final image as LABEL would.
BUILD_LABELS = {
    "org.opencontainers.image.source": "VCS_SOURCE",
    "org.opencontainers.image.revision": "VCS_REF",
    "org.opencontainers.image.created": "IMAGE_CREATED",
}
# The labels every image of this project carries (tests/image checks them on the built images).
OCI_LABELS = (*BUILD_LABELS, "org.opencontainers.image.version", "org.opencontainers.image.title")


class UsageError(Exception):
    """Bad input: the message names the value and the fix."""


def load_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise UsageError(f"{path} is missing: restore it from git")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise UsageError(f"{path} is not a YAML mapping: restore it from git")
    return data


def manifest(path: Path = MANIFEST) -> dict[str, Any]:
    data = load_yaml(path)
    if data.get("schema") != 1:
        raise UsageError(f"{path}: schema is {data.get('schema')!r}, expected 1: this tool reads schema-1 manifests")
    return data


def manifest_sha256(path: Path = MANIFEST) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def git(*args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.stdout.strip()


# The inputs of each image: its SOURCE_DATE_EPOCH is the time of the last commit touching them, so a commit
# elsewhere in the repository does not invalidate the heavy runtime layers.
EPOCH_PATHS = {
    "sim-runtime": (
        "docker/sim-runtime/Dockerfile",
        "docker/sim-runtime/requirements.lock",
        "docker/sim-runtime/requirements-pypi.lock",
        "docker/sim-runtime/verl.lock",
        "docker/versions.yaml",
    ),
    "npu": (
        "docker/npu",  # the Dockerfile and its build helpers
        "docker/lock",  # the locks, overrides, accepted conflicts
        "docker/versions.yaml",
        "docker/sources.lock",
    ),  # fmt: skip
    "npu-standin": ("docker/npu-standin", "docker/versions.yaml"),
    "recipe": (),
    "sim-host": ("docker/sim-host",),
}


def source_date_epoch(target: str = "recipe") -> int:
    """SOURCE_DATE_EPOCH from the environment, else the last commit time of the target's inputs."""
    env = os.environ.get("SOURCE_DATE_EPOCH", "")
    if env:
        if not env.isdigit():
            raise UsageError(f"SOURCE_DATE_EPOCH={env!r} is not a whole number of seconds: unset it or fix it")
        return int(env)
    paths = EPOCH_PATHS.get(target, ())
    stamp = git("log", "-1", "--format=%ct", *(["--", *paths] if paths else []))
    return int(stamp) if stamp.isdigit() else 0


def rfc3339(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def vcs_source() -> str:
    return os.environ.get("VERL_RECIPE_SOURCE_URL") or git("remote", "get-url", "origin") or "local"


def package_version(m: dict[str, Any], key: str) -> str:
    try:
        value = m["python_packages"][key]
    except KeyError:
        raise UsageError(f"python_packages.{key} is missing in {MANIFEST}: add the pin there") from None
    return str(value)


def sim_pins() -> dict[str, Any]:
    return load_yaml(SIM_PINS)


def vcs_args(epoch: int) -> dict[str, str]:
    """Where and when the image comes from: the values of BUILD_LABELS (the recipe layer also records two)."""
    return {
        "IMAGE_CREATED": rfc3339(epoch),
        "VCS_REF": git("rev-parse", "HEAD") or "unknown",
        "VCS_SOURCE": vcs_source(),
    }


def common_args(m: dict[str, Any], target: str) -> dict[str, str]:
    epoch = source_date_epoch(target)
    return {
        "SOURCE_DATE_EPOCH": str(epoch),
        **vcs_args(epoch),
        "MANIFEST_SHA256": manifest_sha256(),
        "PYTHON_VERSION": str(m["base"]["python"]),
    }


def soc_args(m: dict[str, Any], soc: str) -> dict[str, str]:
    socs = m.get("soc", {})
    if soc not in socs:
        raise UsageError(f"SOC={soc!r} is not in the manifest's soc table {sorted(socs)}: use one of those")
    cann = m["base"]["cann"]
    suffix = "" if soc == "a3" else f"_{soc}"
    tag = cann.get(f"tag{suffix}")
    if not tag:
        raise UsageError(f"base.cann.tag{suffix} is missing in {MANIFEST}: add the CANN tag for {soc}")
    digest = str(cann.get(f"digest{suffix}") or "")
    ref = f"{cann['image']}:{tag}" + (f"@{digest}" if digest else "")
    return {
        "SOC": soc,
        "SOC_VERSION": str(socs[soc]),
        "CANN_VERSION": str(cann["version"]),
        "CANN_IMAGE": ref,
        "CANN_DIGEST": digest,
        "NPU_DIES_PER_NODE": str(m["host"]["dies_per_node"][soc]),
    }


def build_args(target: str, soc: str, overrides: dict[str, str]) -> dict[str, str]:
    m = manifest()
    # The simulated host takes no pin and no SOURCE_DATE_EPOCH: exactly what docker/sim-host/build.sh passed.
    args = common_args(m, target) if target != "sim-host" else {}
    pk = m["python_packages"]
    if target == "sim-runtime":
        args |= {
            "BASE_IMAGE": f"verl-recipe-base:{m['base']['debian_suite']}",
            "RAY_VERSION": package_version(m, "ray"),
            "TORCH_VERSION": str(sim_pins()["torch_cpu"]),
            "HYDRA_CORE_VERSION": package_version(m, "hydra_core"),
            "OMEGACONF_VERSION": package_version(m, "omegaconf"),
            "PYYAML_VERSION": package_version(m, "pyyaml"),
            "VERL_VERSION": str(m["git_sources"]["verl"]["version"]),
        }
    elif target == "npu":
        args |= soc_args(m, soc)
        args |= {
            "TORCH_VERSION": str(pk["torch"]),
            "TORCH_NPU_VERSION": str(pk["torch_npu"]),
            "RAY_VERSION": str(pk["ray"]),
            "VERL_VERSION": str(m["git_sources"]["verl"]["version"]),
            "VLLM_VERSION": str(m["git_sources"]["vllm"]["version"]),
            "VLLM_ASCEND_VERSION": str(m["git_sources"]["vllm_ascend"]["version"]),
            "MEGATRON_VERSION": str(m["git_sources"]["megatron_lm"]["version"]),
            # Empty for a real build; `make image-npu-rehearsal` sets "standin" (docker/npu/Dockerfile says what
            # that leaves out).
            "REHEARSAL": "",
        }
    elif target == "npu-standin":
        cann = m["base"]["cann"]
        args |= {
            "BASE_IMAGE": f"verl-recipe-base:{m['base']['debian_suite']}",
            "CANN_VERSION": str(cann["version"]),
            "CANN_TAG": str(cann["tag"]),
            "PYTHON_PREFIX": str(load_yaml(STANDIN)["python_prefix"]),
        }
    elif target == "recipe":
        args |= {"RECIPE_VERSION": recipe_version()}
    elif target == "sim-host":
        args |= {
            "BASE_IMAGE": f"verl-recipe-base:{m['base']['debian_suite']}",
            # Its version label: the tree of docker/sim-host at HEAD (the same tree, the same host).
            "SIM_HOST_TREE": git("rev-parse", "--short=12", "HEAD:docker/sim-host") or "unknown",
            **vcs_args(source_date_epoch(target)),
        }
    else:
        raise UsageError(f"build target {target!r} is unknown: use one of {', '.join(TARGETS)}")
    for key, value in overrides.items():
        if key not in args and key not in OPTIONAL_ARGS:
            raise UsageError(f"--set {key}: not a build argument of {target}: use one of {sorted(args)}")
        args[key] = value
    return args


# Arguments a caller may add that have no manifest value: mirrors (never baked into a layer: see docs/image.md).
OPTIONAL_ARGS = ("RUNTIME_IMAGE", "PIP_INDEX_URL", "ASCEND_INDEX_URL")


def build_labels(args: dict[str, str]) -> dict[str, str]:
    """BUILD_LABELS with their values, taken from the build arguments (so they agree with what a layer records)."""
    return {key: args[name] for key, name in BUILD_LABELS.items()}


def build_flags(args: dict[str, str]) -> list[str]:
    """`docker build` flags, one per line: every build argument, then the labels of BUILD_LABELS."""
    pairs = [("--build-arg", key, value) for key, value in args.items()]
    pairs += [("--label", key, value) for key, value in build_labels(args).items()]
    # Values never contain whitespace (checked here, since make splits the lines on whitespace).
    for _, key, value in pairs:
        if any(c.isspace() for c in value):
            raise UsageError(f"build argument {key}={value!r} contains whitespace: fix the manifest")
    return [f"{flag} {key}={value}" for flag, key, value in pairs]


def recipe_version() -> str:
    pyproject = (ROOT / "pyproject.toml").read_text()
    for line in pyproject.splitlines():
        if line.startswith("version = "):
            return line.split("=", 1)[1].strip().strip('"')
    raise UsageError("pyproject.toml has no `version = ...` line in [project]: add it")


def image_tag(kind: str, soc: str) -> str:
    m = manifest()
    if soc not in m.get("soc", {}):
        raise UsageError(f"SOC={soc!r} is not in the manifest's soc table {sorted(m.get('soc', {}))}: use one of those")
    suffix = "" if soc == "a3" else f"-{soc}"
    if kind == "npu-runtime":
        return f"verl-recipe-runtime:npu-{manifest_sha256()[:12]}{suffix}"
    if kind == "npu":
        return f"verl-recipe:npu-{recipe_version()}{suffix}"
    raise UsageError(f"image kind {kind!r} is unknown: use npu-runtime or npu")


def lock_input(kind: str) -> str:
    m = manifest()
    pk = m["python_packages"]
    head = (
        f"# Generated by `python docker/tools/imagetool.py lock-input {kind}` from docker/versions.yaml "
        f"(sha256 {manifest_sha256()[:12]}).\n"
        "# Do not edit: change docker/versions.yaml (or docker/lock/npu.in.tmpl) and run the lock target.\n"
    )
    if kind in ("sim", "dev-verl"):
        # dev-verl: what the development venv (requirements/dev.in includes it) adds so that verl imports there.
        sim = sim_pins()
        lines = [
            # verl declares ray[default]; its reward loop imports aiohttp, which only the extra brings.
            f"ray[default]=={pk['ray']}",
            f"torch=={sim['torch_cpu']}",
            f"hydra-core=={pk['hydra_core']}",
            f"omegaconf=={pk['omegaconf']}",
            f"PyYAML=={pk['pyyaml']}",
        ]
        if kind == "sim":
            # The recipe layer builds the verl_recipe wheel offline with the runtime's own setuptools.
            lines.append(f"setuptools=={sim['setuptools']}")
        lines += verl_import_requirements(sim)
        return head + "\n".join(lines) + "\n"
    if kind == "sim-verl":
        return head + f"verl=={m['git_sources']['verl']['version']}\n"
    if kind == "npu":
        template = NPU_TEMPLATE.read_text()
        try:
            body = template.format(**{k: str(v) for k, v in pk.items()})
        except KeyError as exc:
            raise UsageError(f"{NPU_TEMPLATE} names {exc}, missing in python_packages: add it") from None
        return head + body + upstream_requirements()
    if kind == "npu-ascend":
        return head + f"triton-ascend=={pk['triton_ascend']}\n"
    raise UsageError(f"lock input {kind!r} is unknown: use npu, npu-ascend, sim, sim-verl or dev-verl")


def verl_declared_requires() -> dict[str, list[str]]:
    """verl's declared requirements (docker/lock/upstream/verl.txt: setup.py install_requires and
    requirements-npu.txt, both of which the NPU image installs), every line per normalized name."""
    reqs: dict[str, list[str]] = {}
    text = (UPSTREAM_REQS / "verl.txt").read_text()
    for raw in text.split("\n# imported by verl", 1)[0].splitlines():  # the rest is undeclared
        line = raw.strip()
        if line and not line.startswith("#"):
            lines = reqs.setdefault(requirement_name(line), [])
            if line not in lines:
                lines.append(line)
    return reqs


def verl_import_requirements(sim: dict[str, Any]) -> list[str]:
    """What verl 0.8.0 (installed --no-deps) imports for its config path, with verl's own specifiers."""
    declared = verl_declared_requires()
    lines: list[str] = []
    for name in sim.get("verl_import_requires", []):
        key = requirement_name(str(name))
        if key not in declared:
            raise UsageError(
                f"sim-pins.yaml verl_import_requires names {name!r}, which verl does not declare "
                "(docker/lock/upstream/verl.txt): list it under verl_import_undeclared instead"
            )
        if key == "transformers":  # verl leaves it open; the simulated runtime pins the NPU image's release
            lines.append(f"transformers=={sim['transformers']}")
        else:
            lines += declared[key]
    lines += [str(name) for name in sim.get("verl_import_undeclared", [])]
    return lines


def requirement_name(line: str) -> str:
    """The normalized distribution name of a requirement line (PEP 503)."""
    name = re.split(r"[\s\[<>=!~;@(]", line.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def upstream_requirements() -> str:
    """Every docker/lock/upstream/*.txt as one section of npu.in; requirements on a git-built or Ascend-index-only
    package stay visible as comments (the build installs those another way)."""
    files = sorted(UPSTREAM_REQS.glob("*.txt"))
    if not files:
        raise UsageError(f"{UPSTREAM_REQS} has no *.txt: restore it from git")
    out = []
    for f in files:
        out.append(f"# ---- docker/lock/upstream/{f.name}")
        for raw in f.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name = requirement_name(line)
            if name in GIT_BUILT:
                out.append(f"# built from git, not resolved here: {line}")
            elif name in ASCEND_INDEX_ONLY:
                out.append(f"# Ascend index, see npu-ascend.in: {line}")
            else:
                out.append(line)
    return "\n".join(out) + "\n"


def label_check(image: str) -> int:
    out = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise UsageError(f"image {image} not found: build it first ({out.stderr.strip()})")
    labels = json.loads(out.stdout) or {}
    missing = [k for k in OCI_LABELS if not labels.get(k)]
    if missing:
        print(
            f"{image}: missing OCI labels {missing}: the Dockerfile sets version and title, the build passes "
            "`imagetool build-args` (its --label lines) for the others",
            file=sys.stderr,
        )
        return 1
    print(f"{image}: OCI labels present")
    return 0


def lock_hashes(lock: Path, name: str) -> tuple[str, set[str]]:
    """The pinned version and the sha256 hashes of one package in a uv/pip hashed lock file."""
    version, hashes, current = "", set(), False
    for line in lock.read_text().splitlines():
        stripped = line.strip()
        if line and not line[0].isspace() and not line.startswith("#"):
            pkg, _, rest = stripped.partition("==")
            current = pkg.split("[")[0].lower() == name
            if current:
                version = rest.split()[0].rstrip("\\").strip()
        elif current and stripped.startswith("--hash=sha256:"):
            hashes.add(stripped.removeprefix("--hash=sha256:").rstrip("\\").strip())
    return version, hashes


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def locked_hashes(lock: Path) -> set[str]:
    return {
        line.strip().removeprefix("--hash=sha256:").rstrip("\\").strip()
        for line in lock.read_text().splitlines()
        if line.strip().startswith("--hash=sha256:")
    }


def link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def locked_files(lock: Path) -> dict[str, set[str]]:
    """Package name -> its allowed sha256 hashes, for every entry of a hashed lock."""
    out: dict[str, set[str]] = {}
    for line in lock.read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            name = line.split("==")[0].split("[")[0].lower()
            out[name] = lock_hashes(lock, name)[1]
    return out


def add_wheelhouse(dest: Path, wheelhouse: Path, locks: list[Path]) -> None:
    """Offline builds: copy every locked file of the wheelhouse into the context; fail naming what is missing."""
    if not wheelhouse.is_dir():
        raise UsageError(f"SIM_WHEELHOUSE={wheelhouse} is not a folder: fill it with `make wheels-sim`")
    wanted: dict[str, set[str]] = {}
    for lock in locks:
        wanted |= locked_files(lock)
    allowed = set().union(*wanted.values())
    present = {sha256_file(f) for f in (dest / "wheels").iterdir()}
    copied = 0
    for f in sorted(wheelhouse.iterdir()):
        if f.is_file() and f.name.endswith((".whl", ".tar.gz", ".zip")) and not (dest / "wheels" / f.name).exists():
            digest = sha256_file(f)
            if digest in allowed:
                link_or_copy(f, dest / "wheels" / f.name)
                present.add(digest)
                copied += 1
    missing = sorted(name for name, hashes in wanted.items() if not hashes & present)
    if missing:
        raise UsageError(
            f"SIM_WHEELHOUSE={wheelhouse} lacks the locked files of {', '.join(missing[:10])}: "
            "fill it with `make wheels-sim` on a host that reaches PyPI"
        )
    print(f"sim-context: offline build, {copied} files from {wheelhouse}")


def sim_context(dest: Path, find_links: list[Path], ca_bundle: Path, wheelhouse: Path | None = None) -> int:
    """Assemble the sim runtime's build context: locks, CA bundle, and the local CPU torch wheel when present.

    The CPU lock pins a local `+cpu` torch wheel by hash. Where no find-links folder holds that exact file, the
    PyPI lock is used instead: PyPI's x86_64 torch is the CUDA build and pulls several GB of nvidia-* wheels.
    """
    src = ROOT / "docker" / "sim-runtime"
    if not ca_bundle.is_file():
        raise UsageError(f"CA bundle {ca_bundle} not found: pass PIP_CA_BUNDLE=<path to a PEM bundle>")
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "wheels").mkdir(parents=True)
    shutil.copyfile(ca_bundle, dest / "ca.crt")
    shutil.copyfile(src / "verl.lock", dest / "verl.lock")
    # The CPU stand-ins (verl_sim_standin): only this image's context ever holds them.
    shutil.copytree(src / "standin", dest / "standin", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    cpu_lock = src / "requirements.lock"
    version, hashes = lock_hashes(cpu_lock, "torch")
    if not version or not hashes:
        raise UsageError(f"{cpu_lock} pins no hashed torch: run `make lock-sim`")
    candidates = [p for d in find_links if d.is_dir() for p in sorted(d.glob("torch-*.whl"))]
    for wheel in candidates:
        if sha256_file(wheel) in hashes:
            link_or_copy(wheel, dest / "wheels" / wheel.name)
            shutil.copyfile(cpu_lock, dest / "requirements.lock")
            print(f"sim-context: torch {version} from {wheel}")
            if wheelhouse is not None:
                add_wheelhouse(dest, wheelhouse, [dest / "requirements.lock", dest / "verl.lock"])
            return 0
    shutil.copyfile(src / "requirements-pypi.lock", dest / "requirements.lock")
    where = ", ".join(str(d) for d in find_links) or "(none given)"
    print(
        f"sim-context: WARNING: no torch {version} wheel with the locked hash in {where}; using PyPI's torch "
        "(CUDA build: several GB of nvidia-* wheels, a much larger and slower image)",
        file=sys.stderr,
    )
    if wheelhouse is not None:
        add_wheelhouse(dest, wheelhouse, [dest / "requirements.lock", dest / "verl.lock"])
    return 0


def get_key(dotted: str) -> str:
    node: Any = manifest()
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise UsageError(f"{dotted!r} is not in {MANIFEST}: check the key against the file")
        node = node[part]
    if isinstance(node, dict | list):
        raise UsageError(f"{dotted!r} is a {type(node).__name__}, not a value: name a leaf key")
    return str(node)


def parse_overrides(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set {item!r}: expected NAME=VALUE")
        out[key] = value
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="imagetool", description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build-args")
    b.add_argument("target")
    b.add_argument("--soc", default="a3")
    b.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    b.add_argument("--format", choices=("flags", "json"), default="flags")
    li = sub.add_parser("lock-input")
    li.add_argument("kind")
    li.add_argument("-o", "--output")
    t = sub.add_parser("image-tag")
    t.add_argument("kind")
    t.add_argument("--soc", default="a3")
    lc = sub.add_parser("label-check")
    lc.add_argument("image")
    g = sub.add_parser("get")
    g.add_argument("key", help="dotted path into the manifest, e.g. base.debian_suite")
    sc = sub.add_parser("sim-context")
    sc.add_argument("dest")
    sc.add_argument("--find-links", action="append", default=[])
    sc.add_argument("--ca-bundle", default="/etc/ssl/certs/ca-certificates.crt")
    sc.add_argument("--wheelhouse", default="", help="offline: a folder holding every locked file")
    a = p.parse_args(argv)
    try:
        if a.cmd == "build-args":
            args = build_args(a.target, a.soc, parse_overrides(a.set))
            if a.format == "json":
                print(json.dumps(args, indent=2, sort_keys=True))
            else:
                print("\n".join(build_flags(args)))
        elif a.cmd == "lock-input":
            text = lock_input(a.kind)
            if a.output:
                Path(a.output).write_text(text)
            else:
                sys.stdout.write(text)
        elif a.cmd == "image-tag":
            print(image_tag(a.kind, a.soc))
        elif a.cmd == "label-check":
            return label_check(a.image)
        elif a.cmd == "get":
            print(get_key(a.key))
        elif a.cmd == "sim-context":
            links = [Path(x) for x in a.find_links if x]
            return sim_context(Path(a.dest), links, Path(a.ca_bundle), Path(a.wheelhouse) if a.wheelhouse else None)
    except UsageError as exc:
        print(f"imagetool: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
