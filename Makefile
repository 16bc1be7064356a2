# verl-recipe: Qwen3.5 GRPO with verl 0.8.0 on Ascend A3. `make help` lists a site's targets, `make help-dev` the
# contributors' (a target's `## ` comment is for sites, `### ` for contributors).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules --warn-undefined-variables

include mk/*.mk

.PHONY: help help-dev
help: ## List a site's targets (README's runbook and the simulation's demo)
	@grep -hE '^[a-zA-Z0-9_.-]+:[^#]*[^#]## ' $(MAKEFILE_LIST) | sort \
	  | awk 'BEGIN{FS=":[^#]*[^#]## "}{printf "  %-18s %s\n", $$1, $$2}'
	@echo "  (make help-dev: the contributors' targets: tests, lint, locks, simulated cluster, bench)"
help-dev: ## List the contributors' targets
	@grep -hE '^[a-zA-Z0-9_.-]+:.*### ' $(MAKEFILE_LIST) | sort \
	  | awk 'BEGIN{FS=":.*### "}{printf "  %-22s %s\n", $$1, $$2}'
