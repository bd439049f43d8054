"""CronJob schedules: robfig/cron's grammar and messages, when a schedule fires, and the field
grammar against a reference model (the apiserver's checker and the controller's evaluator were
two grammars once and disagreed: the evaluator took a day of week 7, the checker refused it)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from machinery.cron import CronError, parse, schedule_error


def at(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("spec", "after", "expected"),
    [
        ("* * * * *", "2026-01-01 10:00", "2026-01-01 10:01"),
        ("*/15 * * * *", "2026-01-01 10:01", "2026-01-01 10:15"),
        ("0 9 * * mon-fri", "2026-01-02 09:00", "2026-01-05 09:00"),  # Friday -> Monday
        ("0 0 1,15 * *", "2026-01-02 00:00", "2026-01-15 00:00"),
        ("0 0 13 * 5", "2026-01-01 00:00", "2026-01-02 00:00"),  # dom or dow: Friday the 2nd
        ("@hourly", "2026-01-01 10:30", "2026-01-01 11:00"),
        ("@monthly", "2026-01-31 00:00", "2026-02-01 00:00"),
        ("30 2 * * *", "2026-02-28 03:00", "2026-03-01 02:30"),
        ("CRON_TZ=Europe/Paris 0 9 * * *", "2026-01-01 07:00", "2026-01-01 08:00"),
        ("0 0 29 2 *", "2026-03-01 00:00", "2028-02-29 00:00"),
    ],
)
def test_next_firing(spec: str, after: str, expected: str) -> None:
    assert parse(spec).next_after(at(after)) == at(expected)


def test_every_and_a_time_zone_field() -> None:
    assert parse("@every 90m").next_after(at("2026-01-01 10:00")) == at("2026-01-01 11:30")
    assert parse("0 9 * * *", "America/New_York").next_after(at("2026-01-01 00:00")) == at("2026-01-01 14:00")
    assert parse("0 0 30 2 *").next_after(at("2026-01-01 00:00")) is None  # never
    for bad in ("* * *", "61 * * * *", "@every x", "TZ=Nowhere/Land * * * * *"):
        with pytest.raises(CronError):
            parse(bad)


def test_every_rounds_to_whole_seconds_as_robfig() -> None:
    """robfig's Every: the period is truncated to seconds, at least one, from the second."""
    start = datetime(2026, 1, 1, 10, 0, 0, 700_000, tzinfo=UTC)
    assert parse("@every 1.9s").next_after(start) == datetime(2026, 1, 1, 10, 0, 1, tzinfo=UTC)
    assert parse("@every 200ms").next_after(start) == datetime(2026, 1, 1, 10, 0, 1, tzinfo=UTC)
    assert parse("@every 0").every_s == 1
    assert schedule_error("@every 1") == 'failed to parse duration @every 1: time: missing unit in duration "1"'
    assert schedule_error("@every .s") == 'failed to parse duration @every .s: time: invalid duration ".s"'


def test_star_with_a_step_is_not_a_star() -> None:
    """robfig: `*/2` in day of month is a restriction (day of month OR day of week), `*/1` a star."""
    thursday_1st = at("2026-01-01 00:00")
    assert parse("0 0 */2 * 5").next_after(thursday_1st) == at("2026-01-02 00:00")  # 2nd: a Friday, not odd
    assert parse("0 0 */1 * 5").next_after(thursday_1st) == at("2026-01-02 00:00")  # both: Friday the 2nd
    assert parse("0 0 */1 * 1").next_after(thursday_1st) == at("2026-01-05 00:00")  # only Mondays


def test_day_of_week_seven_is_refused_as_robfig() -> None:
    assert schedule_error("0 0 * * 7") == "end of range (7) above maximum (6): 7"


@st.composite
def _part(draw: st.DrawFn) -> tuple[str, set[int] | None]:
    """A part of the minute field and the minutes it means (None: robfig refuses it)."""
    a, b = draw(st.integers(0, 70)), draw(st.integers(0, 70))
    step = draw(st.integers(0, 25))
    shape = draw(st.sampled_from(["n", "a-b", "n/s", "a-b/s", "*/s", "*"]))
    text = {"n": f"{a}", "a-b": f"{a}-{b}", "n/s": f"{a}/{step}", "a-b/s": f"{a}-{b}/{step}", "*/s": f"*/{step}"}.get(
        shape, "*"
    )
    start = 0 if shape.startswith("*") else a
    end = {"n": a, "a-b": b, "a-b/s": b}.get(shape, 59)
    every = step if "/" in shape else 1
    if end > 59 or start > end or every == 0:
        return text, None
    return text, set(range(start, end + 1, every))


@settings(max_examples=300, deadline=None)
@given(st.lists(_part(), min_size=1, max_size=3))
def test_minute_field_against_a_model(parts: list[tuple[str, set[int] | None]]) -> None:
    spec = ",".join(text for text, _ in parts) + " * * * *"
    if any(want is None for _, want in parts):
        with pytest.raises(CronError):
            parse(spec)
        return
    expected: set[int] = set().union(*(want for _, want in parts if want is not None))
    assert parse(spec).minutes == expected
    # and it fires at the first such minute after the hour
    first = parse(spec).next_after(at("2026-01-01 09:59"))
    assert first is not None and first.minute == min(expected)
