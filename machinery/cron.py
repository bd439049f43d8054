"""CronJob schedules, one grammar for the apiserver that checks them and the controller that runs
them: robfig/cron's standard parser, which kube uses for both.

A schedule is five fields (minute, hour, day of month, month, day of week) of `*`, `?`,
numbers, names, ranges, steps and lists; or a descriptor (`@hourly`, `@every 90m`...);
optionally after `TZ=Zone ` or `CRON_TZ=Zone `.  `parse` gives the `Schedule` (when it fires
next) or raises `CronError` with the parser's message, worded as robfig words it (kubectl shows
it verbatim); `schedule_error` gives that message, or "" for a valid schedule.  Day of month and
day of week combine as cron's do: when either field is a star, both must match; otherwise either
may.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from machinery.duration import SECOND_NS, DurationError, parse_duration

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_GO_INT = re.compile(r"^[+-]?[0-9]+$")
SEARCH_LIMIT_DAYS = 366 * 5  # a schedule that never fires (Feb 30) stops the search here
_INT_MAX = 2**63 - 1


class CronError(ValueError):
    """A schedule robfig/cron refuses; the message is robfig's."""


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


def _range(expr: str, bounds: _Bounds) -> tuple[range, bool]:
    """One comma-separated part of a field: its values, and whether it is a star (`*` or `?`
    with no step past 1), which changes how day of month and day of week combine."""
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    star = low_high[0] in ("*", "?")
    if star:
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
        if step > 1:
            star = False
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
    return range(start, end + 1, step), star


def _field(text: str, bounds: _Bounds) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for expr in (part for part in text.split(",") if part):
        found, part_star = _range(expr, bounds)
        values.update(found)
        star = star or part_star
    return frozenset(values), star


_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EVERY = "@every "


@dataclass(frozen=True)
class Schedule:
    """When a schedule fires: the allowed values of each field, or a fixed period (`@every`)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_star: bool
    weekdays_star: bool
    zone: tzinfo
    every_s: int = 0  # @every: whole seconds, at least one (robfig's ConstantDelaySchedule)

    def next_after(self, t: datetime) -> datetime | None:
        """The first firing strictly after `t` (timezone-aware), or None within the search limit."""
        if self.every_s:
            return t.replace(microsecond=0) + timedelta(seconds=self.every_s)
        local = t.astimezone(self.zone).replace(second=0, microsecond=0) + timedelta(minutes=1)
        end = local + timedelta(days=SEARCH_LIMIT_DAYS)
        while local < end:
            if local.month not in self.months:
                year, month = (local.year + 1, 1) if local.month == 12 else (local.year, local.month + 1)
                local = local.replace(year=year, month=month, day=1, hour=0, minute=0)
                continue
            if not self._day_matches(local):
                local = (local + timedelta(days=1)).replace(hour=0, minute=0)
                continue
            if local.hour not in self.hours:
                local = (local + timedelta(hours=1)).replace(minute=0)
                continue
            if local.minute not in self.minutes:
                local += timedelta(minutes=1)
                continue
            return local.astimezone(UTC)
        return None

    def _day_matches(self, d: datetime) -> bool:
        dom = d.day in self.days
        dow = (d.isoweekday() % 7) in self.weekdays
        if self.days_star or self.weekdays_star:
            return dom and dow
        return dom or dow


def _every(spec: str, zone: tzinfo) -> Schedule:
    """`@every <Go duration>`: robfig rounds the period down to whole seconds, and up to one."""
    text = spec[len(_EVERY) :]
    try:
        ns = parse_duration(text)
    except DurationError as e:
        raise CronError(f"failed to parse duration {spec}: {e}") from None
    seconds = ns // SECOND_NS if ns >= SECOND_NS else 1
    empty: frozenset[int] = frozenset()
    return Schedule(empty, empty, empty, empty, empty, True, True, zone, seconds)


def _location(name: str) -> tzinfo:
    if name in ("", "UTC"):
        return UTC
    if name == "Local":
        return datetime.now().astimezone().tzinfo or UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(f"provided bad location {name}: unknown time zone {name}") from None


def parse(spec: str, time_zone: str | None = None) -> Schedule:
    """The schedule `spec` names, in `TZ=`'s zone, else `time_zone` (a CronJob's
    `spec.timeZone`, which validation keeps apart from `TZ=`), else UTC."""
    if not spec:
        raise CronError("empty spec string")
    zone = _location(time_zone) if time_zone else UTC
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        if space < 0:
            raise CronError(f"provided bad location {spec[spec.index('=') + 1 :]}: missing schedule after time zone")
        zone = _location(spec[spec.index("=") + 1 : space])
        spec = spec[space:].strip()
    if spec.startswith("@"):
        if spec.startswith(_EVERY):
            return _every(spec, zone)
        if spec not in _DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {spec}")
        spec = _DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != len(_FIELDS):
        shown = "[" + " ".join(fields) + "]"
        raise CronError(f"expected exactly {len(_FIELDS)} fields, found {len(fields)}: {shown}")
    (minutes, _), (hours, _), (days, days_star), (months, _), (weekdays, weekdays_star) = (
        _field(text, bounds) for text, bounds in zip(fields, _FIELDS, strict=True)
    )
    return Schedule(minutes, hours, days, months, weekdays, days_star, weekdays_star, zone)


def check_schedule(spec: str) -> None:
    """Raise CronError with robfig's message if `spec` is not a standard cron schedule."""
    parse(spec)


def schedule_error(spec: str) -> str:
    try:
        check_schedule(spec)
    except CronError as err:
        return str(err)
    return ""
