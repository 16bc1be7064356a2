#!/usr/bin/env bash
# Install what the tests and the simulated cluster need on a fresh Debian machine (as root), then make sure a
# Docker engine is running and `docker compose` (v2) is available. Safe to run again: it skips what is there.
set -euo pipefail

need_apt=()
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v make >/dev/null || need_apt+=(make)
command -v ssh >/dev/null || need_apt+=(openssh-client)
command -v ip >/dev/null || need_apt+=(iproute2)
# headless Chromium for the readiness page's browser tests (tests/browser), with a font to lay the page out
command -v chromium >/dev/null || need_apt+=(chromium)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_apt+=(fonts-dejavu-core)
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "host-deps: installing ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# Start dockerd only when no engine answers; log next to the other CI artefacts.
if ! docker info >/dev/null 2>&1; then
  echo "host-deps: starting dockerd"
  mkdir -p /var/log
  nohup dockerd >>/var/log/verl-recipe-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { echo "host-deps: dockerd did not come up in 60 s; see /var/log/verl-recipe-dockerd.log" >&2; exit 1; }
fi
echo "host-deps: docker engine $(docker version --format '{{.Server.Version}}') is up"
