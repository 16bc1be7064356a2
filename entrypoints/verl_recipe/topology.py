"""What is fixed about a node and its Ray service: the CPUs verl asks per die and the ports Ray listens on.

The ports are fixed (Ray picks random ones otherwise) so that the firewall list in docs/deploy.md is complete;
VERL_RECIPE_RAY_PORT_OFFSET moves the node ports and the client port, only for several nodes in one network
namespace (the simulated cluster). The A3 facts themselves (dies, ports) live in a3facts, shared with Ansible
and the simulated host.
"""

from __future__ import annotations

from .a3facts import (
    DIES_PER_NODE,  # an A3 node's NPU dies, davinci0-15 (the default of NODE_DIES and of wait-cluster --dies)
    RAY_CLIENT_PORT,  # the head's Ray client server
    RAY_DASHBOARD_PORT,
    RAY_GCS_PORT,  # the defaults of RAY_PORT (the head's GCS) and RAY_DASHBOARD_PORT, which node.env may change
    RAY_NODE_PORTS,  # every node's own ports, as `ray start` options
)

CPUS_PER_DIE = 3  # verl 0.8.0 bundles: {"CPU": 3, "NPU": 1} per die (max_colocate_count)
# On a CPU torch verl's bundles ask for a resource literally named after the device, "cpu"
# (single_controller/ray/base.py:145). A simulated node offers one, so a run's ranks land on different hosts and
# their collectives cross the cluster network, as on A3; the simulated hosts share two cores.
SIM_CPU_RANKS_PER_NODE = 1

__all__ = [
    "CPUS_PER_DIE",
    "DIES_PER_NODE",
    "RAY_CLIENT_PORT",
    "RAY_DASHBOARD_PORT",
    "RAY_GCS_PORT",
    "RAY_NODE_PORTS",
    "SIM_CPU_RANKS_PER_NODE",
]
