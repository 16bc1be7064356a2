"""Cluster start-up commands (Ray node, wait, rehearsal); filled in by the cluster module."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def add_cluster_commands(sub: Any, add_request_args: Callable[[argparse.ArgumentParser], None]) -> None:
    return None


def run_cluster_command(ns: argparse.Namespace, extra: list[str]) -> int:
    raise SystemExit(f"unknown command {ns.cmd}")
