"""A run's save out as a Hugging Face folder (write.py), located (source.py) and checked (check.py)."""
