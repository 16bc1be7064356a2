# README's tables are generated from the recipes, the settings vocabulary and docker/versions.yaml.
.PHONY: docs
docs: venv ### Regenerate the generated tables of docs/ and the compose files' train-* services
	$(PY) scripts/gen_docs.py

.PHONY: docs-check
docs-check: venv ### Fail when the generated parts of docs/ and the compose files drift from their sources
	$(PY) scripts/gen_docs.py --check
