#!/usr/bin/env bash
# Reproducibility of the simulated runtime: rebuild it from the same inputs without the build cache and compare
# what the two images record (pip freeze, Debian packages, the recipe layer's image-manifest.json packages).
# Usage: repro-check.sh IMAGE MAKE   (IMAGE: the recipe image already built, e.g. verl-recipe:sim)
set -euo pipefail
image="${1:?usage: repro-check.sh IMAGE MAKE}"
make_cmd="${2:-make}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
snapshot() {  # snapshot IMAGE DIR: the package records of an image
  mkdir -p "$2"
  docker run --rm --entrypoint cat "$1" /opt/verl-recipe/runtime-pip-freeze.txt > "$2/runtime-pip-freeze.txt"
  docker run --rm --entrypoint cat "$1" /opt/verl-recipe/runtime-dpkg.txt > "$2/runtime-dpkg.txt"
  docker run --rm --entrypoint cat "$1" /opt/verl-recipe/pip-freeze.txt > "$2/pip-freeze.txt"
  docker run --rm --entrypoint python "$1" -c \
    'import json;d=json.load(open("/opt/verl-recipe/image-manifest.json"));print(json.dumps([d["packages"],d["pins"]],sort_keys=True))' \
    > "$2/packages.json"
}
snapshot "$image" "$tmp/first"
# A second build with the cache off for the runtime (the heavy part) and the same inputs.
DOCKER_BUILD_EXTRA=--no-cache $make_cmd --no-print-directory image-sim SIM_IMAGE="${image}-repro" \
  SIM_RUNTIME_IMAGE="verl-recipe-runtime:sim-repro"
snapshot "${image}-repro" "$tmp/second"
docker rmi "${image}-repro" "verl-recipe-runtime:sim-repro" >/dev/null
if diff -r "$tmp/first" "$tmp/second"; then
  echo "repro-check: two builds from the same inputs record the same package set"
else
  echo "repro-check: the two builds differ (diff above)" >&2
  exit 1
fi
