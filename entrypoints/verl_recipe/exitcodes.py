"""The exit codes of every `verl-recipe` command, defined once (docs/cli.md lists them under "Exit codes").

Any other value a command returns is the training process's own exit code (or `ray start`'s, for `node`).
"""

from __future__ import annotations

EXIT_OK = 0
# A check failed (a rehearsal that found problems), or a Ray node that ended by itself with no code of its own.
EXIT_FAILED = 1
# Bad input: every problem printed, one per line; nothing was started.
EXIT_BAD_INPUT = 2
# The cluster was not ready by its deadline, or a node was lost while the head waited, rehearsed or trained.
EXIT_NOT_READY = 3
# A real (not --rehearse) launch on the simulated cluster: validated, rendered and recorded; verl not started.
EXIT_SIMULATED = 4
# A health rule named in HEALTH_STOP fired during a launch (health.py): verl was stopped.
EXIT_HEALTH = 5
# `compare`: a metric crossed its threshold against the baseline (6: 5 is left to the health rules' stop).
EXIT_REGRESSION = 6
# `verl-recipe stop` asked the run to stop: verl was stopped cleanly and the run can be resumed.
EXIT_STOPPED = 7
# The reader of the command's output closed it early (`| head`): the shell's 128 + 13 (SIGPIPE), no traceback.
EXIT_BROKEN_PIPE = 141
# The supervisor ended by SIGTERM while it waited to restart (the shell's 128 + 15; `docker compose down`, a stop).
EXIT_TERMINATED = 143
