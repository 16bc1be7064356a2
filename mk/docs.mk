# README's tables are generated from the recipes, the settings vocabulary and docker/versions.yaml.
.PHONY: docs
docs: venv ## Regenerate README's generated tables
	$(PY) scripts/gen_docs.py

.PHONY: docs-check
docs-check: venv ## Fail when README's tables drift from their sources
	$(PY) scripts/gen_docs.py --check
