#!/usr/bin/env python3
"""`make inventory`: a site's hosts.yml from what each A3 host says about itself, not typed by hand.

`make inventory SITE=<name> HOSTS="addr1 addr2 ..." [SSH_USER=deploy] [SSH_PORT=22] [SSH_KEY=...]
[KNOWN_HOSTS=~/.ssh/known_hosts] [CLUSTER_NET=<cidr>] [FORCE=1]` logs in to every host at once (one SSH round trip
each, host keys checked against KNOWN_HOSTS, no prompt), runs one read-only POSIX sh script there (FACT_SCRIPT) that
prints key=value lines, and reads them here: the host name, the cluster address and its interface, the NPU
addresses (/etc/hccn.conf `address_<die>`, or `hccn_tool -i <die> -ip -g` where that file is absent), the vNIC
addresses (`hccn_tool -i <die> -vnic -g`) where the tool gives them, the dies (/dev/davinciN), the HDK driver and
firmware versions, where npu-smi is, and the memory. It writes ansible/inventory/<SITE>/hosts.yml (or --out DIR),
the host order being HOSTS' and the first host the Ray head, with a comment per host saying where each fact came
from and the facts that have no inventory field; group_vars come from inventory/sample when the site has none.

It writes nothing when anything is wrong: every problem of every host is one line `HOST: WHAT; fix: FIX` on
stderr, exit 2 (docs/inventory.md lists them). The written file passes the inventory validator
(verl_recipe.inventory.check_hosts), which deploy.yml runs first.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys

from verl_recipe.exitcodes import EXIT_BAD_INPUT
from verl_recipe.hostfacts.crosscheck import cross_check
from verl_recipe.hostfacts.facts import HostFacts, interpret
from verl_recipe.hostfacts.probe import ask_all, ssh_problem
from verl_recipe.hostfacts.render import notes, render, validate
from verl_recipe.hostfacts.request import REPO, SAMPLE, Request, check_request, split_hosts

# --------------------------------------------------------------------------------------------------------------
# the whole run


def gather(req: Request) -> tuple[list[HostFacts], list[str]]:
    """Every host's facts and every problem of every host, in HOSTS order."""
    facts: list[HostFacts] = []
    errors: list[str] = []
    replies = ask_all(req)
    for r in replies:
        said = ssh_problem(req, r)
        if said:
            errors.append(said)
            continue
        f, errs = interpret(r, req.network)
        facts.append(f)
        errors += errs
    errors += cross_check(facts)
    if not errors and facts:
        errors += validate(facts, req.port)
    return facts, errors


def command_line(req: Request) -> str:
    words = ["make", "inventory", f"SITE={req.site}", f"HOSTS={' '.join(req.hosts)}"]
    words += [f"SSH_USER={req.user}"] if req.user != "deploy" else []
    words += [f"SSH_PORT={req.port}"] if req.port != 22 else []
    words += [f"SSH_KEY={req.key}"] if req.key else []
    words += [f"KNOWN_HOSTS={req.known_hosts}"] if req.known_hosts else []
    words += [f"CLUSTER_NET={req.cluster_net}"] if req.cluster_net else []
    words += [f"INVENTORY_OUT={req.out}"] if req.out else []
    return shlex.join([*words, "FORCE=1"])


def write(req: Request, text: str) -> list[str]:
    """hosts.yml (whole, never merged) and group_vars from inventory/sample when the site has none; what was done."""
    out = req.out_dir
    out.mkdir(parents=True, exist_ok=True)
    target = out / "hosts.yml"
    tmp = out / ".hosts.yml.tmp"
    tmp.write_text(text)
    tmp.replace(target)
    done = [f"wrote {target}"]
    if not (out / "group_vars").exists():
        shutil.copytree(SAMPLE / "group_vars", out / "group_vars")
        done.append(f"copied {SAMPLE / 'group_vars'} to {out / 'group_vars'}: edit the site's settings there")
    return done


def run(req: Request) -> int:
    errors = check_request(req)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return EXIT_BAD_INPUT
    facts, errors = gather(req)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        print(f"inventory: nothing written ({len(errors)} problem(s) above)", file=sys.stderr)
        return EXIT_BAD_INPUT
    for line in write(req, render(req, facts, command_line(req))):
        print(f"inventory: {line}")
    head = facts[0]
    print(f"inventory: {len(facts)} host(s), {len(head.dies)} dies each; Ray head {head.name} ({head.address})")
    for line in notes(facts):
        print(f"inventory: note: {line}")
    inv = req.out_dir.resolve()
    rel = inv.relative_to(REPO / "ansible") if inv.is_relative_to(REPO / "ansible") else inv
    print(f"inventory: next: make preflight INVENTORY={rel}")
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="site_inventory.py", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--site", default="", help="the site's name: ansible/inventory/<site>/")
    p.add_argument("--hosts", action="append", default=[], help="SSH addresses, the Ray head first")
    p.add_argument("--user", default="deploy", help="SSH login (default deploy)")
    p.add_argument("--port", default="22", help="sshd's port on every host (default 22)")
    p.add_argument("--key", default="", help="SSH private key")
    p.add_argument("--known-hosts", default="", help="known_hosts file (default ~/.ssh/known_hosts)")
    p.add_argument("--cluster-net", default="", help="the cluster network (CIDR); default: the address SSH reached")
    p.add_argument("--out", default="", help="folder to write instead of ansible/inventory/<site>")
    p.add_argument("--force", action="store_true", help="write over an existing hosts.yml")
    p.add_argument("--ssh", default="ssh", help=argparse.SUPPRESS)  # the tests' stand-in for ssh
    a = p.parse_args(argv)
    req = Request(
        site=a.site,
        hosts=[h for text in a.hosts for h in split_hosts(text)],
        user=a.user,
        port=int(a.port) if a.port.isascii() and a.port.isdigit() and len(a.port) <= 5 else -1,
        key=a.key,
        known_hosts=a.known_hosts,
        cluster_net=a.cluster_net,
        out=a.out,
        force=a.force,
        ssh=a.ssh,
    )
    return run(req)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
