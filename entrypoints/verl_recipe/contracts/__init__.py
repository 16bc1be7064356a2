"""What crosses a side, each written once, standard library only: the run folder's files (runfiles), verl's metric
names (metrics) and the health rules' names (health_rules). Writers and readers import these; docs/contracts.md
describes them."""
