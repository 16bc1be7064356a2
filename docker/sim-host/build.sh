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
# -L: tools/a3facts.py is a link to the package's one copy (entrypoints/verl_recipe/a3facts.py); the context gets the file.
cp -rL "$here/Dockerfile" "$here/shim" "$here/tools" "$here/rootfs" "$ctx/"
cp "$(readlink -f "$compose")" "$ctx/docker-compose"
# Build arguments and labels from docker/tools/imagetool.py, as for every image: the last commit of docker/sim-host
# (its time and tree) rather than the clock, so rebuilding one commit gives the same labels. It needs PyYAML: the
# Python of the virtual environment the Compose binary comes from, or PY.
repo="$(cd "$here/../.." && pwd)"
py="${PY:-$(dirname "$compose")/python}"
[ -x "$py" ] || { echo "sim-image: Python '$py' is missing: run 'make venv' (or set PY=<python with PyYAML>)" >&2; exit 1; }
flags="$("$py" "$repo/docker/tools/imagetool.py" build-args sim-host --set "BASE_IMAGE=$base")"
# One flag and its value per line, no whitespace in a value (imagetool checks): split into words, no globbing.
# `read -d ''` stops at the end of its input and so returns 1 whatever it read: fail only when nothing was read.
read -r -d '' -a build_flags <<<"$flags" || [ "${#build_flags[@]}" -gt 0 ] \
  || { echo "sim-image: imagetool.py build-args sim-host printed no build arguments" >&2; exit 1; }
# The build log is shown only when the build fails.
if ! docker build "${build_flags[@]}" -t "$tag" "$ctx" >"$ctx/build.log" 2>&1; then
  tail -n 30 "$ctx/build.log" >&2
  echo "sim-image: docker build of $tag failed (last lines above)" >&2
  exit 1
fi
echo "sim-image: built $tag ($(docker image inspect --format '{{.Id}}' "$tag"))"
