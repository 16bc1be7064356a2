#!/usr/bin/env bash
# Make sure the debootstrap base image exists. Its owner is `make base-image` (mk/sim.mk); this builds a minimal
# copy under the same tag only when it is missing, so the image targets also work on their own.
# Usage: ensure-base.sh IMAGE_TAG SUITE [CACHE_DIR]
set -euo pipefail
tag="${1:?usage: ensure-base.sh IMAGE_TAG SUITE [CACHE_DIR]}"
suite="${2:?usage: ensure-base.sh IMAGE_TAG SUITE [CACHE_DIR]}"
cache="${3:-.cache/image}"

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "ensure-base: $tag is present"
  exit 0
fi
# The owner's builder when it is there (same tag, same cached rootfs tarball, plus its labels).
if [ -f docker/base/build.sh ]; then
  BASE_IMAGE="$tag" SUITE="$suite" CACHE_DIR="$cache" bash docker/base/build.sh
  exit 0
fi
command -v debootstrap >/dev/null || { echo "ensure-base: debootstrap is missing: run 'make host-deps'" >&2; exit 1; }
mkdir -p "$cache"
tarball="$cache/rootfs-$suite-minbase.tar"
if [ ! -s "$tarball" ]; then
  root="$(mktemp -d "$cache/rootfs.XXXXXX")"
  trap 'rm -rf "$root"' EXIT
  echo "ensure-base: debootstrap $suite (minbase) into $root"
  debootstrap --variant=minbase "$suite" "$root" http://deb.debian.org/debian >/dev/null
  # apt lists and caches are rebuilt by every image that needs them; leaving them out keeps the base small.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
  tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi
docker import --change 'CMD ["/bin/bash"]' "$tarball" "$tag" >/dev/null
echo "ensure-base: imported $tag from $tarball"
