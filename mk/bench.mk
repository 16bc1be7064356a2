# Benchmarks (`python -m bench.run`, bench/README.md): deploy scaling, image fan-out, preflight with faults, launch
# path, rebuild, simulation cost; each figure a ratio or count from one run, written to bench/results.{md,json}
# (QUICK: bench/results-quick.*). Not part of `make test`: nothing there depends on timing. QUICK=1: 1 and 3 hosts,
# fewer repetitions.
QUICK          ?=
BENCH_SECTIONS ?= deploy,preflight,launch,image,cli,rebuild,simcost,nodeloss,train,recover,readers
BENCH_NAME     ?= bench

.PHONY: bench
bench: host-deps compose-plugin image-sim-tgz sim-image ### The bench on the simulated cluster, sections as bench/README.md lists them (QUICK=1: small)
	$(PY) -m bench.run $(if $(QUICK),--quick) --sections '$(BENCH_SECTIONS)' --name '$(BENCH_NAME)'

.PHONY: test-bench
test-bench: venv ### Unit tests of the bench driver's pure parts (no Docker, no timing)
	$(VENV)/bin/pytest tests/bench $(PYTEST_ARGS)
