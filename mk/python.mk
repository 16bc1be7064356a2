# Python toolchain: a pinned virtual environment built from hashed lock files.
VENV      ?= .venv
PY        := $(VENV)/bin/python
UV_VER    := 0.13.8
# uv itself is pinned; it is installed into the base interpreter once.
UV        := $(shell command -v uv 2>/dev/null)

$(VENV)/.stamp: requirements/dev.lock requirements/verl.lock pyproject.toml
	@command -v uv >/dev/null || python3 -m pip install --quiet "uv==$(UV_VER)"
	uv venv --quiet --python python3.11 $(VENV)
	uv pip install --quiet --python $(PY) --require-hashes -r requirements/dev.lock
	# verl brings its Hydra config; its runtime dependencies (torch, vllm, ...) are deliberately not installed.
	uv pip install --quiet --python $(PY) --require-hashes --no-deps -r requirements/verl.lock
	uv pip install --quiet --python $(PY) --no-deps -e .
	touch $@

.PHONY: venv
venv: $(VENV)/.stamp ## Create the pinned development environment (.venv)

.PHONY: lock
lock: ## Re-resolve requirements/*.in into hashed lock files
	uv pip compile --quiet --generate-hashes --python-version 3.11 --python-platform linux requirements/dev.in -o requirements/dev.lock
	uv pip compile --quiet --generate-hashes --python-version 3.11 --python-platform linux --no-deps requirements/verl.in -o requirements/verl.lock

.PHONY: lock-check
lock-check: ## Fail when a lock file no longer matches its input
	@for f in dev verl; do \
	  extra=""; [ $$f = verl ] && extra="--no-deps"; \
	  uv pip compile --quiet --generate-hashes --python-version 3.11 --python-platform linux $$extra requirements/$$f.in -o /tmp/verl-recipe-$$f.lock; \
	  diff <(grep -v '^#' requirements/$$f.lock) <(grep -v '^#' /tmp/verl-recipe-$$f.lock) >/dev/null \
	    || { echo "requirements/$$f.lock is stale: run 'make lock' and commit it"; exit 1; }; \
	done; echo "lock files match their inputs"
