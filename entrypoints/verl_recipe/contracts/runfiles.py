"""The files of a run folder, LOG_DIR/<project>/<experiment>/runs/<stamp>: the launcher and the run record write
them; the run page, compare and diagnose read them. docs/contracts.md ("The run folder") says what each holds."""

from __future__ import annotations

LAUNCH = "launch.json"  # the launch as rendered: recipe, env, argv, memory plan
SETTINGS = "settings.json"  # every setting with where it came from, the plan, the host, times, resume step
COMMAND = "command.sh"  # the launch as one copy-pasteable shell command
LOG = "train.log"  # verl's whole output
METRICS = "metrics.jsonl"  # verl's file logger: one {"step", "data"} line per step
CODE_FILE = "exit_code"  # the run's exit code, one line
OUTCOME = "outcome.json"  # how the run ended, the nodes it lost, what to do next
LOST_NODES = "lost_nodes.json"  # written the moment the head names a lost node
ALERTS = "alerts.json"  # the health rules' alerts, in order
DIAGNOSIS = "diagnosis.json"  # the failure signatures found in the logs (or the last error block)
RUN_PAGE = "run.html"  # the run page
NODES = "nodes"  # a link to LOG_DIR/nodes: one log per host, for the node's life
HEARTBEAT = "heartbeat"  # rewritten by the supervisor while it lives: `verl-recipe runs` tells running from gone
STOP_REQUEST = "stop_request.json"  # written by `verl-recipe stop`: who asked and when; the supervisor honours it
SUPERVISOR_LOG = "supervisor.log"  # the supervisor's own lines (decisions, waits, a traceback): a detached run's too
# {"<host>.log": bytes}: each node log's size when the run started. A node log holds the node's whole life (its
# start-up, earlier runs); diagnose reads it from here on, so nothing before this run is taken for its failure.
NODE_LOGS_AT_START = "node_logs_at_start.json"
# The same at the run's end: a run diagnosed later reads only its own window, never a node's later restart.
NODE_LOGS_AT_END = "node_logs_at_end.json"
# `verl-recipe eval`: eval/<stamp>-step<N>/ with base/ and trained/ (verl's log, metric line, per-sample dump) and
# the comparison, eval.json; the run page shows the newest.
EVAL_DIR = "eval"
EVAL_RESULT = "eval.json"

# Every name, in the order docs/contracts.md lists them.
ALL = (
    LAUNCH, SETTINGS, COMMAND, LOG, METRICS, CODE_FILE, OUTCOME, LOST_NODES, ALERTS, DIAGNOSIS, RUN_PAGE, NODES,
    HEARTBEAT, STOP_REQUEST, SUPERVISOR_LOG, NODE_LOGS_AT_START, NODE_LOGS_AT_END, EVAL_DIR,
)  # fmt: skip

# The image's own record, written by `verl-recipe doctor --record` in the image build; the doctor and the run page
# read it.
IMAGE_RECORD_DIR = "/opt/verl-recipe"
IMAGE_RECORD_FILE = "image-manifest.json"
