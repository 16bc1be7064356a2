# Lint and test tiers. `make test` is what CI runs (.ci/run).
PYTEST_ARGS ?=
# The unit tier runs on xdist workers (one per core; CI has two): its tests share no state but their tmp paths.
UNIT_WORKERS ?= auto
# Each tier lists its slowest tests, so a CI log says where the time goes (the Docker tier: every test over 15 s).
DURATIONS := --durations=25
DOCKER_DURATIONS := --durations=0 --durations-min=15

.PHONY: lint
lint: venv lint-image lint-ansible ### ruff, mypy, yamllint --strict, docs drift, hadolint, ansible-lint
	$(VENV)/bin/ruff check entrypoints tests scripts bench simkit
	$(VENV)/bin/ruff format --check entrypoints tests scripts bench simkit
	$(VENV)/bin/mypy
	$(VENV)/bin/yamllint --strict .
	$(PY) scripts/gen_docs.py --check

.PHONY: test-unit
test-unit: venv ### Unit and conformance tests (no Docker)
	$(VENV)/bin/pytest -m "not docker and not slow and not scenario and not network" -n $(UNIT_WORKERS) $(DURATIONS) $(PYTEST_ARGS)

.PHONY: test-network
test-network: venv ### Tests that need PyPI (the locks still resolve)
	$(VENV)/bin/pytest -m "network" $(DURATIONS) $(PYTEST_ARGS)

.PHONY: test
test: lint test-unit test-network ## Everything CI runs: lint, unit, network, conformance and integration tests
	$(MAKE) --no-print-directory host-deps compose-plugin
	$(VENV)/bin/pytest -m "docker and not slow and not scenario" $(DOCKER_DURATIONS) $(PYTEST_ARGS)

.PHONY: test-scenarios
test-scenarios: venv host-deps compose-plugin ### Recovery and power-loss scenarios on simulated clusters (not in CI: its time budget)
	$(VENV)/bin/pytest -m "docker and scenario" $(DOCKER_DURATIONS) $(PYTEST_ARGS)

.PHONY: golden
golden: venv ### Write the golden corpus anew (tests/golden) after an intended change of what the product prints
	GOLDEN_WRITE=1 $(VENV)/bin/pytest -q tests/unit/test_golden.py
