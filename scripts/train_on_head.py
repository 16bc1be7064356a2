#!/usr/bin/env python3
"""Start a training run on the Ray head of an inventory from the control node, and stream its output.

`make train RECIPE=qwen3.5-397b INVENTORY=inventory/<site> ARGS="--rehearse"` runs, on the head host, exactly what
an operator types there: `sudo -n /usr/local/sbin/verl-train train-<model> <ARGS>` (deploy.yml's wrapper for the
inventory's site_operators; it takes the compose service, not the recipe), logged in as OPERATOR (default: the first
of site_operators). An inventory that names no operator is refused: the deploy account has no docker group, so it
could not start a run. The key offered is the operator's own: OPERATOR_KEY, else the private key beside the
operator's public key in site_operator_keys when this machine has it, else ssh's own keys (~/.ssh, the agent); never
the deploy account's (ansible_ssh_private_key_file). The port and known_hosts are the inventory's, so host keys are
checked as deploy.yml checks them. Exit code: the remote command's (2: refused launch, 3: cluster not ready;
docs/cli.md), 2 for a bad request here.

`--detach` (make train DETACH=1) starts the run in the background on the head (`docker compose run -d`): it goes on
when this SSH session ends. `--verb runs|attach|stop|export|eval [--run RUN]` (make runs / attach / stop / export /
eval) runs `verl-recipe runs|attach RUN|stop RUN|export RUN|eval RUN` through the compose service `runs` on the head,
which reads the run folders and checkpoints on shared storage; export and eval take ARGS after the run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import site_choice  # scripts/, beside this file
from verl_recipe.recipes import recipe_names, service_name

REPO = Path(__file__).resolve().parents[1]
VERBS = ("runs", "attach", "stop", "export", "eval")
WITH_ARGS = ("export", "eval")  # verbs that take ARGS after the run (--step N, --out DIR, --model DIR)
# A host (DNS name or IP address) or user name: never an ssh option, never words for a shell.
SSH_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:%-]{0,252}")


def fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def service_of(recipe: str) -> str | None:
    """The recipe's compose service (recipes.service_name: compose.yaml has one per recipe), None for no recipe."""
    return service_name(recipe) if recipe in recipe_names() else None


def inventory(path: str) -> dict:
    ansible_inventory = REPO / ".venv" / "bin" / "ansible-inventory"
    exe = str(ansible_inventory) if ansible_inventory.exists() else "ansible-inventory"
    p = subprocess.run(
        [exe, "-i", path, "--list"],
        cwd=REPO / "ansible",
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "ANSIBLE_CONFIG": "ansible.cfg"},
    )
    if p.returncode:
        raise ValueError(f"ansible-inventory could not read {path}: {p.stderr.strip().splitlines()[-1:]}")
    return json.loads(p.stdout)


WRAPPER = "/usr/local/sbin/verl-train"  # ansible/roles/operator (operator_wrapper)


def operator_key(hv: dict, user: str, given: str) -> tuple[str, str]:
    """The private key to offer as `user` and where it was named; ("", ...) leaves the choice to ssh (~/.ssh, agent)."""
    if given:
        if not Path(given).is_file():
            raise ValueError(f"OPERATOR_KEY={given} does not exist on this machine")
        return given, "OPERATOR_KEY"
    public = str((hv.get("site_operator_keys") or {}).get(user) or "")
    if public.endswith(".pub") and Path(public[: -len(".pub")]).is_file():
        return public[: -len(".pub")], f"site_operator_keys.{user}"
    return "", "ssh's own keys (~/.ssh, the agent)"


def head_ssh(inv: dict, operator: str = "", key: str = "") -> tuple[list[str], str, str]:
    """The ssh command, `user@head` and the key's source, for the operator of the inventory's head."""
    heads = inv.get("ray_head", {}).get("hosts", [])
    if len(heads) != 1:
        raise ValueError(f"the inventory must have exactly one host in group ray_head, found {heads or 'none'}")
    head = heads[0]
    hv = inv.get("_meta", {}).get("hostvars", {}).get(head, {})
    target = hv.get("ansible_host", head)
    operators = hv.get("site_operators") or []
    user = operator or (operators[0] if operators else "")
    if not user:
        raise ValueError(
            "it names no site_operators, and the deploy account cannot start a run (it has no docker group); fix: "
            "site_operators: [<head account>] in group_vars/all/site.yml, then make deploy (or OPERATOR=<account>)"
        )
    # The destination goes after `--` (ssh then reads no option from it); a value that is no host name is refused
    # here too, as deploy.yml's validation refuses it.
    for name, value in (("ansible_host", target), ("OPERATOR", user)):
        if not SSH_WORD.fullmatch(str(value)):
            raise ValueError(f"{head}: {name}={str(value)[:80]!r} is not a plain host or user name")
    cmd = ["ssh", "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes"]
    if hv.get("ansible_port"):
        cmd += ["-p", str(hv["ansible_port"])]
    private, source = operator_key(hv, str(user), key)
    if private:
        # only this key: ssh would otherwise offer every default key first and may hit MaxAuthTries
        cmd += ["-i", private, "-o", "IdentitiesOnly=yes"]
    cmd += shlex.split(str(hv.get("ansible_ssh_common_args", "")))
    return cmd, f"{user}@{target}", f"{private} ({source})" if private else source


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="")
    ap.add_argument("--detach", action="store_true", help="start the run in the background on the head")
    ap.add_argument("--verb", choices=VERBS, default="", help="list, follow, stop, export or evaluate runs, not train")
    ap.add_argument("--run", default="", help="the run of attach, stop, export and eval (verl-recipe runs prints them)")
    ap.add_argument("--inventory", required=True, help="inventory folder or file (relative to ansible/ or absolute)")
    ap.add_argument("--operator", default="", help="the head account to log in as (default: site_operators[0])")
    ap.add_argument("--operator-key", default="", help="the operator's private key (default: see site_operator_keys)")
    ap.add_argument("--site-hint", default="", help="what the printed follow-up commands add to name the site")
    ap.add_argument("--print-only", action="store_true", help="print the SSH command instead of running it")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="arguments of `verl-recipe train` (--rehearse, --set ...)")
    ns = ap.parse_args(argv)
    if ns.verb:
        if ns.verb != "runs" and not ns.run:
            return fail(f"{ns.verb} needs RUN=<experiment> or RUN=<experiment>/<stamp>; fix: `make runs` lists them")
        service: str | None = "runs"
    else:
        service = service_of(ns.recipe)
    if service is None:
        names = recipe_names()
        return fail(f"RECIPE={ns.recipe} is not a recipe; fix: use one of {', '.join(names)}")
    why = site_choice.problem(ns.inventory)
    if why:
        return fail(why)
    try:
        ssh, target, key = head_ssh(inventory(str(site_choice.resolve(ns.inventory))), ns.operator, ns.operator_key)
    except ValueError as e:
        return fail(f"INVENTORY={ns.inventory}: {e}" + ("" if "fix:" in str(e) else "; fix: correct it"))
    # make passes `-- $(ARGS)`: only that first `--` is make's; a `--` inside ARGS separates verl-recipe's own
    # arguments from the extra Hydra overrides and must reach the head as it was typed.
    args = ns.args[1:] if ns.args[:1] == ["--"] else list(ns.args)
    if ns.verb:
        args = [ns.verb, *([ns.run] if ns.run else []), *(args if ns.verb in WITH_ARGS else [])]
    detach = ns.detach and not ns.verb
    remote = f"sudo -n {WRAPPER} {'--detach ' if detach else ''}{service} {shlex.join(args)}".rstrip()
    # A terminal gets a terminal on the head, so Ctrl-C reaches the run; pipes stream plainly.
    cmd = [*ssh, *(["-tt"] if sys.stdin.isatty() else []), "--", target, remote]
    if ns.print_only:
        print(shlex.join(cmd))
        return 0
    print(f"{ns.verb or 'train'}: {service} on the head {target} (key: {key}): {remote}", file=sys.stderr, flush=True)
    rc = subprocess.call(cmd)
    if detach and rc == 0:
        inv = f" {ns.site_hint}" if ns.site_hint else ""
        print(
            f"detached: {service} goes on without this session; `make runs{inv}` lists it, "
            f"`make attach RUN=<experiment>{inv}` follows it, `make stop RUN=<experiment>{inv}` stops it "
            "(<experiment>: EXPERIMENT_NAME, by default the recipe's name)",
            file=sys.stderr,
        )
    return rc


if __name__ == "__main__":
    sys.exit(main())
