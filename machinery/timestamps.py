"""Timestamps as the API writes them (metav1.Time): RFC 3339 in UTC to the second.

The apiserver stamps creation and deletion times, the controllers stamp conditions and
`disruptedPods`, and both read them back to age objects and expire entries.  Each of them had its
own strftime and fromisoformat; a reader that took a naive time as local, or dropped a zone, would
make one side see a different instant from the other.  So the format and the tolerant reading
are here once.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

_last_formatted: list[tuple[int, str]] = [(0, "1970-01-01T00:00:00Z")]
"""The last second formatted and its text: a create stamps two times (creationTimestamp, its
managedFields entry) in the same second, and strftime was 3 % of an apiserver's CPU under creates.
Its one item is replaced whole, so threads share it safely."""

_CARRY = 0.999999
"""datetime rounds to the microsecond first: a fraction from here up may carry into the next
second, so such instants take the uncached path."""


def format_time(seconds: float) -> str:
    """RFC 3339 in UTC to the second, as Kubernetes writes `metav1.Time`."""
    whole = math.floor(seconds)
    cacheable = seconds - whole < _CARRY
    if cacheable:
        last = _last_formatted[0]
        if last[0] == whole:
            return last[1]
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if cacheable:
        _last_formatted[0] = (whole, text)
    return text


def parse_time(value: Any) -> float | None:
    """Seconds since the epoch for an RFC 3339 timestamp (`2024-05-01T10:00:00Z`, with or without
    fractional seconds, `Z` or an offset); None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
