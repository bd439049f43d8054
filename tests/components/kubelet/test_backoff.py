"""The crash back-off as kube's kubelet applies it, on a clock the test moves."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.kubelet.backoff import CrashBackOff, crash_loop_message

KEY = "uid-1/app"


def crash_loop(backoff: CrashBackOff, exits: int, runs_for: float = 1.0) -> tuple[list[float], float]:
    """A container that exits `runs_for` seconds after each start: the wait before each
    restart, and the time of the last restart."""
    now, waits = 0.0, []
    for _ in range(exits):
        finished = now + runs_for
        wait = backoff.remaining(KEY, finished, finished)
        waits.append(wait)
        now = finished + wait
        assert backoff.remaining(KEY, finished, now) == 0.0
        backoff.restarted(KEY, finished, now)
    return waits, now


def test_first_restart_is_at_once_then_10s_doubling_to_five_minutes() -> None:
    assert crash_loop(CrashBackOff(), 9)[0] == [0, 10, 20, 40, 80, 160, 300, 300, 300]


def test_the_wait_counts_from_when_the_container_finished() -> None:
    b = CrashBackOff()
    b.restarted(KEY, finished_at=0.0, now=0.0)  # the first restart, at once
    assert b.remaining(KEY, finished_at=100.0, now=104.0) == 6.0
    assert b.remaining(KEY, finished_at=100.0, now=111.0) == 0.0


def test_a_container_that_ran_ten_minutes_starts_over() -> None:
    b = CrashBackOff()
    _, last = crash_loop(b, 6)
    assert b.delay(KEY) == 300.0
    # after 599 s of running the exit still waits out the whole delay ...
    assert b.remaining(KEY, last + 599, last + 599) == 300.0
    # ... after 601 s it is no crash loop any more: restarted at once, and the delay starts over
    assert b.remaining(KEY, last + 601, last + 601) == 0.0
    b.restarted(KEY, last + 601, last + 601)
    assert b.delay(KEY) == 10.0


def test_forget_and_gc_bound_the_memory() -> None:
    b = CrashBackOff()
    for i in range(100):
        b.restarted(f"uid-{i}/c", 0.0, float(i))
    b.forget("uid-0/c")
    assert len(b) == 99
    b.gc(now=650.0)  # those restarted before 50 s are over 600 s ago
    assert len(b) == 50 and b.delay("uid-50/c") == 10.0 and b.delay("uid-49/c") == 0.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1000.0), min_size=1, max_size=30))
def test_the_wait_is_never_negative_nor_over_the_cap(run_times: list[float]) -> None:
    b, now = CrashBackOff(), 0.0
    for run in run_times:
        finished = now + run
        wait = b.remaining(KEY, finished, finished)
        assert 0.0 <= wait <= 300.0
        now = finished + wait
        b.restarted(KEY, finished, now)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="0 < initial <= cap"):
        CrashBackOff(initial=0)
    with pytest.raises(ValueError, match="0 < initial <= cap"):
        CrashBackOff(initial=20, cap=10)


def test_messages_read_as_kube_writes_them() -> None:
    assert crash_loop_message(20, "app", "web-1", "default", "u1") == (
        "back-off 20s restarting failed container=app pod=web-1_default(u1)"
    )
    assert crash_loop_message(80.5, "app", "web-1", "default", "u1").startswith("back-off 1m20s restarting")
    assert crash_loop_message(300, "app", "web-1", "default", "u1").startswith("back-off 5m0s restarting")
