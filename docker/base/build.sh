#!/usr/bin/env bash
# Build the project's Debian base image from a debootstrap rootfs (no registry is reachable).
# Usage: build.sh [--force]   (env: BASE_IMAGE, SUITE, MIRROR, CACHE_DIR)
# The rootfs tarball is cached in CACHE_DIR and reused when present; without it the rootfs is built from scratch.
# --force rebuilds the rootfs and re-imports the image even when both exist.
set -euo pipefail
tag="${BASE_IMAGE:-verl-recipe-base:bookworm}"
suite="${SUITE:-bookworm}"
mirror="${MIRROR:-http://deb.debian.org/debian}"
cache="${CACHE_DIR:-.cache/image}"
force=0
case "${1:-}" in
  "") ;;
  --force) force=1 ;;
  *) echo "base-image: unknown argument '$1' (only --force is accepted)" >&2; exit 2 ;;
esac

if [ "$force" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base-image: $tag is present (make base-image FORCE=1 rebuilds it)"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "base-image: debootstrap is missing: run 'make host-deps'" >&2; exit 1; }
mkdir -p "$cache"
# The tarball name is shared with docker/sim-runtime/ensure-base.sh so both reuse one cache.
tarball="$cache/rootfs-$suite-minbase.tar"
if [ "$force" = 1 ] || [ ! -s "$tarball" ]; then
  root="$(mktemp -d "$cache/rootfs.XXXXXX")"
  trap 'rm -rf "$root"' EXIT
  echo "base-image: debootstrap --variant=minbase $suite from $mirror"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >/dev/null
  # Every image that installs packages runs apt-get update itself; lists and .debs only add size.
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb
  tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi
created="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
docker import \
  --change 'CMD ["/bin/bash"]' \
  --change "LABEL org.opencontainers.image.title=verl-recipe-base org.opencontainers.image.base.name=debian:$suite-minbase org.opencontainers.image.created=$created org.verl-recipe.debootstrap-mirror=$mirror" \
  --message "debootstrap --variant=minbase $suite" \
  "$tarball" "$tag" >/dev/null
echo "base-image: imported $tag ($(docker image inspect --format '{{.Id}}' "$tag")) from $tarball"
