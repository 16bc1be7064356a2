# A site's inventory from what its hosts report (scripts/site_inventory.py, docs/inventory.md).
SITE          ?=
HOSTS         ?=
SSH_USER      ?= deploy
SSH_PORT      ?= 22
SSH_KEY       ?=
KNOWN_HOSTS   ?=
CLUSTER_NET   ?=
INVENTORY_OUT ?=
FORCE         ?=
# A make variable as one single-quoted shell word, whatever it holds.
inv_quote = '$(subst ','\'',$(1))'

.PHONY: inventory
inventory: venv ## Write ansible/inventory/SITE/hosts.yml from what HOSTS="a b ..." report over SSH (docs/inventory.md)
	$(PY) scripts/site_inventory.py --site $(call inv_quote,$(SITE)) --hosts $(call inv_quote,$(HOSTS)) \
	  --user $(call inv_quote,$(SSH_USER)) --port $(call inv_quote,$(SSH_PORT)) --key $(call inv_quote,$(SSH_KEY)) \
	  --known-hosts $(call inv_quote,$(KNOWN_HOSTS)) --cluster-net $(call inv_quote,$(CLUSTER_NET)) \
	  --out $(call inv_quote,$(INVENTORY_OUT)) $(if $(FORCE),--force,)
