"""Waiting on Ray with a deadline and a node guard: placement groups ready, and object refs fetched, each failure
naming the node lost or what is still pending."""

from __future__ import annotations

import time
from typing import Any

from ..cluster.nodewatch import Guard, NodeLost


def _wait_ready(ray: Any, pgs: list[Any], timeout_s: float, guard: Guard | None = None) -> list[int]:
    """Indexes of the groups that could not be placed in time."""
    refs = [pg.ready() for pg in pgs]
    end = time.monotonic() + timeout_s
    while True:
        left = max(0.0, end - time.monotonic())
        ready, pending = ray.wait(refs, num_returns=len(refs), timeout=min(left, 2.0) if guard else left)
        if not pending or left <= 0:
            break
        if guard is not None:
            guard()
    done = set(ready)
    return [i for i, ref in enumerate(refs) if ref not in done]


def _get(ray: Any, refs: Any, timeout_s: float, guard: Guard | None = None) -> Any:
    """ray.get, but a lost node ends the wait at once (NodeLost) instead of at the timeout or never."""
    if guard is None:
        return ray.get(refs, timeout=timeout_s)
    many = isinstance(refs, list)
    items = refs if many else [refs]
    end = time.monotonic() + timeout_s
    while True:
        left = max(0.0, end - time.monotonic())
        _, pending = ray.wait(items, num_returns=len(items), timeout=min(left, 2.0))
        if not pending or left <= 0:
            break
        guard()
    try:
        out = ray.get(items, timeout=max(0.0, end - time.monotonic()))
    except NodeLost:
        raise
    except Exception:
        # A rank or task that failed because a peer went away (its node died, or its connection was reset): give
        # the watch its confirm time to name the node, instead of Ray's error; nothing suspect: Ray's error.
        until = time.monotonic() + guard.watch.confirm_s + 2 * guard.every_s
        while True:
            guard(force=True)
            if not guard.watch.suspect or time.monotonic() > until:
                raise
            time.sleep(guard.every_s)
    return out if many else out[0]
