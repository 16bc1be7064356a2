"""`verl-recipe eval`: a trained model scored against its base through verl's own validation (docs/export.md).

launches.py turns the training run's own launch into a validation-only one per model; score.py reads what verl
wrote (its metric line, its per-sample dump) into the comparison; run.py runs verl for each model."""
