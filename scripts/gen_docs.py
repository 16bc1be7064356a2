#!/usr/bin/env python3
"""Regenerate the generated parts of docs/ and the compose files from their sources: recipes, the settings
vocabulary, the versions manifest, the health rules, the diagnosis's general rules, the inventory fields, the
simulated faults. Each part sits between `<!-- BEGIN generated:KEY -->` and `<!-- END ... -->` (in YAML, between
comment lines).

`--check` fails (exit 1) when a file is out of date, so docs cannot drift from the code.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))

from verl_recipe.contracts import inventory  # noqa: E402
from verl_recipe.contracts.health_rules import markdown_table as health_rules_table  # noqa: E402
from verl_recipe.recipes import load_recipe, recipe_names, service_name  # noqa: E402
from verl_recipe.settings import SETTINGS  # noqa: E402

DOCS = ROOT / "docs"


def recipes_table() -> str:
    rows = [
        "| recipe | compose service | model | engine | nodes x dies | TP | PP | EP | GEN_TP | GEN_DP | GEN_EP |"
        " batch x n |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in recipe_names():
        r = load_recipe(name)
        s = r.settings
        service = "train-" + name.removeprefix("qwen3.5-")
        cells = [
            f"`{name}`",
            f"`{service}`",
            r.model.name,
            r.engine,
            f"{s['NNODES']} x {s['NDEVICES_PER_NODE']}",
            *(str(s.get(k, "-")) for k in ("TP", "PP", "EP", "GEN_TP", "GEN_DP", "GEN_EP")),
            f"{s['TRAIN_BATCH_SIZE']} x {s['ROLLOUT_N']}",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def settings_table() -> str:
    rows = [
        "| setting | meaning | domain (checked by `validate`) | upstream spellings accepted (with a warning) |",
        "|---|---|---|---|",
    ]
    for s in SETTINGS:
        meaning = s.help + (f" ({' / '.join(s.choices)})" if s.choices else "")
        aliases = ", ".join(f"`{a}`" for a in s.aliases) or ""
        domain = s.domain.describe(s.kind) if s.domain else s.kind
        rows.append(f"| `{s.name}` | {meaning} | {domain} | {aliases} |")
    return "\n".join(rows)


def versions_table() -> str:
    m = yaml.safe_load((ROOT / "docker" / "versions.yaml").read_text())
    rows = ["| component | pin |", "|---|---|"]
    base = m["base"]["cann"]
    digest = base["digest"] or "(digest not readable here: `make base-digest` on a host that reaches the registry)"
    rows.append(f"| CANN base image | `{base['image']}:{base['tag']}` {digest} |")
    rows.append(f"| driver + firmware (HDK) on hosts | >= {m['host']['hdk_min']} |")
    for name, src in m["git_sources"].items():
        commit = src["commit"] or "resolved by `make sources` into docker/sources.lock"
        rows.append(f"| {name} | `{src['ref']}` = `{commit}` |")
    for name, version in m["python_packages"].items():
        rows.append(f"| {name} (PyPI) | `{version}` |")
    return "\n".join(rows)


def compose_train_services() -> str:
    """compose.yaml: one service per recipe, running its launch with the CANN environment (recipes.service_name)."""
    blocks = []
    for name in recipe_names():
        blocks.append(
            f"  {service_name(name)}:\n    <<: *ascend-node\n    profiles: [train]\n"
            f"    entrypoint: [bash, -c, *cann-env, cann-env, verl-recipe, train, {name}]\n    command: []"
        )
    return "\n".join(blocks)


def compose_sim_train_services() -> str:
    return "\n".join(f"  {service_name(name)}: *sim-node" for name in recipe_names())


def diagnosis_rules_table() -> str:
    """Every general rule of the diagnosis (diagnosis/families.py, then diagnosis/taxonomy.py)."""
    from verl_recipe.diagnosis import families, taxonomy

    rows = ["| rule | family | confidence | basis | what it reads |", "|---|---|---|---|---|"]
    for r in (*families.RULES, *taxonomy.RULES):
        title = r.title + (" (a symptom)" if r.symptom and "symptom" not in r.title else "")
        rows.append(f"| `{r.id}` | `{r.family}` | {r.confidence} | {r.basis} | {title} |")
    return "\n".join(rows) + "\n"


def _fault_table() -> str:
    """docs/simulated-cluster.md's fault table, from the simulated host's own table (a script of the host's image,
    not a package: loaded by its path)."""
    path = ROOT / "docker" / "sim-host" / "tools" / "simfaulttable.py"
    spec = importlib.util.spec_from_file_location("verl_recipe_sim_faulttable", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return str(module.markdown_table())


# File -> its generated parts.
SECTIONS = {
    DOCS / "settings.md": {"recipes": recipes_table, "settings": settings_table},
    DOCS / "versions.md": {"versions": versions_table},
    DOCS / "watch.md": {"health-rules": health_rules_table},
    DOCS / "diagnose.md": {"general-rules": diagnosis_rules_table},
    DOCS / "contracts.md": {
        "inventory-hosts": lambda: inventory.markdown_table(inventory.HOST),
        "inventory-site": lambda: inventory.markdown_table(inventory.SITE),
    },
    DOCS / "simulated-cluster.md": {"faults": _fault_table},
    ROOT / "compose.yaml": {"train-services": compose_train_services},
    ROOT / "compose.sim.yaml": {"train-services": compose_sim_train_services},
}


def render(text: str, sections: dict[str, Callable[[], str]], name: str = "settings.md") -> str:
    # Markdown marks a generated part with HTML comments, YAML with comment lines.
    begin, end = ("  # ", "") if name.endswith((".yaml", ".yml")) else ("<!-- ", " -->")
    for key, fn in sections.items():
        pattern = re.compile(
            rf"({re.escape(begin)}BEGIN generated:{key}{re.escape(end)}\n)(?:.*?\n)?"
            rf"({re.escape(begin)}END generated:{key}{re.escape(end)})",
            re.S,
        )
        if not pattern.search(text):
            raise SystemExit(f"{name} has no generated:{key} markers")
        text = pattern.sub(lambda mt, fn=fn: mt.group(1) + fn() + "\n" + mt.group(2), text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    stale = []
    for path, sections in SECTIONS.items():
        current = path.read_text()
        new = render(current, sections, path.name)
        if new != current:
            stale.append(path.relative_to(ROOT))
            if not args.check:
                path.write_text(new)
    if args.check:
        if stale:
            print(f"{', '.join(map(str, stale))} out of date: run `make docs` and commit", file=sys.stderr)
            return 1
        print("the generated parts of docs/ and the compose files match their sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
