# deploy.yml: prepare the A3 hosts and start the Ray node services (ansible/, docs/deploy.md).
# Runs from ansible/ so its ansible.cfg applies; INVENTORY is relative to ansible/ (or absolute).
# The site: INVENTORY on the command line, else the one `make use` chose (the link ansible/inventory/current, also
# ansible.cfg's default). No target acts on the tracked sample (scripts/site_choice.py says why and refuses it).
SITE_LINK     := $(shell readlink ansible/inventory/current 2>/dev/null)
INVENTORY_USED := $(if $(SITE_LINK),$(if $(filter /%,$(SITE_LINK)),$(SITE_LINK),inventory/$(SITE_LINK)))
INVENTORY     ?= $(INVENTORY_USED)
SITE_CHOICE    = $(PY) scripts/site_choice.py
# First line of every target that acts on the site: one line and exit 2 for no site, the sample or a missing one.
need_site      = @$(SITE_CHOICE) check $@ '$(INVENTORY)'
ANSIBLE_ARGS  ?=
ANSIBLE_ENV    = cd ansible && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" ANSIBLE_CONFIG=ansible.cfg

.PHONY: use
use: venv ## Choose the site every target acts on, once: make use INVENTORY=inventory/<site>
	@$(SITE_CHOICE) use '$(INVENTORY)'

.PHONY: deploy
deploy: venv ## Run deploy.yml on the site (validate, preflight, prepare, Ray)
	$(need_site)
	$(ANSIBLE_ENV) ansible-playbook -i $(INVENTORY) deploy.yml $(ANSIBLE_ARGS)

.PHONY: preflight
preflight: venv ## Read-only checks of every host of the site, one table of all problems
	$(need_site)
	$(ANSIBLE_ENV) ansible-playbook -i $(INVENTORY) deploy.yml --tags preflight $(ANSIBLE_ARGS)

# The training run on the head of INVENTORY, as typed there (`docker compose run --rm train-<model>`), streamed here.
ARGS ?=
# The head account that starts the run (default: the inventory's first site_operators entry), and its private key
# (default: the one beside its public key in site_operator_keys, else ssh's own; never the deploy account's).
OPERATOR ?=
OPERATOR_KEY ?=
# make train DETACH=1: the run goes on in the background on the head; RUN: the run of make attach / make stop.
DETACH ?=
RUN ?=

# What the printed follow-up commands need to name the site: nothing when it is the remembered one.
SITE_HINT = $(if $(filter command line environment,$(origin INVENTORY)),INVENTORY=$(INVENTORY))
ON_HEAD   = $(PY) scripts/train_on_head.py --inventory '$(INVENTORY)' --operator '$(OPERATOR)' \
  --operator-key '$(OPERATOR_KEY)' --site-hint '$(SITE_HINT)'

.PHONY: train
train: venv ## Start RECIPE on the site's head and stream it (DETACH=1: in the background): make train RECIPE=qwen3.5-397b ARGS=--rehearse
	$(ON_HEAD) --recipe '$(RECIPE)' $(if $(filter 1,$(DETACH)),--detach) -- $(ARGS)

# The site's runs from the control node, through the head's `runs` service (run/lifecycle.py).
.PHONY: runs attach stop export eval
runs: venv ## Every run of the site: state, step of total, ETA, attempts, last alert
	$(ON_HEAD) --verb runs
attach: venv ## Follow RUN's progress lines until it ends (Ctrl-C leaves the run running): make attach RUN=<experiment>
	$(ON_HEAD) --verb attach --run '$(RUN)'
stop: venv ## Stop RUN cleanly and record who stopped it and where: make stop RUN=<experiment>
	$(ON_HEAD) --verb stop --run '$(RUN)'
export: venv ## RUN's newest complete save as a Hugging Face folder, checked against the base model: make export RUN=<experiment>
	$(ON_HEAD) --verb export --run '$(RUN)' -- $(ARGS)
eval: venv ## RUN's newest save scored against its base model by verl's validation, side by side: make eval RUN=<experiment>
	$(ON_HEAD) --verb eval --run '$(RUN)' -- $(ARGS)

# doctor on every host at once, as root (become), from the control node: one table (ansible/doctor.yml).
.PHONY: doctor
doctor: venv ## The image and the node against the pins on every host of the site, one table
	$(need_site)
	$(ANSIBLE_ENV) ansible-playbook -i $(INVENTORY) doctor.yml $(ANSIBLE_ARGS)

# A run's evidence from every host of INVENTORY as one archive here, in ansible/.cache/bundles/ (ansible/logs.yml;
# docs/troubleshooting.md, "Evidence from every host"). LOGS_MAX_MB caps the files' content before compression.
LOGS_MAX_MB ?= 256

.PHONY: logs
logs: venv ## One archive of RUN's logs, plogs, npu-smi, kernel tail and reports from every host: make logs RUN=<experiment>[/<stamp>]
	$(need_site)
	$(ANSIBLE_ENV) ansible-playbook -i $(INVENTORY) logs.yml -e 'logs_run=$(RUN)' -e 'logs_max_mb=$(LOGS_MAX_MB)' $(ANSIBLE_ARGS)

# The bring-up ladder (README step 8): RECIPE for SMOKE_STEPS steps, each time under a fresh experiment name
# (smoke-RECIPE-<UTC stamp>), so a second smoke trains again instead of finding the first one complete, and the real
# run never resumes the ladder. It saves no checkpoint (SAVE_FREQ=-1, so RESTARTS=0): a 397B save is TBs that nobody
# resumes. ARGS come after, so a `--set` there wins.
SMOKE_STEPS ?= 2

.PHONY: smoke
smoke: venv ## One rung of the bring-up ladder: RECIPE for SMOKE_STEPS (2) steps, a fresh experiment, no checkpoint
	$(ON_HEAD) --recipe '$(RECIPE)' -- --set "EXPERIMENT_NAME=smoke-$(RECIPE)-$$(date -u +%Y%m%dT%H%M%S)" \
	  --set 'TOTAL_TRAINING_STEPS=$(SMOKE_STEPS)' --set SAVE_FREQ=-1 --set RESTARTS=0 --set RESUME_MODE=disable $(ARGS)

.PHONY: lint-ansible
lint-ansible: venv ### ansible-lint (production profile, strict) and yamllint --strict on ansible/
	$(VENV)/bin/yamllint --strict ansible .ansible-lint
	$(ANSIBLE_ENV) ansible-lint -c ../.ansible-lint deploy.yml logs.yml doctor.yml playbooks roles
	$(VENV)/bin/ruff check ansible tests/ansible
	$(VENV)/bin/ruff format --check ansible tests/ansible
	# two runs: the action plugin and the module of preflight share a file name. The first checks ansible/module_utils
	# too: from the repository root, its ansible/ folder is where ansible.module_utils.a3_* resolve.
	$(VENV)/bin/mypy --config-file pyproject.toml ansible/roles/*/library tests/ansible
	$(VENV)/bin/mypy --config-file pyproject.toml ansible/roles/*/action_plugins ansible/roles/*/files

.PHONY: test-ansible
test-ansible: venv ### deploy.yml tests: unit tier, then check/apply/idempotence/faults on a 3-host simulated cluster
	$(VENV)/bin/pytest tests/ansible -m "not slow" $(PYTEST_ARGS)

.PHONY: test-ansible-16
test-ansible-16: venv ### deploy.yml on 1 and 16 simulated hosts: first run, re-run (changed=0), timings
	$(VENV)/bin/pytest -s tests/ansible/test_deploy_scale.py -m slow $(PYTEST_ARGS)

# `make lint` (mk/test.mk) runs the Ansible lint too.
lint: lint-ansible
