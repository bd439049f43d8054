"""Lease IDs as `raftkube kv` users type them: `0x`-prefixed hex, hex with a letter in it,
or decimal.  A string of digits only could be either (lease grant prints hex): it is
looked up in the cluster's lease list and means whichever of the two exists; decimal when
neither does."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from machinery.process.command import UsageError
from store.client.client import Client


@dataclass(frozen=True, slots=True)
class LeaseRef:
    """A lease ID as typed: digits only may be decimal or hex, resolved against the cluster."""

    text: str
    candidates: tuple[int, ...]


_MAX_LEASE_ID = (1 << 63) - 1


def lease_ref(text: str) -> LeaseRef:
    """An argparse type: a lease ID as typed (`0x`-hex, hex with a letter, or digits only)."""
    t = text.strip().lower()
    if re.fullmatch(r"0x[0-9a-f]+", t):
        values: tuple[int, ...] = (int(t[2:], 16),)
    elif re.fullmatch(r"[0-9]+", t):
        dec, hexa = int(t, 10), int(t, 16)
        values = (dec,) if dec == hexa else (dec, hexa)
    elif re.fullmatch(r"[0-9a-f]+", t):
        values = (int(t, 16),)
    else:
        raise argparse.ArgumentTypeError(f"not a lease ID (hex or decimal): {text!r}")
    values = tuple(v for v in values if v <= _MAX_LEASE_ID)
    if not values:
        raise argparse.ArgumentTypeError(f"lease ID out of range (at most 63 bits): {text!r}")
    return LeaseRef(text, values)


async def resolve_lease(c: Client, ref: LeaseRef) -> int:
    """The lease `ref` means: the one candidate, or the candidate that exists in the cluster."""
    if len(ref.candidates) == 1:
        return ref.candidates[0]
    leases = set(await c.leases())
    live = [v for v in ref.candidates if v in leases]
    if len(live) == 2:
        dec, hexa = ref.candidates
        raise UsageError(
            f"lease ID {ref.text} names two leases (decimal {dec} and hex {hexa:016x}); "
            f"write 0x{ref.text} for the hex one, or the other in hex ({dec:016x})"
        )
    return live[0] if live else ref.candidates[0]


def lease_hex(lease_id: int) -> str:
    """A lease ID as `lease grant` prints it (and etcdctl): 16 hex digits."""
    return f"{lease_id:016x}"
