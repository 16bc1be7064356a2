"""The content of every placeholder file `prepare-data --synthetic` writes, by which the path checks know one."""

from __future__ import annotations

PLACEHOLDER = b"verl-recipe simulated-cluster placeholder: not model weights or data\n"
