"""Addresses for tests that make networks of their own (root only)."""

from __future__ import annotations

import shutil

from machinery.process.hosts import free_subnet

IP = shutil.which("ip") or "ip"


def free_cidr() -> str:
    """A /24 of 10.200-254.x.0 that no route or address of the host overlaps."""
    return free_subnet()
