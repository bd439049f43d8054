"""Addresses for tests that make networks of their own (root only)."""

from __future__ import annotations

import ipaddress
import random
import shutil
import subprocess
import uuid

IP = shutil.which("ip") or "ip"


def free_cidr() -> str:
    """A /24 of 10.200-254.x.0 that no route or address of the host overlaps."""
    argv = [IP, "-4", "route", "show", "table", "all"]
    used = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True)
    taken = [n for w in used.stdout.split() if (n := _network(w)) is not None]
    rng = random.Random(uuid.uuid4().int)
    for _ in range(200):
        net = ipaddress.IPv4Network(f"10.{rng.randint(200, 254)}.{rng.randint(0, 255)}.0/24")
        if not any(net.overlaps(t) for t in taken):
            return str(net)
    raise AssertionError("no free /24 for a test pod CIDR")


def _network(word: str) -> ipaddress.IPv4Network | None:
    try:
        return ipaddress.IPv4Network(word, strict=False)
    except ValueError:
        return None
