"""The one "did you mean": the known name closest to a misspelt one, for every place that refuses an unknown name
(settings, recipes, Hydra keys, inventory variables)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def suggest(word: str, candidates: Iterable[str], prefix: str = "") -> str | None:
    """The candidate closest to `word` (case-insensitive), or None when none is close. A `prefix` every name shares
    (`site_`) is left out of the comparison, where it would make every name look close."""
    known = {c.upper()[len(prefix) :] if c.upper().startswith(prefix.upper()) else c.upper(): c for c in candidates}
    key = word[:100].upper()
    if prefix and key.startswith(prefix.upper()):
        key = key[len(prefix) :]
    hits = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return known[hits[0]] if hits else None
