"""The cluster side of a launch: the node's settings (nodeenv), its Ray service (raynode), waiting for the cluster
(clusterwait), watching its nodes during a run (nodewatch), and the assets a simulated run places (assets)."""
