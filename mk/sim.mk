# The simulated A3 cluster (docs/simulated-cluster.md): base image, host image, cluster control, measurements.
SIM_NAME      ?= verl-sim
NODES         ?= 3
SIM_SUBNET    ?=
SIM_INVENTORY ?=
SIM_SHARED_DIR ?=
SIM_LINK      ?=
# A site profile (docs/simulated-cluster.md, "Site profiles"): real-site, or its parts one by one; SIM_SEED repeats
# a cluster's random choices; SIM_HOSTS_FILE=none leaves hosts.yml to `make inventory`.
SIM_PROFILE   ?=
SIM_ADDRESSES ?=
SIM_NPU_SMI   ?=
SIM_HDK       ?=
SIM_SEED      ?=
SIM_HOSTS_FILE ?=
HOST          ?=
FAULT         ?=
FORCE         ?=
BASE_IMAGE_TAG ?= verl-recipe-base:bookworm
SIM_HOST_IMAGE ?= verl-recipe-sim-host:bookworm
SIM_SIZES     ?= 1,4,16
SIMCTL = SIM_NAME='$(SIM_NAME)' SIM_SUBNET='$(SIM_SUBNET)' SIM_INVENTORY='$(SIM_INVENTORY)' \
  SIM_SHARED_DIR='$(SIM_SHARED_DIR)' SIM_LINK='$(SIM_LINK)' SIM_HOST_IMAGE='$(SIM_HOST_IMAGE)' \
  SIM_PROFILE='$(SIM_PROFILE)' SIM_ADDRESSES='$(SIM_ADDRESSES)' SIM_NPU_SMI='$(SIM_NPU_SMI)' SIM_HDK='$(SIM_HDK)' \
  SIM_SEED='$(SIM_SEED)' SIM_HOSTS_FILE='$(SIM_HOSTS_FILE)' \
  $(PY) docker/sim-host/simctl.py

.PHONY: base-image
base-image: ### Debian bookworm base image from debootstrap (verl-recipe-base:bookworm; FORCE=1 rebuilds)
	BASE_IMAGE='$(BASE_IMAGE_TAG)' bash docker/base/build.sh $(if $(FORCE),--force,)

.PHONY: sim-image
sim-image: base-image venv ### Simulated A3 host image (verl-recipe-sim-host:bookworm)
	bash docker/sim-host/build.sh '$(SIM_HOST_IMAGE)' $(VENV)/bin/docker-compose '$(BASE_IMAGE_TAG)'

.PHONY: sim-up
sim-up: sim-image ### Start NODES simulated A3 hosts (1-16, default 3) and write their inventory (SIM_PROFILE=real-site)
	$(SIMCTL) up --nodes '$(NODES)'

# Every recipe by default: the demo may run any of them; tests and the bench seed the same set.
# Every recipe (verl-recipe list), read when a target needs it.
SEED_RECIPES ?= $(shell $(PY) -c 'from verl_recipe.recipes import recipe_names; print(*recipe_names())')

.PHONY: sim-seed
# With the simulated site's launch settings (simctl.py site-launch), as the cluster's services read them: the FSDP
# recipe gets a real tiny checkpoint and data that the CPU stand-ins train on, the others placeholders.
sim-seed: venv ### Model and data for SEED_RECIPES on the cluster's shared storage (simulation only; needs verl-recipe:sim)
	mkdir -p build
	$(SIMCTL) site-launch > build/$(SIM_NAME)-site.yaml
	docker run --rm --network none -e VERL_RECIPE_SIMULATED=1 -e VERL_RECIPE_SITE=/etc/verl-recipe/site.yaml \
	  -v '$(CURDIR)/build/$(SIM_NAME)-site.yaml:/etc/verl-recipe/site.yaml:ro' -v '$(SIM_NAME)-shared:/mnt/shared' \
	  --entrypoint bash verl-recipe:sim -c 'for r in $(SEED_RECIPES); do verl-recipe prepare-data "$$r" --synthetic || exit 1; done'

.PHONY: sim-status
sim-status: venv ### Hosts, addresses, engines and faults of the simulated cluster
	$(SIMCTL) status

.PHONY: sim-down
sim-down: venv ### Remove the simulated cluster (containers, network, volumes, generated inventory)
	$(SIMCTL) down

.PHONY: sim-fault
sim-fault: venv ### Switch a fault on a simulated host: HOST=a3-03 FAULT=link-down:7 (FAULT=clear restores it)
	@[ -n '$(HOST)' ] && [ -n '$(FAULT)' ] || { echo "sim-fault: give HOST=a3-NN and FAULT=<fault>|clear (see docs/simulated-cluster.md)" >&2; exit 2; }
	$(SIMCTL) fault '$(HOST)' '$(FAULT)'

.PHONY: sim-measure
sim-measure: sim-image ### Start-up time and memory per host for SIM_SIZES hosts (default 1,4,16)
	SIM_NAME='$(SIM_NAME)-measure' $(PY) -m bench.simcost --sizes '$(SIM_SIZES)' --output build/sim-measure.json

.PHONY: test-sim
test-sim: venv ### pytest tests/sim: the stand-in tools, a 3-host and the 16-host cluster (Docker; no marker filter)
	$(VENV)/bin/pytest tests/sim $(PYTEST_ARGS)

.PHONY: test-sim-16
test-sim-16: venv sim-image ### 16 simulated hosts: SSH with host key checking, full NPU ping mesh, a fault seen by all peers (slow)
	$(VENV)/bin/pytest -m slow tests/sim/test_cluster16.py $(PYTEST_ARGS)
