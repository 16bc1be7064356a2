"""Every numeric setting against its domain in the settings table (settings.py, the one place for ranges)."""

from __future__ import annotations

from ..settings import SETTINGS
from .context import Context


def check(ctx: Context) -> bool:
    """False when a whole number the layout arithmetic uses is out of its domain (the layout checks then stop)."""
    layout_usable = True
    engine = ctx.engine
    for spec in SETTINGS:
        domain = spec.domain
        if domain is None or spec.kind not in ("int", "float") or engine not in domain.engines:
            continue
        value = ctx.values.get(spec.name)
        if value is None and spec.optional:
            continue
        number: float | None
        if spec.kind == "int":
            number = value if isinstance(value, int) and not isinstance(value, bool) else None
        else:
            try:
                number = float(str(value))
            except ValueError:
                number = None
        wrong = "is not a number" if number is None else domain.violation(number, engine)
        if wrong is None:
            continue
        reason = domain.reason(number) if number is not None else domain.why
        why = f" ({reason})" if reason else ""
        ctx.add(f"{spec.name}={value}", f"{wrong} on {engine}{why}", f"set {spec.name} {domain.range_text(engine)}")
        ctx.out_of_domain.add(f"{spec.name}={value}")
        if spec.kind == "int" and spec.blocks_layout:
            layout_usable = False
    return layout_usable
