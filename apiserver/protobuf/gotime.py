"""Times and durations as Go's Kubernetes types print and parse them in JSON.

`metav1.Time` prints RFC 3339 in UTC to the second (`2024-05-01T10:00:00Z`), `MicroTime` to
the microsecond (`2024-05-01T10:00:00.000000Z`), and `metav1.Duration` as Go's
`time.Duration.String()` (`1h0m0s`, `300ms`).  Protobuf carries seconds/nanos and nanoseconds.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation

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


def _frac(value: int, digits: int) -> str:
    whole, rest = divmod(value, 10**digits)
    if rest == 0:
        return str(whole)
    return f"{whole}." + f"{rest:0{digits}d}".rstrip("0")


def format_duration(ns: int) -> str:
    """Go's time.Duration.String()."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < 1_000_000_000:
        if u < 1000:
            return f"{sign}{u}ns"
        if u < 1_000_000:
            return f"{sign}{_frac(u, 3)}µs"
        return f"{sign}{_frac(u, 6)}ms"
    text = _frac(u % 60_000_000_000, 9) + "s"
    minutes = u // 60_000_000_000
    if minutes:
        text = f"{minutes % 60}m" + text
        hours = minutes // 60
        if hours:
            text = f"{hours}h" + text
    return sign + text


_UNITS = {
    "ns": 1,
    "us": 1000,
    "µs": 1000,
    "μs": 1000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> int:
    """Go's time.ParseDuration, in nanoseconds."""
    body = text
    sign = 1
    if body[:1] in "+-" and body:
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    if body == "0":
        return 0
    if not body:
        raise TimeError(f"{text!r} is not a duration")
    total = Decimal(0)
    pos = 0
    while pos < len(body):
        m = _PART.match(body, pos)
        if m is None:
            raise TimeError(f"{text!r} is not a duration")
        try:
            total += Decimal(m.group(1)) * _UNITS[m.group(2)]
        except InvalidOperation:
            raise TimeError(f"{text!r} is not a duration") from None
        pos = m.end()
    ns = int(total) * sign
    if not -(2**63) <= ns < 2**63:
        raise TimeError(f"{text!r} is out of range")
    return ns
