# Lint and test tiers. `make test` is what CI runs (.ci/run).
PYTEST_ARGS ?=

.PHONY: lint
lint: venv lint-image lint-ansible ## ruff, mypy, yamllint --strict, docs drift, hadolint, ansible-lint
	$(VENV)/bin/ruff check entrypoints tests scripts bench simkit
	$(VENV)/bin/ruff format --check entrypoints tests scripts bench simkit
	$(VENV)/bin/mypy
	$(VENV)/bin/yamllint --strict .
	$(PY) scripts/gen_docs.py --check

.PHONY: test-unit
test-unit: venv ## Unit and conformance tests (no Docker)
	$(VENV)/bin/pytest -m "not docker and not slow" $(PYTEST_ARGS)

.PHONY: test
test: lint test-unit ## Everything CI runs: lint, unit, conformance and integration tests
	$(MAKE) --no-print-directory host-deps compose-plugin
	$(VENV)/bin/pytest -m "docker and not slow" $(PYTEST_ARGS)
