"""Fakes several test modules share. One clock for every test that drives time by hand."""

from __future__ import annotations


class FakeClock:
    """Time that moves only when a test moves it: `t` is the time; `now()` (or calling the clock) reads it, `sleep(s)`
    advances it, as the code under test's `now`/`sleep` (or `clock`) parameters expect."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds
