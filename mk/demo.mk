# The main job on the simulated cluster (README quickstart): make demo [NODES=3|16] [RECIPE=qwen3.5-397b] [KEEP=1]
RECIPE ?= qwen3.5-397b
KEEP   ?= 0
SIM_IMAGE_TAR ?= build/images/verl-recipe-sim.tar

.PHONY: image-sim-tar
image-sim-tar: image-sim ### verl-recipe:sim saved as the tarball the simulated inventory distributes
	mkdir -p $(dir $(SIM_IMAGE_TAR))
	docker save verl-recipe:sim -o $(SIM_IMAGE_TAR).part
	mv $(SIM_IMAGE_TAR).part $(SIM_IMAGE_TAR)

# Compressed for the demo: 16 hosts each hold the tarball and the loaded image at once during the fan-out.
SIM_IMAGE_TGZ ?= build/images/verl-recipe-sim.tar.gz

.PHONY: image-sim-tgz
image-sim-tgz: image-sim ### verl-recipe:sim saved gzip-compressed (what make demo and make bench distribute)
	mkdir -p $(dir $(SIM_IMAGE_TGZ))
	docker save verl-recipe:sim | gzip -1 > $(SIM_IMAGE_TGZ).part
	mv $(SIM_IMAGE_TGZ).part $(SIM_IMAGE_TGZ)

.PHONY: demo
demo: host-deps compose-plugin image-sim-tgz sim-image ## Simulated cluster -> deploy.yml -> train-397b --rehearse -> 3 GRPO steps of train-35b-fsdp (CPU)
	NODES='$(NODES)' SIM_NAME='$(SIM_NAME)' RECIPE='$(RECIPE)' KEEP='$(KEEP)' PY='$(PY)' IMAGE_TARBALL='$(CURDIR)/$(SIM_IMAGE_TGZ)' \
	  bash scripts/sim_demo.sh
