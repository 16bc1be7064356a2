# The readiness page: one self-contained HTML file drawn from saved preflight and rehearsal JSON reports.
# Default: the preflight report of INVENTORY (mk/ansible.mk); add rehearsal reports with REPORTS="... <N>-nodes.json".
# (the report is named after the inventory's folder, also when INVENTORY names its hosts.yml)
REPORT_INVENTORY = $(notdir $(patsubst %/,%,$(if $(filter %.yml %.yaml %.ini,$(INVENTORY)),$(dir $(INVENTORY)),$(INVENTORY))))
REPORTS ?= ansible/.cache/reports/preflight-$(REPORT_INVENTORY).json

.PHONY: report
report: venv ## Readiness page from saved JSON: make report [INVENTORY=...] [REPORTS="preflight-x.json 3-nodes.json"]
	$(VENV)/bin/verl-recipe report $(REPORTS)

.PHONY: test-browser
test-browser: venv ### The readiness page in headless Chromium (also part of test-unit, so of make test)
	$(VENV)/bin/pytest tests/browser -m browser $(PYTEST_ARGS)

.PHONY: readiness-screenshot
readiness-screenshot: venv ### Redraw docs/img/readiness.png: 16 hosts x 16 dies, faults, a rehearsal
	$(PY) -m tests.browser.screenshot docs/img/readiness.png

# The run page of RUN_DIR drawn into a temporary copy (RUN_DIR is never written) and photographed whole.
RUN_DIR ?=
OUT ?= docs/img/run-page.png
.PHONY: runpage-screenshot
runpage-screenshot: venv ### Picture of a run's page: make runpage-screenshot RUN_DIR=<run folder> [OUT=...png]
	@test -n "$(RUN_DIR)" || { echo "error: give RUN_DIR=<LOG_DIR/<project>/<experiment>/runs/<stamp>>" >&2; exit 2; }
	$(PY) -m tests.browser.runpage_screenshot "$(RUN_DIR)" "$(OUT)"
