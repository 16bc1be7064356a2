#!/usr/bin/env python3
"""Controller of the simulated A3 cluster (`make sim-up|sim-status|sim-down|sim-fault`).

Each simulated host is a container `<name>-a3-NN` (hostname `a3-NN`) of the image verl-recipe-sim-host on the
user-defined bridge network `<name>` with a fixed address, its own Docker engine on the volume `<name>-a3-NN-docker`
and the shared storage volume `<name>-shared`. Every object carries the label org.verl-recipe.sim=<name>, which is
how status and teardown find them. The inventory (hosts.yml, group_vars/all/sim.yml, the cluster's SSH key pair and
the hosts' known_hosts) is written to ansible/inventory/sim/ for the default name, ansible/inventory/<name>/ else.
With --link hccs (SIM_LINK=hccs) the inventory sets site_inter_server_link: hccs and lists each host's a3_vnic_ips
as the host's own `hccn_tool -i <die> -vnic -g` reports them; `link roce|hccs` rewrites a running cluster's.
--profile real-site (SIM_PROFILE) makes the hosts differ the way real sites do (random NPU and vNIC addresses, npu-smi
only in /usr/local/sbin on some hosts, mixed HDK versions; simctl_parts/profile.py); --hosts-file none leaves
hosts.yml to `make inventory`, which reads the hosts themselves.
Standard library plus PyYAML (to read docker/versions.yaml).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

# The controller's parts (simctl_parts/) and the stand-in tools' folder, whose a3facts.py links to the package's.
_HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(_HERE), str(_HERE / "tools")]

from simctl_parts.cluster import describe, hosts_of  # noqa: E402
from simctl_parts.common import (  # noqa: E402
    DEFAULT_NAME,
    HOST_IMAGE,
    HOST_MEM_GIB,
    OPERATOR_USER,
    REPO,
    SimError,
    check_name,
    default_inventory,
    labelled,
)
from simctl_parts.inventory import (  # noqa: E402
    PLANTED_SECRET,
    parse_vnic,
    planted_secret_file,
    sim_site_file,
    ssh_cmd,
    vnic_query,
    write_inventory,
)
from simctl_parts.lifecycle import down, status, teardown, up  # noqa: E402
from simctl_parts.power import fault, link  # noqa: E402

# What the tests, the bench and simkit use of the parts, besides main.
__all__ = [
    "DEFAULT_NAME",
    "HOST_IMAGE",
    "HOST_MEM_GIB",
    "OPERATOR_USER",
    "PLANTED_SECRET",
    "REPO",
    "SimError",
    "check_name",
    "default_inventory",
    "describe",
    "labelled",
    "parse_vnic",
    "planted_secret_file",
    "ssh_cmd",
    "teardown",
    "up",
    "vnic_query",
    "write_inventory",
]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="simctl.py", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--name", default=os.environ.get("SIM_NAME") or DEFAULT_NAME)
    p.add_argument("--inventory", default=os.environ.get("SIM_INVENTORY", ""), help="inventory folder to write")
    p.add_argument("--image", default=os.environ.get("SIM_HOST_IMAGE") or HOST_IMAGE)
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("--nodes", type=int, default=3)
    u.add_argument("--subnet", default=os.environ.get("SIM_SUBNET", ""), help="IPv4 subnet, or auto")
    u.add_argument("--shared-dir", default=os.environ.get("SIM_SHARED_DIR", ""), help="host folder instead of a volume")
    u.add_argument("--link", default=os.environ.get("SIM_LINK") or "roce", help="inter-server link: roce or hccs")
    # How the simulated site differs from the code's assumptions, as real sites do (simctl_parts/profile.py).
    u.add_argument("--profile", default=os.environ.get("SIM_PROFILE") or "default", help="default or real-site")
    u.add_argument("--addresses", default=os.environ.get("SIM_ADDRESSES", ""), help="formula or random")
    u.add_argument("--npu-smi", default=os.environ.get("SIM_NPU_SMI", ""), help="everywhere or sbin-some")
    u.add_argument("--hdk", default=os.environ.get("SIM_HDK", ""), help="HDK versions: uniform or mixed")
    u.add_argument("--seed", default=os.environ.get("SIM_SEED", ""), help="seed of the random choices")
    u.add_argument(
        "--hosts-file",
        default=os.environ.get("SIM_HOSTS_FILE") or "write",
        help="write (default) or none: leave hosts.yml to `make inventory`",
    )
    sub.add_parser("down")
    sub.add_parser("status")
    ln = sub.add_parser("link", help="rewrite the inventory of a running cluster for roce or hccs")
    ln.add_argument("mode")
    sub.add_parser("site-launch", help="print the simulated site's launch settings (a site file, for make sim-seed)")
    f = sub.add_parser("fault")
    f.add_argument("host")
    f.add_argument("fault")
    a = p.parse_args(argv)
    try:
        if a.cmd == "up":
            up(a)
        elif a.cmd == "down":
            down(a)
        elif a.cmd == "status":
            return status(a)
        elif a.cmd == "fault":
            fault(a)
        elif a.cmd == "link":
            link(a)
        elif a.cmd == "site-launch":
            print(json.dumps(sim_site_file(len(hosts_of(a.name)) or 1), indent=2, sort_keys=True))
    except SimError as e:
        print(f"simctl: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
