"""When a cron schedule fires (pure).  The apiserver has already checked the schedule's syntax
(`apiserver/cron.py`); this evaluates it: five fields (minute hour day-of-month month
day-of-week) of `*`, `?`, numbers, names, ranges, steps and lists, descriptors (`@hourly`,
`@every 90m` ...), and `TZ=`/`CRON_TZ=` or the CronJob's `timeZone`.  Day of month and day
of week combine as cron's do: when both are restricted, either may match."""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DURATION = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
SEARCH_LIMIT_DAYS = 366 * 5  # a schedule that never fires (Feb 30) stops the search here


class ScheduleError(ValueError):
    pass


@dataclass(frozen=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_star: bool
    weekdays_star: bool
    zone: tzinfo
    every_s: float = 0.0  # @every: a fixed period instead of the fields

    def next_after(self, t: datetime) -> datetime | None:
        """The first firing strictly after `t` (timezone-aware), or None within the search limit."""
        if self.every_s:
            return t + timedelta(seconds=self.every_s)
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


def parse(spec: str, time_zone: str | None = None) -> Schedule:
    """ScheduleError when it cannot be evaluated (the apiserver refuses those already)."""
    text = spec.strip()
    zone_name = time_zone
    for prefix in ("CRON_TZ=", "TZ="):
        if text.startswith(prefix):
            zone_name, _, text = text[len(prefix) :].partition(" ")
            text = text.strip()
    try:
        zone: tzinfo = zoneinfo.ZoneInfo(zone_name) if zone_name else UTC
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown time zone {zone_name!r}") from None
    if text.startswith("@every "):
        period = _duration(text[len("@every ") :].strip())
        if period <= 0:
            raise ScheduleError(f"@every needs a positive duration: {text!r}")
        return Schedule(frozenset(), frozenset(), frozenset(), frozenset(), frozenset(), True, True, zone, period)
    text = _DESCRIPTORS.get(text, text)
    fields = text.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected 5 fields, found {len(fields)}: {spec!r}")
    minute, hour, dom, month, dow = fields
    weekdays = _field(dow, 0, 7, _DAYS)
    if 7 in weekdays:
        weekdays = (weekdays - {7}) | {0}
    return Schedule(
        _field(minute, 0, 59),
        _field(hour, 0, 23),
        _field(dom, 1, 31),
        _field(month, 1, 12, _MONTHS, offset=1),
        frozenset(weekdays),
        dom in ("*", "?"),
        dow in ("*", "?"),
        zone,
    )


def _field(text: str, low: int, high: int, names: tuple[str, ...] = (), offset: int = 0) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        rng, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if step <= 0:
            raise ScheduleError(f"step must be positive: {part!r}")
        if rng in ("*", "?"):
            start, stop = low, high
        elif "-" in rng:
            a, b = rng.split("-", 1)
            start, stop = _value(a, names, offset), _value(b, names, offset)
        else:
            start = _value(rng, names, offset)
            stop = high if step_text else start
        if not low <= start <= stop <= high:
            raise ScheduleError(f"{part!r} is out of {low}-{high}")
        values.update(range(start, stop + 1, step))
    return frozenset(values)


def _value(text: str, names: tuple[str, ...], offset: int) -> int:
    lowered = text.lower()
    if lowered in names:
        return names.index(lowered) + offset
    if not text.isdigit():
        raise ScheduleError(f"not a number or a name: {text!r}")
    return int(text)


def _duration(text: str) -> float:
    total, pos = 0.0, 0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            raise ScheduleError(f"not a duration: {text!r}")
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise ScheduleError(f"not a duration: {text!r}")
    return total
