"""After a run: a run against a baseline (compare) and one archive of every host's evidence (bundle), secrets
redacted."""
