"""CronJob schedules checked as kube-apiserver checks them (robfig/cron's standard parser):
five fields (minute, hour, day of month, month, day of week) of `*`, `?`, numbers, names,
ranges, steps and lists; or a descriptor (`@hourly`, `@every 90m`...); optionally after
`TZ=Zone ` or `CRON_TZ=Zone `.  `schedule_error` returns the parser's message, worded as robfig
words it (kubectl shows it verbatim), or "" for a valid schedule.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass

DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_GO_INT = re.compile(r"^[+-]?[0-9]+$")
_GO_DURATION = re.compile(r"^[+-]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$")
_INT_MAX = 2**63 - 1


class CronError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class _Bounds:
    low: int
    high: int
    names: tuple[str, ...] = ()
    first_name: int = 0  # the value of names[0]


_FIELDS = (
    _Bounds(0, 59),
    _Bounds(0, 23),
    _Bounds(1, 31),
    _Bounds(1, 12, _MONTHS, 1),
    _Bounds(0, 6, _DAYS, 0),
)


def _atoi(text: str) -> int:
    """strconv.Atoi, with its error text."""
    if not _GO_INT.match(text) or abs(int(text)) > _INT_MAX:
        reason = "value out of range" if _GO_INT.match(text) else "invalid syntax"
        raise CronError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": {reason}')
    return int(text)


def _number(text: str) -> int:
    num = _atoi(text)
    if num < 0:
        raise CronError(f"negative number ({num}) not allowed: {text}")
    return num


def _int_or_name(text: str, bounds: _Bounds) -> int:
    lowered = text.lower()
    if lowered in bounds.names:
        return bounds.names.index(lowered) + bounds.first_name
    return _number(text)


def _check_range(expr: str, bounds: _Bounds) -> None:
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    if low_high[0] in ("*", "?"):
        start, end = bounds.low, bounds.high
    else:
        start = _int_or_name(low_high[0], bounds)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _int_or_name(low_high[1], bounds)
        else:
            raise CronError(f"too many hyphens: {expr}")
    step = 1
    if len(range_and_step) == 2:
        step = _number(range_and_step[1])
        if len(low_high) == 1:
            end = bounds.high  # "N/step" means "N-max/step"
    elif len(range_and_step) > 2:
        raise CronError(f"too many slashes: {expr}")
    if start < bounds.low:
        raise CronError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr}")
    if end > bounds.high:
        raise CronError(f"end of range ({end}) above maximum ({bounds.high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")


def _check_descriptor(spec: str) -> None:
    if spec in DESCRIPTORS:
        return
    if spec.startswith("@every "):
        duration = spec[len("@every ") :]
        if not _GO_DURATION.match(duration) or duration in ("+", "-"):
            raise CronError(f'failed to parse duration {spec}: time: invalid duration "{duration}"')
        return
    raise CronError(f"unrecognized descriptor: {spec}")


def _check_location(name: str) -> None:
    if name in ("", "UTC", "Local"):
        return
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(f"provided bad location {name}: unknown time zone {name}") from None


def check_schedule(spec: str) -> None:
    """Raise CronError with robfig's message if `spec` is not a standard cron schedule."""
    if not spec:
        raise CronError("empty spec string")
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        if space < 0:
            raise CronError(f"provided bad location {spec[spec.index('=') + 1 :]}: missing schedule after time zone")
        _check_location(spec[spec.index("=") + 1 : space])
        spec = spec[space:].strip()
    if spec.startswith("@"):
        _check_descriptor(spec)
        return
    fields = spec.split()
    if len(fields) != len(_FIELDS):
        shown = "[" + " ".join(fields) + "]"
        raise CronError(f"expected exactly {len(_FIELDS)} fields, found {len(fields)}: {shown}")
    for text, bounds in zip(fields, _FIELDS, strict=True):
        for expr in (part for part in text.split(",") if part):
            _check_range(expr, bounds)


def schedule_error(spec: str) -> str:
    try:
        check_schedule(spec)
    except CronError as err:
        return str(err)
    return ""
