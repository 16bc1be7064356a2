# Python toolchain: a pinned virtual environment built from hashed lock files (requirements/lock.sh says which).
VENV      ?= .venv
PY        := $(VENV)/bin/python
UV_VER    := 0.13.8
# uv itself is pinned. Where none is on PATH it is installed once into a project folder (--target): a Debian or
# Ubuntu python3 is externally managed (PEP 668) and refuses installs into itself, but not into a folder.
UV_BOOT   := $(CURDIR)/.cache/uv-$(UV_VER)
export PATH := $(UV_BOOT)/bin:$(PATH)
# Folders that may hold the CPU torch wheel requirements/dev.lock pins; without it the venv takes
# requirements/dev-pypi.lock (PyPI's CUDA torch: several GB more). The same folders as the simulated runtime's.
DEV_FIND_LINKS ?= $(SIM_FIND_LINKS)
DEV_LOCKS := requirements/dev.lock requirements/dev-pypi.lock requirements/dev-aarch64.lock requirements/verl.lock

# requirements/lock.sh install picks the lock (the CPU torch wheel's, or PyPI's) and upgrades an existing venv in
# place without a gap. verl comes from verl.lock without its dependencies; what `import verl` needs is in the dev lock.
# $(VENV)/bin/python rather than $(PY): a target that needs the venv may carry its own PY, and its prerequisites
# (this one) inherit it.
$(VENV)/.stamp: $(DEV_LOCKS) pyproject.toml requirements/lock.sh
	@command -v uv >/dev/null || python3 -m pip install --quiet --target "$(UV_BOOT)" "uv==$(UV_VER)"
	test -x $(VENV)/bin/python || uv venv --quiet --python python3.11 $(VENV)
	DEV_FIND_LINKS="$(DEV_FIND_LINKS)" bash requirements/lock.sh install $(VENV)/bin/python
	touch $@

.PHONY: venv
venv: $(VENV)/.stamp ## Create or upgrade the pinned development environment (.venv), verl importable in it

.PHONY: lock
lock: venv ### Re-resolve requirements/*.in into hashed lock files (dev.lock needs the CPU torch wheel's folder)
	bash requirements/lock.sh write

.PHONY: lock-check
lock-check: venv ### Fail when a lock file no longer matches its input (needs PyPI)
	bash requirements/lock.sh check
lock lock-check: export PY := $(PY)
lock lock-check: export DEV_FIND_LINKS := $(DEV_FIND_LINKS)
