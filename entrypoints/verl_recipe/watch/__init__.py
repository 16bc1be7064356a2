"""During a run: verl's metric stream followed, the health rules judged on it, a stalled rank found, alerts sent out."""
