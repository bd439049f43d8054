"""LeaderElector's promises on a fake clock against an in-memory Lease endpoint that behaves like
the apiserver's (resourceVersions, Conflict on a stale one, NotFound, AlreadyExists): one leader
at a time, take-over only after a lease of silence measured on the standby's own clock (never
from renewTime), at once after a release, and a leader that cannot renew stops in time."""

from __future__ import annotations

import asyncio
import copy
import itertools
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from components.client.leaderelection import LeaderElector, micro_time
from components.client.rest import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    InvalidError,
    NotFoundError,
    ServerError,
    TransportError,
)
from machinery.objects import Obj
from tests.components.fakeclock import FakeClock

TIMEOUT = 10.0  # real seconds: a hang fails the test instead of stalling the suite
EPOCH = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"
LEASE_S, RENEW_S, RETRY_S = 15.0, 10.0, 2.0  # client-go's defaults
MAX_POLL_S = RETRY_S * 2.2  # a campaign sleeps retry_period * (1 + U[0, 1.2))
STEP = 0.125  # exact in binary: fake time sums without rounding error


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(TIMEOUT):
            await test()

    asyncio.run(bounded())


async def settle(ticks: int = 30) -> None:
    for _ in range(ticks):
        await asyncio.sleep(0)


async def step(clock: FakeClock) -> None:
    await clock.advance(STEP)
    await settle()


async def run_for(clock: FakeClock, seconds: float) -> None:
    """Small steps: one big advance would wake a sleeper before the previous one's work is done."""
    for _ in range(round(seconds / STEP)):
        await step(clock)


class FakeApiserver:
    """The Lease endpoints, shared by every candidate; `writes` records (fake time, holder)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.objects: dict[str, Obj] = {}
        self.rv = 0
        self.writes: list[tuple[float, str]] = []

    def lease(self) -> Obj:
        return self.objects[LEASE]

    def spec(self) -> Obj:
        return dict(self.lease()["spec"])

    def client(self) -> FakeClient:
        return FakeClient(self)

    def store(self, key: str, body: Obj) -> Obj:
        spec = body.get("spec") or {}
        if not isinstance(spec.get("leaseDurationSeconds"), int) or spec["leaseDurationSeconds"] <= 0:
            raise InvalidError(422, "Invalid", "spec.leaseDurationSeconds: must be greater than 0")
        self.rv += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[key] = obj
        self.writes.append((self.clock.now(), spec.get("holderIdentity", "")))
        return copy.deepcopy(obj)

    def force(self, **spec: Any) -> None:
        """Someone else (an admin) writes the Lease."""
        self.store(LEASE, self.lease() | {"spec": self.spec() | spec})


class FakeClient:
    """One candidate's connection: `fail` makes every call raise it, `hang` makes it never answer."""

    def __init__(self, server: FakeApiserver) -> None:
        self.server = server
        self.fail: ApiError | TransportError | None = None
        self.hang = False
        self.gets: list[float] = []

    async def _gate(self) -> None:
        await asyncio.sleep(0)  # let other candidates interleave between a read and a write
        if self.hang:
            await asyncio.get_running_loop().create_future()  # until cancelled
        if self.fail is not None:
            raise self.fail

    async def get(self, path: str) -> Obj:
        await self._gate()
        self.gets.append(self.server.clock.now())
        if path not in self.server.objects:
            raise NotFoundError(404, "NotFound", f"{path} not found")
        return copy.deepcopy(self.server.objects[path])

    async def create(self, path: str, body: Obj) -> Obj:
        await self._gate()
        key = f"{path}/{body['metadata']['name']}"
        if key in self.server.objects:
            raise AlreadyExistsError(409, "AlreadyExists", f"{key} already exists")
        return self.server.store(key, body)

    async def replace(self, path: str, body: Obj) -> Obj:
        await self._gate()
        current = self.server.objects.get(path)
        if current is None:
            raise NotFoundError(404, "NotFound", f"{path} not found")
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ConflictError(409, "Conflict", "the object has been modified")
        return self.server.store(path, body)


class Candidate:
    """An elector with its own client, wall clock and a record of what its callbacks saw."""

    def __init__(self, server: FakeApiserver, name: str, *, skew: float = 0.0, seed: int = 0, **options: Any) -> None:
        self.client = server.client()
        clock = server.clock
        self.started = self.cancelled = self.stopped = 0
        self.working = False
        self.leaders: list[str] = []
        self.elector = LeaderElector(
            self.client,
            "kube-scheduler",
            identity=name,
            lease_duration=LEASE_S,
            renew_deadline=RENEW_S,
            retry_period=RETRY_S,
            on_started_leading=options.pop("on_started_leading", self.work),
            on_stopped_leading=self.on_stopped,
            on_new_leader=self.leaders.append,
            clock=clock,
            rng=random.Random(seed),
            wall=lambda: EPOCH + timedelta(seconds=clock.now() + skew),
            **options,
        )
        self.task: asyncio.Task[None] | None = None

    async def work(self) -> None:
        self.started += 1
        self.working = True
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.working = False

    def on_stopped(self) -> None:
        self.stopped += 1

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run())

    async def stop(self) -> None:
        """Cancel run() (a run() that already returned, having lost, stays returned)."""
        assert self.task is not None
        returned = self.task.done()
        self.task.cancel()
        await asyncio.wait({self.task})
        assert self.task.cancelled() != returned

    @property
    def leads(self) -> bool:
        return self.elector.is_leader()


def leaders(*candidates: Candidate) -> list[str]:
    """Who believes it leads; also checks that belief and running work agree."""
    for c in candidates:
        assert c.leads == c.working, f"{c.elector.identity}: leads={c.leads} working={c.working}"
    return [c.elector.identity for c in candidates if c.leads]


async def until_leader(clock: FakeClock, c: Candidate, limit: float, *others: Candidate) -> float:
    """Step until `c` leads (checking there is never a second leader); the fake time it took."""
    start = clock.now()
    while not c.leads:
        assert clock.now() - start <= limit, f"{c.elector.identity} did not lead within {limit}s"
        await step(clock)
        assert len(leaders(c, *others)) <= 1
    return clock.now() - start


def last_write_by(server: FakeApiserver, holder: str) -> float:
    return max(t for t, h in server.writes if h == holder)


# -- one candidate ---------------------------------------------------------------------------


def test_a_single_candidate_creates_the_lease_and_renews_it_every_retry_period() -> None:
    async def go() -> None:
        clock = FakeClock()
        server = FakeApiserver(clock)
        a = Candidate(server, "a")
        a.start()
        await settle()
        assert a.leads and a.elector.leader() == "a" and a.leaders == ["a"] and a.started == 1
        stamp = micro_time(EPOCH)
        assert server.spec() == {
            "holderIdentity": "a",
            "leaseDurationSeconds": 15,
            "leaseTransitions": 0,
            "acquireTime": stamp,
            "renewTime": stamp,
        }
        for _ in range(int(30 / STEP)):
            await step(clock)
            assert leaders(a) == ["a"]
        times = [t for t, _ in server.writes]
        assert [round(b - a, 6) for a, b in itertools.pairwise(times)] == [RETRY_S] * 15
        spec = server.spec()
        assert spec["renewTime"] == "2026-12-01T10:00:30.000000Z" and spec["acquireTime"] == stamp
        assert spec["leaseTransitions"] == 0 and server.lease()["metadata"]["resourceVersion"] == "16"
        assert a.leaders == ["a"] and a.started == 1  # renewals are not new leaderships

        await a.stop()
        assert (a.cancelled, a.stopped) == (1, 1) and not a.elector.is_leader()
        assert server.spec()["holderIdentity"] == "" and server.spec()["leaseDurationSeconds"] == 1
        assert server.spec()["leaseTransitions"] == 0

    run(go)


def test_micro_time_is_rfc3339_utc_with_six_fractional_digits() -> None:
    assert micro_time(datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)) == "2026-12-01T10:00:00.123456Z"
    plus_two = timezone(timedelta(hours=2))
    assert micro_time(datetime(2026, 12, 1, 12, 0, 0, tzinfo=plus_two)) == "2026-12-01T10:00:00.000000Z"


# -- two candidates --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_two_candidates_started_together_exactly_one_leads_at_every_step(seed: int) -> None:
    async def go() -> None:
        clock = FakeClock()
        server = FakeApiserver(clock)
        a, b = Candidate(server, "a", seed=seed), Candidate(server, "b", seed=seed + 100)
        a.start()
        b.start()  # both read NotFound, both create: one gets AlreadyExists
        await settle()
        first = leaders(a, b)
        assert len(first) == 1
        for _ in range(int(120 / STEP)):
            await step(clock)
            assert leaders(a, b) == first
            assert server.spec()["holderIdentity"] == first[0]
            if clock.now() > MAX_POLL_S:  # the loser of the create has read the Lease since
                assert a.elector.leader() == b.elector.leader() == first[0]
        assert server.spec()["leaseTransitions"] == 0
        standby = b if first == ["a"] else a
        assert standby.started == 0 and standby.leaders == first
        gaps = [y - x for x, y in itertools.pairwise(standby.client.gets)]
        assert gaps and all(RETRY_S <= g <= MAX_POLL_S + STEP for g in gaps)  # jittered polling
        await a.stop()
        await b.stop()

    run(go)


@pytest.mark.parametrize("fault", ["transport", "server-error", "hang"])
def test_the_standby_takes_over_only_after_a_lease_duration_without_renewals(fault: str) -> None:
    """The leader's connection breaks: it stops leading renew_deadline after its last renewal;
    the standby takes over no sooner than lease_duration after it (fake time), and soon after."""

    async def go() -> None:
        clock = FakeClock()
        server = FakeApiserver(clock)
        a, b = Candidate(server, "a"), Candidate(server, "b")
        a.start()
        await settle()
        b.start()
        await run_for(clock, 7.0)
        assert leaders(a, b) == ["a"]
        if fault == "hang":
            a.client.hang = True
        else:
            a.client.fail = TransportError("boom") if fault == "transport" else ServerError(500, "InternalError", "x")
        renewed = last_write_by(server, "a")
        lost_at = None
        while not b.leads:
            await step(clock)
            assert len(leaders(a, b)) <= 1
            if lost_at is None and not a.leads:
                lost_at = clock.now()
                assert a.cancelled == 1
            assert clock.now() - renewed < LEASE_S + 2 * MAX_POLL_S, "the standby never took over"
        took_over = clock.now()
        assert lost_at is not None and renewed + RENEW_S <= lost_at <= renewed + RENEW_S + STEP
        assert took_over >= renewed + LEASE_S  # never before a lease of silence
        assert took_over <= renewed + LEASE_S + 2 * MAX_POLL_S + STEP  # the standby sees it, then polls
        assert server.spec()["holderIdentity"] == "b" and server.spec()["leaseTransitions"] == 1
        assert b.leaders == ["a", "b"] and b.started == 1
        await settle()
        await run_for(clock, RENEW_S)  # a hung release gives up after renew_deadline
        assert a.task is not None and a.task.done() and a.task.result() is None  # run() returned
        assert (a.started, a.cancelled, a.stopped) == (1, 1, 1)
        await b.stop()

    run(go)


def test_a_release_hands_over_at_once_and_counts_a_transition() -> None:
    async def go() -> None:
        clock = FakeClock()
        server = FakeApiserver(clock)
        a, b = Candidate(server, "a"), Candidate(server, "b", seed=7)
        a.start()
        await settle()
        b.start()
        await run_for(clock, 20.0)
        assert leaders(a, b) == ["a"]
        await a.stop()
        assert server.spec()["holderIdentity"] == "" and not a.leads and a.stopped == 1
        took = await until_leader(clock, b, MAX_POLL_S + STEP, a)
        assert took <= MAX_POLL_S + STEP < LEASE_S
        assert server.spec()["holderIdentity"] == "b" and server.spec()["leaseTransitions"] == 1
        await b.stop()

    run(go)


def test_without_release_on_cancel_the_standby_waits_a_whole_lease() -> None:
    async def go() -> None:
        clock = FakeClock()
        server = FakeApiserver(clock)
        a, b = Candidate(server, "a", release_on_cancel=False), Candidate(server, "b")
        a.start()
        await settle()
        b.start()
        await run_for(clock, 5.0)
        renewed = last_write_by(server, "a")
        await a.stop()
        assert server.spec()["holderIdentity"] == "a" and a.cancelled == 1 and a.stopped == 1
        await until_leader(clock, b, LEASE_S + 2 * MAX_POLL_S, a)
        assert clock.now() >= renewed + LEASE_S
        await b.stop()

    run(go)


@pytest.mark.parametrize("skew", [-3600.0, 3600.0])
def test_clock_skew_in_renew_time_does_not_matter(skew: float) -> None:
    """The leader's wall clock is an hour off: its renewTime looks long expired (or far in the
    future) to the standby, which neither takes over early nor waits an hour."""

    async def go() -> None:
        clock = FakeClock()
        server = FakeApiserver(clock)
        a, b = Candidate(server, "a", skew=skew), Candidate(server, "b")
        a.start()
        await settle()
        b.start()
        for _ in range(int(60 / STEP)):
            await step(clock)
            assert leaders(a, b) == ["a"]
        assert server.spec()["renewTime"] == micro_time(EPOCH + timedelta(seconds=clock.now() + skew))
        a.client.fail = TransportError("partitioned")
        renewed = last_write_by(server, "a")
        await until_leader(clock, b, LEASE_S + 2 * MAX_POLL_S + STEP, a)
        assert renewed + LEASE_S <= clock.now() <= renewed + LEASE_S + 2 * MAX_POLL_S + STEP
        a.client.fail = None
        await a.stop()
        await b.stop()

    run(go)


# -- losing and failing ----------------------------------------------------------------------


def test_a_leader_that_cannot_renew_stops_at_the_deadline_and_logs_the_failure_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def go() -> None:
        clock = FakeClock()
        server = FakeApiserver(clock)
        a = Candidate(server, "a")
        a.start()
        await run_for(clock, 6.0)
        a.client.fail = ServerError(503, "ServiceUnavailable", "store unavailable")
        renewed = last_write_by(server, "a")
        while clock.now() < renewed + RENEW_S - STEP / 2:
            assert leaders(a) == ["a"] and a.task is not None and not a.task.done()
            await step(clock)
        await step(clock)
        assert leaders(a) == [] and (a.cancelled, a.stopped) == (1, 1)
        assert a.task is not None and a.task.done() and a.task.result() is None
        warned = [r for r in caplog.records if r.levelno >= logging.WARNING and "ServerError" in r.getMessage()]
        assert len(warned) == 1, [r.getMessage() for r in warned]

    with caplog.at_level(logging.WARNING, logger="raftkube.client.leaderelection"):
        run(go)


def test_a_leader_that_sees_another_holder_stops_at_once() -> None:
    async def go() -> None:
        clock = FakeClock()
        server = FakeApiserver(clock)
        a = Candidate(server, "a")
        a.start()
        await run_for(clock, 3.0)
        server.force(holderIdentity="intruder")
        await run_for(clock, RETRY_S)
        assert not a.leads and a.cancelled == 1 and a.elector.leader() == "intruder"
        assert a.task is not None and a.task.done()
        assert server.spec()["holderIdentity"] == "intruder"  # the release saw it was not ours

    run(go)


def test_transient_errors_while_campaigning_are_retried() -> None:
    async def go() -> None:
        clock = FakeClock()
        server = FakeApiserver(clock)
        a = Candidate(server, "a")
        a.client.fail = TransportError("connection refused")
        a.start()
        for _ in range(int(10 / STEP)):
            await step(clock)
        assert not a.leads and a.task is not None and not a.task.done()
        a.client.fail = None
        await until_leader(clock, a, MAX_POLL_S + STEP)
        await a.stop()

    run(go)


def test_on_started_leading_failing_ends_run_with_its_error_and_releases() -> None:
    async def boom() -> None:
        raise RuntimeError("scheduler crashed")

    async def go() -> None:
        clock = FakeClock()
        server = FakeApiserver(clock)
        a = Candidate(server, "a", on_started_leading=boom)
        a.start()
        await settle()
        assert a.task is not None and a.task.done()
        with pytest.raises(RuntimeError, match="scheduler crashed"):
            a.task.result()
        assert not a.elector.is_leader() and a.stopped == 1
        assert server.spec()["holderIdentity"] == ""

    run(go)


def test_random_faults_never_make_two_leaders() -> None:
    """Three candidates; now and then one's connection fails or hangs for a while."""

    async def go() -> None:
        clock = FakeClock()
        server = FakeApiserver(clock)
        rng = random.Random(42)
        cs = [Candidate(server, name, seed=i) for i, name in enumerate("abc")]
        for c in cs:
            c.start()
        healed_at: dict[int, float] = {}
        transitions = 0
        for _ in range(int(300 / STEP)):
            await step(clock)
            assert len(leaders(*cs)) <= 1
            if rng.random() < 0.01:
                i = rng.randrange(3)
                cs[i].client.hang = rng.random() < 0.5
                cs[i].client.fail = None if cs[i].client.hang else TransportError("flaky")
                healed_at[i] = clock.now() + rng.uniform(1, 25)
            for i, t in list(healed_at.items()):
                if clock.now() >= t:
                    cs[i].client.hang, cs[i].client.fail = False, None
                    del healed_at[i]
            for c in cs:
                if c.task is not None and c.task.done():  # lost leadership: campaign again
                    c.start()
            transitions = server.spec()["leaseTransitions"]
        assert transitions >= 3  # the faults did move the lease around
        for c in cs:
            c.client.hang, c.client.fail = False, None
            await c.stop()

    run(go)


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"lease_duration": 0}, "lease_duration must be greater than zero"),
        ({"renew_deadline": -1}, "renew_deadline must be greater than zero"),
        ({"retry_period": 0}, "retry_period must be greater than zero"),
        ({"lease_duration": 10, "renew_deadline": 10}, r"lease_duration \(10\) must be greater than renew_deadline"),
        ({"renew_deadline": 2.4, "retry_period": 2}, r"renew_deadline \(2.4\) must be .* retry_period \* 1.2"),
        ({"identity": ""}, "identity must not be empty"),
    ],
)
def test_parameters_are_validated_by_name(options: dict[str, Any], message: str) -> None:
    server = FakeApiserver(FakeClock())
    with pytest.raises(ValueError, match=message):
        LeaderElector(server.client(), "kube-scheduler", **options)


def test_the_default_identity_is_the_hostname_and_a_random_suffix() -> None:
    import socket

    server = FakeApiserver(FakeClock())
    one, two = (LeaderElector(server.client(), "kube-scheduler") for _ in range(2))
    assert one.identity.startswith(socket.gethostname() + "_") and one.identity != two.identity
    assert (one.lease_duration, one.renew_deadline, one.retry_period) == (15.0, 10.0, 2.0)
    assert one.namespace == "kube-system" and one.release_on_cancel
