"""The browser tier: the readiness page loaded in headless Chromium. It needs no cluster and no Docker, so it runs
in `make test-unit` (and so in `make test`); `make test-browser` runs it alone."""

from __future__ import annotations

import os

import pytest

from tests.browser import chromium


@pytest.fixture(scope="session")
def chromium_bin() -> str:
    path = chromium.find()
    if path:
        return path
    why = "chromium is not installed: apt-get install -y chromium (scripts/host-deps.sh installs it)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{why}; CI must run the browser tests")
    pytest.skip(why)
