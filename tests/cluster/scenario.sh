#!/usr/bin/env bash
# Runs inside one verl-recipe:sim container with --network none: two Ray "hosts" on loopback addresses.
# Prints KEY=VALUE result lines that tests/cluster/test_ray_cluster.py asserts on.
set -uo pipefail
export HEAD_ADDR=127.0.0.2 RAY_PORT=46379 RAY_DASHBOARD_PORT=48265 NODE_DIES=16 RAY_NUM_CPUS=48
export CLUSTER_NODES=h1=127.0.0.2,h2=127.0.0.3 VERL_RECIPE_SIMULATED=1
export HCCL_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo
export LOG_DIR=/shared/runs CKPT_DIR=/shared/ckpt
export TRAIN_FILES=/shared/data/train.parquet VAL_FILES=/shared/data/test.parquet
# Token authentication, as compose.yaml sets it: a root-only token file, named by path, never by value.
export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/tmp/ray_auth_token
(umask 077 && python -c 'import secrets; print(secrets.token_hex(32))' >"$RAY_AUTH_TOKEN_PATH")
(umask 077 && python -c 'import secrets; print(secrets.token_hex(32))' >/tmp/other_token)
mkdir -p /tmp/dev16 /tmp/dev15
for i in $(seq 0 15); do touch "/tmp/dev16/davinci$i"; done
for i in $(seq 0 14); do touch "/tmp/dev15/davinci$i"; done

# A host showing 15 dies is refused before Ray starts.
NODE_NAME=h3 NODE_IP=127.0.0.4 VERL_RECIPE_DEV_DIR=/tmp/dev15 verl-recipe node --role worker >/tmp/short.log 2>&1
echo "RC_SHORT=$?"
echo "MSG_SHORT=$(grep '^error:' /tmp/short.log)"

# A node without token authentication is refused before Ray starts.
env -u RAY_AUTH_MODE NODE_NAME=h3 NODE_IP=127.0.0.4 VERL_RECIPE_DEV_DIR=/tmp/dev16 verl-recipe node --role worker \
  >/tmp/noauth.log 2>&1
echo "RC_NOAUTH=$?"
echo "MSG_NOAUTH=$(grep '^error:' /tmp/noauth.log)"

NODE_NAME=h1 NODE_IP=127.0.0.2 VERL_RECIPE_DEV_DIR=/tmp/dev16 verl-recipe node --role head >/tmp/head.log 2>&1 &
head_pid=$!
# Two nodes share this container's network namespace: the second one's fixed Ray ports move by 100.
NODE_NAME=h2 NODE_IP=127.0.0.3 VERL_RECIPE_DEV_DIR=/tmp/dev16 VERL_RECIPE_RAY_PORT_OFFSET=100 verl-recipe node --role worker >/tmp/worker.log 2>&1 &
worker_pid=$!

export NODE_NAME=h1 NODE_IP=127.0.0.2 VERL_RECIPE_DEV_DIR=/tmp/dev16
verl-recipe prepare-data qwen3.5-35b --synthetic --set MODEL_PATH=/shared/models/q35 >/tmp/prep.log 2>&1
echo "RC_PREPARE=$?"
verl-recipe train qwen3.5-35b --rehearse --set NNODES=2 --set MODEL_PATH=/shared/models/q35 --wait-deadline 300 \
  --ranks-per-node 2 >/tmp/rehearse.out 2>/tmp/rehearse.err
echo "RC_REHEARSE=$?"
sed 's/^/REPORT: /' /tmp/rehearse.out
ls /shared/runs/verl_grpo_qwen3_5/qwen3.5-35b/rehearsals/ | sed 's/^/REPORT_FILE: /'

# The GCS and the dashboard's job API refuse a client without the token and one with another token.
probe='import sys, urllib.error, urllib.request
from verl_recipe.cluster.raynode import gcs_token_status
token = open(sys.argv[1]).readline().strip() if sys.argv[1] != "-" else ""
req = urllib.request.Request("http://127.0.0.2:48265/api/jobs/", headers={"Authorization": f"Bearer {token}"} if token else {})
try:
    code = urllib.request.urlopen(req, timeout=10).status
except urllib.error.HTTPError as exc:
    code = exc.code
print(gcs_token_status("127.0.0.2:46379", token), code)'
echo "AUTH_NONE=$(python -c "$probe" -)"
echo "AUTH_OTHER=$(python -c "$probe" /tmp/other_token)"
echo "AUTH_OWN=$(python -c "$probe" "$RAY_AUTH_TOKEN_PATH")"
RAY_AUTH_TOKEN_PATH=/tmp/other_token verl-recipe wait-cluster --nodes 2 --deadline 20 >/tmp/wrongtok.out 2>/tmp/wrongtok.err
echo "RC_WRONG_TOKEN=$?"
echo "MSG_WRONG_TOKEN=$(grep '^error:' /tmp/wrongtok.err)"
echo "TOKEN_LEAKS=$(grep -rlF -f "$RAY_AUTH_TOKEN_PATH" /tmp/ray /shared /tmp/*.log /tmp/rehearse.* | wc -l)"

# Stop the worker: the head's wait names it instead of hanging.
kill -TERM "$worker_pid"
wait "$worker_pid"
echo "RC_WORKER_STOP=$?"
verl-recipe wait-cluster --nodes 2 --deadline 20 >/tmp/wait.out 2>/tmp/wait.err
echo "RC_WAIT=$?"
echo "MSG_WAIT=$(grep '^error:' /tmp/wait.err)"

kill -TERM "$head_pid"
wait "$head_pid"
echo "RC_HEAD_STOP=$?"
sleep 2
echo "LEFTOVER=$(ps -eo args | awk '/raylet|gcs_server/ && !/awk/ {n++} END {print n+0}')"
ls /shared/runs/nodes | sed 's/^/NODE_LOG: /'
