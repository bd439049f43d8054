"""Leader election against a real apiserver on a real store, with the scheduler's own identity
(its RBAC: create leases, get/update the one named kube-scheduler) and the real clock: exactly
one of two electors leads, a release hands over within a second, and a crashed leader (no
release) is replaced after about the lease duration, not before."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from apiserver.pki import ApiserverPKI
from components.client import kubeconfig
from components.client.kubeconfig import ClientConfig
from components.client.leaderelection import LeaderElector
from components.client.rest import RestClient, path_of
from tests.apiserver.support import ApiserverUnderTest

LEASE_S, RENEW_S, RETRY_S = 2.0, 1.5, 0.2
MAX_POLL_S = RETRY_S * 2.2  # a campaign sleeps retry_period * (1 + U[0, 1.2))
LEASE = path_of("coordination.k8s.io", "v1", "leases", "kube-system", "kube-scheduler")
TEST_TIMEOUT = 12.0  # real seconds for one test's body


@pytest.fixture
def scheduler_config(cluster: ApiserverUnderTest) -> ClientConfig:
    return kubeconfig.load(ApiserverPKI.of(cluster.data_dir).kubeconfig_of("scheduler"))


class Watched:
    """Electors running as tasks, sampled every few milliseconds for two leaders at once."""

    def __init__(self) -> None:
        self.electors: list[LeaderElector] = []
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.most_at_once = 0

    def start(self, elector: LeaderElector) -> LeaderElector:
        self.electors.append(elector)
        self.tasks[elector.identity] = asyncio.create_task(elector.run())
        return elector

    def leaders(self) -> list[LeaderElector]:
        return [e for e in self.electors if e.is_leader()]

    async def sample(self) -> None:
        while True:
            self.most_at_once = max(self.most_at_once, len(self.leaders()))
            await asyncio.sleep(0.005)

    async def stop(self, elector: LeaderElector) -> None:
        task = self.tasks[elector.identity]
        task.cancel()
        await asyncio.wait({task})
        assert task.cancelled(), "run() ended on its own"

    async def until(self, what: str, done: Callable[[], bool], limit: float) -> float:
        """Seconds until `done()`; fails after `limit`."""
        start = time.monotonic()
        while not done():
            assert time.monotonic() - start < limit, f"{what}: not within {limit}s"
            await asyncio.sleep(0.01)
        return time.monotonic() - start


@asynccontextmanager
async def watched(config: ClientConfig, clients: int) -> AsyncIterator[tuple[Watched, list[RestClient]]]:
    """Electors' clients (closed at the end) and the sampler; every elector is stopped at the end."""
    w = Watched()
    opened = [RestClient(config) for _ in range(clients)]
    sampler = asyncio.create_task(w.sample())
    try:
        async with asyncio.timeout(TEST_TIMEOUT):
            yield w, opened
    finally:
        for task in [*w.tasks.values(), sampler]:
            task.cancel()
        await asyncio.wait({*w.tasks.values(), sampler})
        for c in opened:
            await c.close()


def elector(client: RestClient) -> LeaderElector:
    return LeaderElector(client, "kube-scheduler", lease_duration=LEASE_S, renew_deadline=RENEW_S, retry_period=RETRY_S)


def test_exactly_one_of_two_leads_and_a_release_hands_over_within_a_second(scheduler_config: ClientConfig) -> None:
    async def go() -> None:
        async with watched(scheduler_config, 3) as (w, clients):
            a, b = w.start(elector(clients[0])), w.start(elector(clients[1]))
            await w.until("a leader", lambda: len(w.leaders()) == 1, LEASE_S + 2 * MAX_POLL_S + 1)
            first = w.leaders()[0]
            await asyncio.sleep(0.6)  # three renewals: still the same single leader
            assert w.leaders() == [first] and w.most_at_once == 1
            lease = await clients[2].get(LEASE)
            assert lease["spec"]["holderIdentity"] == first.identity
            assert lease["spec"]["leaseDurationSeconds"] == 2
            transitions = lease["spec"]["leaseTransitions"]
            other = b if first is a else a
            assert other.leader() == first.identity

            await w.stop(first)  # releases: the Lease says nobody holds it
            assert (await clients[2].get(LEASE))["spec"]["holderIdentity"] == ""
            took = await w.until("the standby leads", other.is_leader, 1.0)
            assert took < 1.0 < LEASE_S
            lease = await clients[2].get(LEASE)
            assert lease["spec"]["holderIdentity"] == other.identity
            assert lease["spec"]["leaseTransitions"] == transitions + 1
            assert w.most_at_once == 1
            await w.stop(other)

    asyncio.run(go())


def test_a_crashed_leader_is_replaced_after_about_the_lease_duration(scheduler_config: ClientConfig) -> None:
    async def go() -> None:
        async with watched(scheduler_config, 2) as (w, clients):
            crashing = elector(clients[0])
            crashing.release_on_cancel = False  # a crash: renewals stop, nothing is released
            w.start(crashing)
            # The Lease may still be held by the previous test's electors for a lease or so.
            await w.until("the first elector leads", crashing.is_leader, LEASE_S + 2 * MAX_POLL_S + 1)
            standby = w.start(elector(clients[1]))
            await w.until("the standby sees the leader", lambda: standby.leader() == crashing.identity, 1.0)
            await w.stop(crashing)
            crashed = time.monotonic()
            took = await w.until("the standby leads", standby.is_leader, LEASE_S + 2 * MAX_POLL_S + 1)
            # Its last renewal was at most a retry period (and a request) before the crash.
            assert time.monotonic() - crashed >= LEASE_S - RETRY_S - 0.1, f"took over after {took:.2f}s"
            assert took <= LEASE_S + 2 * MAX_POLL_S + 0.3
            assert w.most_at_once == 1
            await w.stop(standby)

    asyncio.run(go())
