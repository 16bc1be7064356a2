#!/usr/bin/env bash
# The main job on the simulated cluster, end to end and for real except the chips:
#   simulated A3 hosts -> deploy.yml over SSH (preflight, image fan-out, node.env, Ray services)
#   -> `docker compose run train-397b --rehearse` on the head host
#   -> `docker compose run train-35b-fsdp`: verl's own GRPO trainer for 3 steps on the CPU stand-ins (DEVICE=cpu,
#      the simulated site's tiny layout: one FSDP2 rank on each of two hosts).
# NODES=16 keeps the recipe's layout unchanged; fewer nodes scale it (scripts/sim_scale.py).
set -euo pipefail
cd "$(dirname "$0")/.."
NODES=${NODES:-3}
SIM_NAME=${SIM_NAME:-verl-sim}
RECIPE=${RECIPE:-qwen3.5-397b}
KEEP=${KEEP:-0}
PY=${PY:-.venv/bin/python}
inv=ansible/inventory/sim
[ "$SIM_NAME" = verl-sim ] || inv=ansible/inventory/$SIM_NAME
service=train-${RECIPE#qwen3.5-}
step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
t0=$(date +%s)

step "simulated cluster: $NODES hosts ($SIM_NAME)"
make --no-print-directory sim-down SIM_NAME="$SIM_NAME" >/dev/null
make --no-print-directory sim-up NODES="$NODES" SIM_NAME="$SIM_NAME"
if [ "$KEEP" != 1 ]; then
  trap 'make --no-print-directory sim-down SIM_NAME="$SIM_NAME" >/dev/null' EXIT
fi

step "shared storage: a tiny random model and data for training, placeholders for the other recipes (simulation only)"
make --no-print-directory sim-seed SIM_NAME="$SIM_NAME"

step "deploy.yml"
make --no-print-directory deploy INVENTORY="$PWD/$inv" \
  ${IMAGE_TARBALL:+ANSIBLE_ARGS="-e site_image_tarball=$IMAGE_TARBALL"}

step "docker compose run $service --rehearse on a3-01"
scale=$($PY scripts/sim_scale.py "$RECIPE" "$NODES")
# shellcheck disable=SC2029  # the command is meant to be expanded here, on the control node
ssh -F "$inv/ssh_config" a3-01 "cd /opt/verl-recipe && docker compose run --rm $service --rehearse $scale"

step "docker compose run train-35b-fsdp on a3-01: verl's trainer, 3 steps on the CPU stand-ins"
ssh -F "$inv/ssh_config" a3-01 "cd /opt/verl-recipe && docker compose run --rm train-35b-fsdp"
step "done in $(( $(date +%s) - t0 )) s"
