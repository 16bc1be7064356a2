"""A run, from launch to after the fact: the launcher (launcher), the run folder (record), verl's metric stream
(metricstream), the health rules (health), the failure signatures and diagnosis (signatures, diagnose), and the
comparison against a baseline (compare)."""
