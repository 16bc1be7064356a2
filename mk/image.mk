# Images: the simulated runtime, the NPU runtime, the recipe layer on either, their locks and git sources.
# Every build argument comes from docker/versions.yaml through docker/tools/imagetool.py, whose build-args files
# also carry the source, revision and created labels (--label lines); docs/image.md explains building online,
# behind a mirror and offline.
IMAGETOOL       = $(PY) docker/tools/imagetool.py
SOURCESTOOL     = $(PY) docker/tools/sources.py
SOC             ?= a3
BASE_DIGEST_UPDATE ?=
# Mirrors. PIP_INDEX_URL may carry a token: it reaches docker only through the environment (never on a logged
# command line) and only a throwaway build stage uses it
# (tests/image/test_image_sim.py::test_pip_index_secret_never_reaches_the_image proves it).
PIP_INDEX_URL   ?= https://pypi.org/simple
ASCEND_INDEX_URL ?=
PIP_CA_BUNDLE   ?= /etc/ssl/certs/ca-certificates.crt
GIT_MIRROR      ?=
# Where `make sources` puts the fetched git sources (tarballs + SHA256SUMS); kept out of the repository.
SOURCES_DIR     ?= .cache/sources
# Local folders that may hold the CPU torch wheel for the simulated runtime (PyPI is the fallback).
SIM_FIND_LINKS  ?= /opt/wheels
# Offline: a folder with every locked file of the sim runtime (`make wheels-sim` fills it); the build then never
# contacts an index.
SIM_WHEELHOUSE  ?=
IMAGE_BUILD_DIR ?= build/image
# Extra `docker build` flags for the runtime images (image-repro-sim passes --no-cache).
DOCKER_BUILD_EXTRA ?=
SIM_RUNTIME_IMAGE ?= verl-recipe-runtime:sim
SIM_IMAGE       ?= verl-recipe:sim
# Read from the manifest only when a recipe needs it (the venv exists by then).
DEBIAN_SUITE    = $(shell $(IMAGETOOL) get base.debian_suite)
SIM_PLATFORM    ?= x86_64-manylinux_2_28

.PHONY: image-runtime-sim
image-runtime-sim: venv ### Build the simulated runtime verl-recipe-runtime:sim (classic builder)
	bash docker/sim-runtime/ensure-base.sh "verl-recipe-base:$(DEBIAN_SUITE)" "$(DEBIAN_SUITE)"
	$(IMAGETOOL) sim-context $(IMAGE_BUILD_DIR)/sim-runtime --ca-bundle "$(PIP_CA_BUNDLE)" \
	  $(foreach d,$(SIM_FIND_LINKS),--find-links $(d)) $(if $(SIM_WHEELHOUSE),--wheelhouse $(SIM_WHEELHOUSE))
	$(IMAGETOOL) build-args sim-runtime > $(IMAGE_BUILD_DIR)/sim-runtime.args
	docker build --force-rm $(DOCKER_BUILD_EXTRA) -t $(SIM_RUNTIME_IMAGE) -f docker/sim-runtime/Dockerfile \
	  $$(cat $(IMAGE_BUILD_DIR)/sim-runtime.args) --build-arg PIP_INDEX_URL \
	  $(if $(SIM_WHEELHOUSE),--build-arg PIP_NO_INDEX=1) $(IMAGE_BUILD_DIR)/sim-runtime
	$(IMAGETOOL) label-check $(SIM_RUNTIME_IMAGE)
image-runtime-sim: export PIP_INDEX_URL := $(PIP_INDEX_URL)

.PHONY: wheels-sim
wheels-sim: venv ### Download every locked file of the sim runtime into SIM_WHEELHOUSE (for offline builds)
	@test -n "$(SIM_WHEELHOUSE)" || { echo "wheels-sim: set SIM_WHEELHOUSE=<folder>" >&2; exit 2; }
	@python3 -m pip --version >/dev/null 2>&1 || { echo "wheels-sim: python3 has no pip: apt-get install python3-pip" >&2; exit 1; }
	mkdir -p $(SIM_WHEELHOUSE)
	# The host's pip, on the same platform as the image (x86_64, CPython 3.11); sdists are kept as sdists.
	python3 -m pip download --quiet --no-deps --require-hashes \
	  --dest $(SIM_WHEELHOUSE) -r docker/sim-runtime/requirements.lock -r docker/sim-runtime/verl.lock

.PHONY: image-sim
image-sim: image-runtime-sim ### Build verl-recipe:sim: the recipe layer on the simulated runtime
	$(MAKE) --no-print-directory image-recipe RUNTIME_IMAGE=$(SIM_RUNTIME_IMAGE) RECIPE_IMAGE=$(SIM_IMAGE)

# The recipe layer alone (seconds): RUNTIME_IMAGE and RECIPE_IMAGE name the images.
.PHONY: image-recipe
image-recipe: venv ### The recipe layer alone, offline, in seconds: RUNTIME_IMAGE=... RECIPE_IMAGE=...
	@test -n "$(RUNTIME_IMAGE)" -a -n "$(RECIPE_IMAGE)" || { echo "image-recipe: set RUNTIME_IMAGE and RECIPE_IMAGE" >&2; exit 2; }
	# --network none: the recipe layer downloads nothing, so it builds offline and in seconds.
	mkdir -p $(IMAGE_BUILD_DIR)
	$(IMAGETOOL) build-args recipe --set RUNTIME_IMAGE=$(RUNTIME_IMAGE) > $(IMAGE_BUILD_DIR)/recipe.args
	docker build --network none -t $(RECIPE_IMAGE) -f docker/recipe/Dockerfile $$(cat $(IMAGE_BUILD_DIR)/recipe.args) .
	$(IMAGETOOL) label-check $(RECIPE_IMAGE)

.PHONY: image-repro-sim
image-repro-sim: image-sim ### Rebuild the sim runtime without cache and compare the package sets (reproducibility)
	bash docker/sim-runtime/repro-check.sh $(SIM_IMAGE) $(MAKE)

.PHONY: sources
sources: venv ## Fetch every git source at its pinned commit into SOURCES_DIR, with checksums (GIT_MIRROR=<base>)
	$(SOURCESTOOL) fetch --dest $(SOURCES_DIR) --lock docker/sources.lock $(if $(GIT_MIRROR),--mirror $(GIT_MIRROR))

.PHONY: sources-verify
sources-verify: venv ## Check SOURCES_DIR against docker/sources.lock (no network)
	$(SOURCESTOOL) verify --dest $(SOURCES_DIR) --lock docker/sources.lock

.PHONY: base-digest
base-digest: venv ## Record the CANN base image digest (SOC=a3|a2) where the registry is reachable
	$(PY) docker/tools/digest.py --soc $(SOC) --manifest docker/versions.yaml $(if $(BASE_DIGEST_UPDATE),--update)

# The NPU build arguments, written first so that a bad SOC stops everything before anything starts.
.PHONY: npu-args
npu-args: venv ### Write the NPU build arguments for SOC (a3|a2) from docker/versions.yaml
	mkdir -p $(IMAGE_BUILD_DIR)
	$(IMAGETOOL) build-args npu --soc $(SOC) > $(IMAGE_BUILD_DIR)/npu-$(SOC).args

# Everything the build needs that a fresh clone lacks, checked before the base pull: one line naming the next command.
.PHONY: npu-ready
npu-ready: venv ### Check what make image-npu needs (sources, the Ascend lock, ASCEND_INDEX_URL) before it starts
	$(SOURCESTOOL) ready --dest $(SOURCES_DIR) --lock docker/sources.lock --lock-dir docker/lock --ca-bundle "$(PIP_CA_BUNDLE)"
npu-ready: export ASCEND_INDEX_URL := $(ASCEND_INDEX_URL)

.PHONY: image-runtime-npu
image-runtime-npu: venv npu-args npu-ready ### Build the NPU runtime (Ascend build host only; SOC=a3|a2)
	@digest="$$($(IMAGETOOL) get base.cann.$(if $(filter a3,$(SOC)),digest,digest_$(SOC)))"; \
	  [ -n "$$digest" ] || echo "image-runtime-npu: WARNING: no digest recorded for the SOC=$(SOC) CANN base: building from the tag only; run 'make base-digest SOC=$(SOC)' where the registry is reachable" >&2
	$(SOURCESTOOL) context --dest $(SOURCES_DIR) --lock docker/sources.lock --out $(IMAGE_BUILD_DIR)/npu \
	  --ca-bundle "$(PIP_CA_BUNDLE)" --lock-dir docker/lock
	docker build --force-rm $(DOCKER_BUILD_EXTRA) -t $$($(IMAGETOOL) image-tag npu-runtime --soc $(SOC)) -f docker/npu/Dockerfile \
	  $$(cat $(IMAGE_BUILD_DIR)/npu-$(SOC).args) --build-arg PIP_INDEX_URL --build-arg ASCEND_INDEX_URL \
	  $(IMAGE_BUILD_DIR)/npu
image-runtime-npu: export PIP_INDEX_URL := $(PIP_INDEX_URL)
image-runtime-npu: export ASCEND_INDEX_URL := $(ASCEND_INDEX_URL)

.PHONY: image-npu
image-npu: image-runtime-npu ## Build the NPU image verl-recipe:npu-<version> (runtime + recipe layer; SOC=a3|a2)
	$(MAKE) --no-print-directory image-recipe RUNTIME_IMAGE=$$($(IMAGETOOL) image-tag npu-runtime --soc $(SOC)) \
	  RECIPE_IMAGE=$$($(IMAGETOOL) image-tag npu --soc $(SOC))

# The rehearsal: the same docker/npu/Dockerfile on this machine's architecture, over a STAND-IN for the CANN base
# (docker/npu-standin: the CANN image's shape, none of CANN). Needs the git sources (`make sources`, i.e. GitHub,
# gitcode or GIT_MIRROR), so CI does not run it; docs/image.md says what it proves and what only an A3 host can.
NPU_STANDIN_IMAGE ?= verl-recipe-cann-standin:$(SOC)
NPU_REHEARSAL_RUNTIME ?= verl-recipe-runtime:npu-rehearsal-standin
NPU_REHEARSAL_IMAGE ?= verl-recipe:npu-rehearsal-standin
SOURCES_LOCK    ?= docker/sources.lock
SOURCES_MANIFEST ?= docker/versions.yaml

.PHONY: image-npu-standin
image-npu-standin: venv ### Build the STAND-IN for the CANN base (rehearsal only; not CANN)
	bash docker/sim-runtime/ensure-base.sh "verl-recipe-base:$(DEBIAN_SUITE)" "$(DEBIAN_SUITE)"
	mkdir -p $(IMAGE_BUILD_DIR)
	$(IMAGETOOL) build-args npu-standin > $(IMAGE_BUILD_DIR)/npu-standin.args
	docker build --force-rm -t $(NPU_STANDIN_IMAGE) -f docker/npu-standin/Dockerfile \
	  $$(cat $(IMAGE_BUILD_DIR)/npu-standin.args) docker/npu-standin
	$(IMAGETOOL) label-check $(NPU_STANDIN_IMAGE)

.PHONY: image-npu-rehearsal
image-npu-rehearsal: venv npu-args image-npu-standin ## Rehearse make image-npu here over the stand-in base (needs make sources; not in CI)
	$(SOURCESTOOL) --manifest $(SOURCES_MANIFEST) context --dest $(SOURCES_DIR) --lock $(SOURCES_LOCK) \
	  --out $(IMAGE_BUILD_DIR)/npu-rehearsal --ca-bundle "$(PIP_CA_BUNDLE)" --lock-dir docker/lock
	$(IMAGETOOL) build-args npu --soc $(SOC) --set CANN_IMAGE=$(NPU_STANDIN_IMAGE) --set REHEARSAL=standin \
	  > $(IMAGE_BUILD_DIR)/npu-rehearsal.args
	docker build --force-rm $(DOCKER_BUILD_EXTRA) -t $(NPU_REHEARSAL_RUNTIME) -f docker/npu/Dockerfile \
	  $$(cat $(IMAGE_BUILD_DIR)/npu-rehearsal.args) --build-arg PIP_INDEX_URL $(IMAGE_BUILD_DIR)/npu-rehearsal
	$(MAKE) --no-print-directory image-recipe RUNTIME_IMAGE=$(NPU_REHEARSAL_RUNTIME) RECIPE_IMAGE=$(NPU_REHEARSAL_IMAGE)
	$(PY) docker/npu-standin/check.py $(NPU_REHEARSAL_IMAGE)
image-npu-rehearsal: export PIP_INDEX_URL := $(PIP_INDEX_URL)

.PHONY: lock-sim
lock-sim: venv ### Re-resolve the simulated runtime's locks from the manifest (the CPU one only with SIM_FIND_LINKS)
	bash docker/sim-runtime/lock.sh write

# The build host's one lock step (README step 2): every lock the manifest feeds, in the order their inputs depend
# on it, with no machine-local folder assumed (the CPU-torch locks are left as they are where no wheel folder
# exists), then the checks that no version moved. Run after `make base-digest`: the dev lock's input records the
# manifest's sha256.
.PHONY: locks
locks: venv ## Build host: refresh every lock the manifest feeds (NPU, simulated runtime, dev), then check them (PyPI)
	$(MAKE) --no-print-directory lock-npu lock-sim lock
	$(MAKE) --no-print-directory lock-npu-check lock-sim-check lock-check

.PHONY: lock-npu
lock-npu: venv ### Re-resolve the NPU lock docker/lock/npu.lock (Python 3.11, linux/aarch64 + x86_64; needs PyPI)
	bash docker/lock/lock.sh write

.PHONY: lock-npu-ascend
lock-npu-ascend: venv ## Lock the Ascend-index packages (ASCEND_INDEX_URL=...); leaves docker/lock/npu.lock as it is
	bash docker/lock/lock.sh ascend
# Through the environment, not the logged command line (the URL may carry a token).
lock-npu-ascend: export ASCEND_INDEX_URL := $(ASCEND_INDEX_URL)
lock-npu lock-npu-ascend lock-npu-check lock-sim lock-sim-check: export PY = $(VENV)/bin/python
lock-sim lock-sim-check: export SIM_FIND_LINKS := $(SIM_FIND_LINKS)
lock-sim lock-sim-check: export SIM_PLATFORM := $(SIM_PLATFORM)

.PHONY: lock-npu-upstream-check
lock-npu-upstream-check: venv ## Check docker/lock/upstream/*.txt against the fetched sources (after make sources; no network)
	$(PY) docker/tools/upstream_reqs.py check --dest $(SOURCES_DIR) --lock $(SOURCES_LOCK)

.PHONY: lock-npu-check
lock-npu-check: venv ### Fail when the NPU lock no longer resolves to itself or its input changed (needs PyPI)
	bash docker/lock/lock.sh check

.PHONY: lock-sim-check
lock-sim-check: venv ### Fail when the sim locks no longer match the manifest (needs PyPI)
	bash docker/sim-runtime/lock.sh check

HADOLINT_FILES = $(sort $(wildcard docker/*/Dockerfile))

.PHONY: hadolint
hadolint: venv ### hadolint every Dockerfile with .hadolint.yaml
	$(VENV)/bin/hadolint --config .hadolint.yaml $(HADOLINT_FILES)

.PHONY: lint-image
lint-image: hadolint ### Image lint: hadolint, ruff and mypy for docker/tools, shell syntax of the image scripts
	$(VENV)/bin/ruff check docker/tools docker/npu docker/npu-standin docker/sim-host docker/sim-runtime/standin
	$(VENV)/bin/ruff format --check docker/tools docker/npu docker/npu-standin docker/sim-host docker/sim-runtime/standin
	$(VENV)/bin/mypy --strict docker/tools docker/npu/pip_check.py docker/npu/import_smoke.py docker/npu-standin/check.py
	for f in docker/sim-runtime/*.sh docker/lock/*.sh docker/npu/*.sh docker/tools/*.sh; do bash -n "$$f"; done
