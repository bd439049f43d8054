"""Timestamps as the API writes them (metav1.Time): RFC 3339 in UTC to the second.

The apiserver stamps creation and deletion times, the controllers stamp conditions and
`disruptedPods`, and both read them back to age objects and expire entries.  Each of them had its
own strftime and fromisoformat; a reader that took a naive time as local, or dropped a zone, would
make one side see a different instant from the other.  So the format and the tolerant reading
are here once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def format_time(seconds: float) -> str:
    """RFC 3339 in UTC to the second, as Kubernetes writes `metav1.Time`."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
