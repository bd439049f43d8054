"""Times as Go's Kubernetes types print and parse them in JSON.

`metav1.Time` prints RFC 3339 in UTC to the second (`2024-05-01T10:00:00Z`), `MicroTime` to
the microsecond (`2024-05-01T10:00:00.000000Z`); protobuf carries seconds and nanos.
(`metav1.Duration` is Go's duration text: `machinery.duration`.)
"""

from __future__ import annotations

import datetime as dt
import re

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
GO_ZERO_SECONDS = -62135596800  # 0001-01-01T00:00:00Z: Go's zero time, printed as null


class TimeError(ValueError):
    pass


def format_time(seconds: int, nanos: int, *, micro: bool) -> str:
    total = seconds * 1_000_000_000 + nanos
    secs, rest = divmod(total, 1_000_000_000)
    try:
        when = _EPOCH + dt.timedelta(seconds=secs)
    except OverflowError:
        raise TimeError(f"time {seconds}s is out of range") from None
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if when.year < 1 or len(text) != 19:
        raise TimeError(f"time {seconds}s is out of range")
    if micro:
        text += f".{rest // 1000:06d}"
    return text + "Z"


_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d\d):(\d\d))$")


def parse_time(text: str) -> tuple[int, int]:
    """An RFC 3339 time as (seconds since the epoch, nanos)."""
    m = _RFC3339.match(text)
    if m is None:
        raise TimeError(f"{text!r} is not an RFC 3339 time")
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    try:
        when = dt.datetime(y, mo, d, h, mi, s, tzinfo=dt.UTC)
    except ValueError as e:
        raise TimeError(f"{text!r}: {e}") from None
    if m.group(9):
        offset = (int(m.group(10)) * 60 + int(m.group(11))) * 60
        when -= dt.timedelta(seconds=offset if m.group(9) == "+" else -offset)
    frac = m.group(7) or ""
    nanos = int(frac.ljust(9, "0")) if frac else 0
    delta = when - _EPOCH
    return delta.days * 86400 + delta.seconds, nanos
