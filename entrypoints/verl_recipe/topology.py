"""What is fixed about a node and its Ray service: the CPUs verl asks per die and the ports Ray listens on.

The ports are fixed (Ray picks random ones otherwise) so that the firewall list in docs/deploy.md is complete;
VERL_RECIPE_RAY_PORT_OFFSET moves the node ports and the client port, only for several nodes in one network
namespace (the simulated cluster).
"""

from __future__ import annotations

DIES_PER_NODE = 16  # an A3 node's NPU dies, davinci0-15 (the default of NODE_DIES and of wait-cluster --dies)
CPUS_PER_DIE = 3  # verl 0.8.0 bundles: {"CPU": 3, "NPU": 1} per die (max_colocate_count)

# The defaults of RAY_PORT (the head's GCS) and RAY_DASHBOARD_PORT, which the site may change (node.env).
RAY_GCS_PORT = 6379
RAY_DASHBOARD_PORT = 8265
# Every node's own ports, as `ray start` options.
RAY_NODE_PORTS = {
    "node-manager-port": 6380,
    "object-manager-port": 6381,
    "runtime-env-agent-port": 6382,
    "metrics-export-port": 6383,
    "dashboard-agent-grpc-port": 6384,
    "dashboard-agent-listen-port": 52365,
    "min-worker-port": 10002,
    "max-worker-port": 19999,
}
RAY_CLIENT_PORT = 10001  # the head's Ray client server
