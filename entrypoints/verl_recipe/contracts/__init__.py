"""What crosses a side, each written once, standard library only: the run folder's files (runfiles), verl's metric
names (metrics) and records as every reader takes them (records), the health rules' table (health_rules) and the
preflight report (preflight, linked into ansible/module_utils as a3_report.py). Writers and readers import these;
docs/contracts.md describes them."""
