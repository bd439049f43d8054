"""The in-flight seats: priority levels by who asks, and each user's fair share within a level."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.auth.user import User
from apiserver.errors import StatusError
from apiserver.http.inflight import EXEMPT, SYSTEM, WORKLOAD, InFlight, InFlightLimits, Seat, pool_of

EVE, BOB, CAROL = User("eve", ("system:authenticated",)), User("bob"), User("carol")
ADMIN = User("admin", ("system:masters",))
CONTROLLERS = User("system:kube-controller-manager")
NODE = User("system:node:n1", ("system:nodes",))


def take(seats: InFlight, kind: str, user: User, n: int) -> list[Seat]:
    """Up to `n` seats, stopping at the first 429."""
    got: list[Seat] = []
    for _ in range(n):
        try:
            got.append(seats.acquire(kind, user))
        except StatusError as e:
            assert (e.code, e.reason) == (429, "TooManyRequests")
            assert e.details == {"retryAfterSeconds": 1}
            break
    return got


def test_pools_by_user_and_group() -> None:
    assert pool_of(ADMIN) == EXEMPT
    assert pool_of(CONTROLLERS) == SYSTEM and pool_of(NODE) == SYSTEM
    assert pool_of(User("system:serviceaccount:kube-system:replicaset-controller")) == SYSTEM
    assert pool_of(User("system:serviceaccount:default:app")) == WORKLOAD
    assert pool_of(EVE) == WORKLOAD and pool_of(None) == WORKLOAD


def test_alone_a_user_gets_half_and_the_next_user_the_rest_of_its_share() -> None:
    seats = InFlight(InFlightLimits(watches=200, floor=5))
    assert len(take(seats, "watch", EVE, 400)) == 100
    # bob is the second user: his share is 200 // 3 = 66, and the pool has 100 free
    assert len(take(seats, "watch", BOB, 400)) == 66
    # eve is over her new share (66): refused until she is back under it
    with pytest.raises(StatusError) as err:
        seats.acquire("watch", EVE)
    assert "for user 'eve' (its fair share: 66 of 200)" in err.value.message  # 200 // (1 other + 2)
    assert len(take(seats, "watch", CAROL, 400)) == 34  # what is left of the pool (share 50)
    with pytest.raises(StatusError) as err:
        seats.acquire("watch", User("dave"))
    assert "for workload users (limit 200)" in err.value.message


def test_the_system_and_exempt_pools_are_untouched_by_users() -> None:
    seats = InFlight(InFlightLimits(watches=50, floor=5))
    take(seats, "watch", EVE, 100)
    take(seats, "watch", BOB, 100)
    assert len(take(seats, "watch", CONTROLLERS, 100)) == 50  # a control-plane component is not shared per user
    assert len(take(seats, "watch", NODE, 100)) == 0  # ... and the pool is the system pool: now full
    assert len(take(seats, "watch", ADMIN, 100)) == 50  # exempt: its own ceiling, no share


def test_the_floor_holds_when_many_users_are_active() -> None:
    seats = InFlight(InFlightLimits(reads=100, floor=10))
    for i in range(9):
        take(seats, "read", User(f"u{i}"), 1)
    assert seats.share("read", EVE) == 10  # 100 // 11 = 9, raised to the floor
    assert len(take(seats, "read", EVE, 50)) == 10


def test_release_is_idempotent_and_an_idle_user_stops_counting() -> None:
    seats = InFlight(InFlightLimits(writes=10, floor=1))
    held = take(seats, "write", EVE, 10)
    assert len(held) == 5 and seats.share("write", BOB) == 3  # eve is active: 10 // 3
    for seat in held:
        seat.release()
        seat.release()
    assert seats.current("write") == 0 and seats.held_by("write", EVE) == 0
    assert seats.share("write", BOB) == 5


def test_admit_gives_the_seat_back_on_error() -> None:
    seats = InFlight(InFlightLimits(reads=4, floor=1))
    with pytest.raises(RuntimeError), seats.admit("read", EVE):
        raise RuntimeError("boom")
    assert seats.current("read") == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["eve", "bob", "carol", "admin"]), st.booleans()), max_size=300))
def test_no_sequence_breaks_the_limits(ops: list[tuple[str, bool]]) -> None:
    """Whatever users do: a pool never holds more than its limit; a user holding nothing gets a
    seat whenever its pool has one free; a refused acquire changes nothing."""
    users = {"eve": EVE, "bob": BOB, "carol": CAROL, "admin": ADMIN}
    seats = InFlight(InFlightLimits(watches=12, floor=2))
    held: dict[str, list[Seat]] = {name: [] for name in users}
    for name, acquire in ops:
        user = users[name]
        if acquire:
            pool = pool_of(user)
            before = seats.current("watch", pool)
            try:
                held[name].append(seats.acquire("watch", user))
            except StatusError:
                assert seats.current("watch", pool) == before
                assert held[name] or before >= 12, "a user with no seats was refused while its pool had room"
        elif held[name]:
            held[name].pop().release()
        for pool in (EXEMPT, WORKLOAD):
            assert seats.current("watch", pool) <= 12
        workload = [n for n in ("eve", "bob", "carol") if held[n]]
        assert sum(len(held[n]) for n in workload) == seats.current("watch", WORKLOAD)
