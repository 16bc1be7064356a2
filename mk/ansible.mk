# deploy.yml: prepare the A3 hosts and start the Ray node services (ansible/, docs/deploy.md).
# Runs from ansible/ so its ansible.cfg applies; INVENTORY is relative to ansible/ (or absolute).
INVENTORY     ?= inventory/sample
ANSIBLE_ARGS  ?=
ANSIBLE_ENV    = cd ansible && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" ANSIBLE_CONFIG=ansible.cfg

.PHONY: deploy
deploy: venv ## Run deploy.yml against INVENTORY=inventory/<site> (validate, preflight, prepare, Ray)
	$(ANSIBLE_ENV) ansible-playbook -i $(INVENTORY) deploy.yml $(ANSIBLE_ARGS)

.PHONY: preflight
preflight: venv ## Read-only checks of every host in INVENTORY, one table of all problems
	$(ANSIBLE_ENV) ansible-playbook -i $(INVENTORY) deploy.yml --tags preflight $(ANSIBLE_ARGS)

# The training run on the head of INVENTORY, as typed there (`docker compose run --rm train-<model>`), streamed here.
ARGS ?=
# The head account that starts the run (default: the inventory's first site_operators entry).
OPERATOR ?=
# make train DETACH=1: the run goes on in the background on the head; RUN: the run of make attach / make stop.
DETACH ?=
RUN ?=

.PHONY: train
train: venv ## Start RECIPE on the head of INVENTORY and stream it (DETACH=1: in the background): make train RECIPE=qwen3.5-397b INVENTORY=... ARGS=--rehearse
	$(PY) scripts/train_on_head.py --recipe '$(RECIPE)' --inventory '$(INVENTORY)' --operator '$(OPERATOR)' \
	  $(if $(filter 1,$(DETACH)),--detach) -- $(ARGS)

# The site's runs from the control node, through the head's `runs` service (run/lifecycle.py).
.PHONY: runs attach stop
runs: venv ## Every run of INVENTORY's site: state, step of total, ETA, attempts, last alert
	$(PY) scripts/train_on_head.py --verb runs --inventory '$(INVENTORY)' --operator '$(OPERATOR)'
attach: venv ## Follow RUN's progress lines until it ends (Ctrl-C leaves the run running): make attach RUN=<experiment>
	$(PY) scripts/train_on_head.py --verb attach --run '$(RUN)' --inventory '$(INVENTORY)' --operator '$(OPERATOR)'
stop: venv ## Stop RUN cleanly and record who stopped it and where: make stop RUN=<experiment>
	$(PY) scripts/train_on_head.py --verb stop --run '$(RUN)' --inventory '$(INVENTORY)' --operator '$(OPERATOR)'

# A run's evidence from every host of INVENTORY as one archive here, in ansible/.cache/bundles/ (ansible/logs.yml;
# docs/troubleshooting.md, "Evidence from every host"). LOGS_MAX_MB caps the files' content before compression.
LOGS_MAX_MB ?= 256

.PHONY: logs
logs: venv ## One archive of RUN's logs, plogs, npu-smi, kernel tail and reports from every host: make logs RUN=<experiment>[/<stamp>]
	$(ANSIBLE_ENV) ansible-playbook -i $(INVENTORY) logs.yml -e 'logs_run=$(RUN)' -e 'logs_max_mb=$(LOGS_MAX_MB)' $(ANSIBLE_ARGS)

# The bring-up ladder (README step 8): RECIPE for SMOKE_STEPS steps under an experiment name of its own, so the real
# run never resumes the ladder's checkpoint. ARGS come after, so a `--set` there wins.
SMOKE_STEPS ?= 2

.PHONY: smoke
smoke: venv ## One rung of the bring-up ladder: RECIPE for SMOKE_STEPS (2) steps as experiment smoke-RECIPE on INVENTORY's head
	$(PY) scripts/train_on_head.py --recipe '$(RECIPE)' --inventory '$(INVENTORY)' --operator '$(OPERATOR)' -- \
	  --set 'EXPERIMENT_NAME=smoke-$(RECIPE)' --set 'TOTAL_TRAINING_STEPS=$(SMOKE_STEPS)' $(ARGS)

.PHONY: lint-ansible
lint-ansible: venv ## ansible-lint (production profile, strict) and yamllint --strict on ansible/
	$(VENV)/bin/yamllint --strict ansible .ansible-lint
	$(ANSIBLE_ENV) ansible-lint -c ../.ansible-lint deploy.yml logs.yml playbooks roles
	$(VENV)/bin/ruff check ansible tests/ansible
	$(VENV)/bin/ruff format --check ansible tests/ansible
	# two runs: the action plugin and the module of preflight share a file name. The first checks ansible/module_utils
	# too: from the repository root, its ansible/ folder is where ansible.module_utils.a3_* resolve.
	$(VENV)/bin/mypy --config-file pyproject.toml ansible/roles/*/library tests/ansible
	$(VENV)/bin/mypy --config-file pyproject.toml ansible/roles/*/action_plugins ansible/roles/*/files

.PHONY: test-ansible
test-ansible: venv ## deploy.yml tests: unit tier, then check/apply/idempotence/faults on a 3-host simulated cluster
	$(VENV)/bin/pytest tests/ansible -m "not slow" $(PYTEST_ARGS)

.PHONY: test-ansible-16
test-ansible-16: venv ## deploy.yml on 1 and 16 simulated hosts: first run, re-run (changed=0), timings
	$(VENV)/bin/pytest -s tests/ansible/test_deploy_scale.py -m slow $(PYTEST_ARGS)

# `make lint` (mk/test.mk) runs the Ansible lint too.
lint: lint-ansible
