"""Key ranges in etcd's encoding: [key, range_end), where range_end b"" means the single key
and b"\\0" means every key >= key.

`upper_bound` turns a range into the exclusive upper bound used by scans: None for
"no upper bound".  A range_end that sorts before its key is refused (InvalidRangeError)
by raftkube; etcd silently answers an empty result.  range_end == key is a valid, empty
range, as in etcd.
"""

from __future__ import annotations

from store.api.errors import InvalidRangeError

ALL = b"\0"
"""The range_end that means "every key from key on"."""


def upper_bound(range_end: bytes) -> bytes | None:
    """Exclusive upper bound of a (non-single) range; None when unbounded."""
    return None if range_end == ALL else range_end


def check_range(key: bytes, range_end: bytes) -> None:
    if range_end and range_end != ALL and range_end < key:
        raise InvalidRangeError(f"raftkube: range_end {range_end!r} sorts before key {key!r}")


def contains(key: bytes, range_end: bytes, k: bytes) -> bool:
    """Whether k lies in [key, range_end) (etcd encoding)."""
    if not range_end:
        return k == key
    if range_end == ALL:
        return k >= key
    return key <= k < range_end
