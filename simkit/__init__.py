"""The test and bench kit of the simulated A3 cluster: one driver for tests/ and bench/.

- `paths`     where the repository's parts are (the one list both sides use)
- `procs`     running a command and failing with its output; `make` in the repository
- `playbook`  ansible-playbook as the user runs it, and what its output says (PLAY RECAP, changed tasks, role times)
- `cluster`   `SimCluster`: up, faults, SSH with host key checking, the site's preparation, down; `running_cluster`
              for a test-only cluster that must leave nothing behind

The cluster itself is made by docker/sim-host/simctl.py (`make sim-up|sim-fault|sim-down`); this kit drives it and
never reimplements it.
"""
