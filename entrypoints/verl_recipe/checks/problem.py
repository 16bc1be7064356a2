"""One problem found in a launch: the setting and value, what is wrong (with the rule it breaks), and the fix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    subject: str
    what: str
    fix: str
    rule: str = ""  # the rule's id as docs/rules.md cites it ("M1", "megatron-core M4-M6"); "" for policy rules

    @property
    def message(self) -> str:
        cited = f" ({self.rule})" if self.rule else ""
        return f"{self.subject}: {self.what}{cited}; fix: {self.fix}"

    def __str__(self) -> str:
        return f"error: {self.message}"

    def as_warning(self, why: str) -> str:
        """The problem reported but not refused, with why it is only a warning."""
        return f"warning: {self.message} ({why})"
