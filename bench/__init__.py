"""`make bench` (`python -m bench.run`): figures of deploy, image distribution, preflight, launch, rebuild and the
simulation's cost, measured on the simulated cluster (simkit.cluster.SimCluster) and written to bench/results.*.

- `run`        the command line and the order of the sections (`--sections`, `--quick`, `--render`)
- `deploy`     1. deploy scaling                     - `image`     2. image fan-out, bytes on the cluster's bridge
- `preflight`  3. preflight with faults              - `launch`    4. CLI start-up, verl's checks, the launch wait
- `rebuild`    5. rebuild after a one-line change    - `simcost`   6. start-up and memory per simulated host
- `nodeloss`   8. a host's power loss and reboot
- `common`     what several sections share (recipe, tarball, `timed`, `log`, deploy.yml with the tarball, `Stamped`)
- `results`    results.json merged with this run's figures, results.md rendered from it
- `benchlib`   the pure parts: figures, ratios, output parsers, the table (unit-tested in tests/bench)

A new section is a function `(cluster or sizes, run_id) -> list[Figure]` in a module of its own, named in
run.SECTIONS and called from run.cluster_sections (on the N-host cluster) or run.local_sections.
"""
