"""Go's durations: time.ParseDuration and Duration.String(), the one reading and writing of
`1h30m`, `300ms`, `-1.5h` in the project.

Kubernetes spells durations this way in metav1.Duration fields (JSON and protobuf), in flags
(`--service-account-max-token-expiration`) and in CronJob `@every` schedules, so all of them
parse here, to integer nanoseconds as Go does (a float would drift on `1h0m0.000000001s`).
"""

from __future__ import annotations

SECOND_NS = 1_000_000_000


class DurationError(ValueError):
    """Text Go's time.ParseDuration refuses, or a duration outside int64 nanoseconds."""


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
    "µs": 1000,  # U+00B5 micro sign
    "μs": 1000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": SECOND_NS,
    "m": 60 * SECOND_NS,
    "h": 3600 * SECOND_NS,
}
_DIGITS = "0123456789"
_LIMIT = 1 << 63  # Go accumulates in uint64 and refuses anything past this


def _quote(text: str) -> str:
    """Go's time.quote: ASCII printable kept (with `"` and `\\` escaped), other bytes as \\xNN."""
    out = ['"']
    for c in text:
        if ord(c) >= 0x80 or c < " ":
            out += [f"\\x{b:02x}" for b in c.encode("utf-8", "surrogatepass")]
        else:
            out.append("\\" + c if c in '"\\' else c)
    return "".join(out) + '"'


def parse_duration(text: str) -> int:
    """Go's time.ParseDuration, in nanoseconds: `[-+]?([0-9]*(\\.[0-9]*)?unit)+` or a bare "0",
    with Go's error messages (`time: invalid duration "x"`, `time: missing unit in duration "1"`,
    `time: unknown unit "d" in duration "1d"`) and its int64 range."""
    s = text
    negative = False
    if s and s[0] in "+-":
        negative, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    invalid = DurationError(f"time: invalid duration {_quote(text)}")
    if not s:
        raise invalid
    total = 0
    while s:
        if s[0] != "." and s[0] not in _DIGITS:
            raise invalid
        i = 0
        whole = 0
        while i < len(s) and s[i] in _DIGITS:
            whole = whole * 10 + int(s[i])
            if whole > _LIMIT:
                raise invalid
            i += 1
        has_whole = i > 0
        s = s[i:]
        fraction, scale, has_fraction = 0, 1.0, False
        if s and s[0] == ".":
            s = s[1:]
            i, overflow = 0, False
            while i < len(s) and s[i] in _DIGITS:
                # Go keeps the digits that fit in 63 bits and ignores the rest
                if not overflow:
                    bigger = fraction * 10 + int(s[i])
                    if fraction > (_LIMIT - 1) // 10 or bigger > _LIMIT:
                        overflow = True
                    else:
                        fraction, scale = bigger, scale * 10
                i += 1
            has_fraction = i > 0
            s = s[i:]
        if not has_whole and not has_fraction:
            raise invalid
        i = 0
        while i < len(s) and s[i] != "." and s[i] not in _DIGITS:
            i += 1
        if i == 0:
            raise DurationError(f"time: missing unit in duration {_quote(text)}")
        unit_text, s = s[:i], s[i:]
        unit = _UNITS.get(unit_text)
        if unit is None:
            raise DurationError(f"time: unknown unit {_quote(unit_text)} in duration {_quote(text)}")
        if whole > _LIMIT // unit:
            raise invalid
        value = whole * unit
        if fraction > 0:
            # Go's own arithmetic (float64), so a long fraction truncates to the same nanosecond
            value += int(float(fraction) * (float(unit) / scale))
            if value > _LIMIT:
                raise invalid
        total += value
        if total > _LIMIT:
            raise invalid
    if negative:
        return -total
    if total > _LIMIT - 1:
        raise invalid
    return total


def parse_seconds(text: str) -> float:
    """Seconds of a duration setting given either as a Go duration (`5m0s`, as kube's flags take
    them) or as plain seconds (`90`, `0.5`); DurationError (a ValueError) for anything else."""
    if text.replace(".", "", 1).isascii() and text.replace(".", "", 1).isdigit():
        return float(text)
    return parse_duration(text) / 1e9
