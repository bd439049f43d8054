"""How `raftkube kv`'s command-line words become bytes, key ranges and numbers, as etcdctl
reads them (the commands and the txn grammar read them the same way)."""

from __future__ import annotations

import argparse
import os

from machinery.process.command import UsageError
from store.api.kv import prefix_end


def arg_bytes(text: str) -> bytes:
    """A command-line argument back to the exact bytes the shell passed, whatever the locale."""
    return os.fsencode(text)


def key_range(k: bytes, range_end: bytes | None, prefix: bool, from_key: bool) -> tuple[bytes, bytes]:
    """(key, range_end) as etcdctl computes them; an empty KEY with --prefix/--from-key means every key."""
    if prefix and from_key:
        raise UsageError("--prefix and --from-key exclude each other")
    if range_end is not None and (prefix or from_key):
        raise UsageError("give RANGE_END or --prefix/--from-key, not both")
    if prefix:
        return (k, prefix_end(k)) if k else (b"\0", b"\0")
    if from_key:
        return (k or b"\0"), b"\0"
    return k, range_end if range_end is not None else b""


def non_negative(text: str) -> int:
    """An argparse type: an integer, 0 or more."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {n}")
    return n


def positive(text: str) -> int:
    """An argparse type: an integer, 1 or more."""
    n = non_negative(text)
    if n == 0:
        raise argparse.ArgumentTypeError("must be positive, got 0")
    return n
