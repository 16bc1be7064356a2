#!/usr/bin/env bash
# Build the simulated A3 host image. Usage: build.sh IMAGE_TAG COMPOSE_BINARY [BASE_IMAGE]
# The context is this folder plus the Compose v2 binary (pinned in requirements/dev.lock, installed into .venv).
set -euo pipefail
tag="${1:?usage: build.sh IMAGE_TAG COMPOSE_BINARY [BASE_IMAGE]}"
compose="${2:?usage: build.sh IMAGE_TAG COMPOSE_BINARY [BASE_IMAGE]}"
base="${3:-verl-recipe-base:bookworm}"
here="$(cd "$(dirname "$0")" && pwd)"
[ -x "$compose" ] || { echo "sim-image: Compose binary '$compose' is missing: run 'make venv'" >&2; exit 1; }
docker image inspect "$base" >/dev/null 2>&1 || { echo "sim-image: base image $base is missing: run 'make base-image'" >&2; exit 1; }
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp -r "$here/Dockerfile" "$here/shim" "$here/tools" "$here/rootfs" "$ctx/"
cp "$(readlink -f "$compose")" "$ctx/docker-compose"
# Labels: the last commit of docker/sim-host (its time and tree) rather than the clock, so rebuilding one commit
# gives the same labels; outside a git checkout they say "unknown".
repo="$(cd "$here/../.." && pwd)"
git_or() { git -C "$repo" "$@" 2>/dev/null || echo unknown; }
created="$(git_or log -1 --format=%cI -- docker/sim-host)"
ref="$(git_or rev-parse HEAD)"
tree="$(git_or rev-parse --short=12 HEAD:docker/sim-host)"
source="$(git_or remote get-url origin)"
[ -n "$created" ] || created=unknown
# The build log is shown only when the build fails.
if ! docker build --build-arg "BASE_IMAGE=$base" \
  --build-arg "IMAGE_CREATED=$created" --build-arg "VCS_REF=$ref" --build-arg "VCS_SOURCE=$source" \
  --build-arg "SIM_HOST_TREE=$tree" -t "$tag" "$ctx" >"$ctx/build.log" 2>&1; then
  tail -n 30 "$ctx/build.log" >&2
  echo "sim-image: docker build of $tag failed (last lines above)" >&2
  exit 1
fi
echo "sim-image: built $tag ($(docker image inspect --format '{{.Id}}' "$tag"))"
