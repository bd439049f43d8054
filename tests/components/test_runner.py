"""The component runner's promises, in this process: a signal stops the work with status 0 (the
Lease released first), losing the Lease or the work failing or ending gives status 1, /healthz
and /metrics are served meanwhile, and the signal handlers are gone afterwards."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from components.health import HealthServer
from components.runner import EXIT_FAILED, EXIT_STOPPED, LeaderElection, run_component
from machinery.process.launch import free_ports
from tests.components.fakeclock import FakeClock
from tests.components.test_leaderelection import LEASE, FakeApiserver

TIMEOUT = 10.0
log = logging.getLogger("test.runner")


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(TIMEOUT):
            await test()

    asyncio.run(bounded())


def no_health() -> HealthServer:
    return HealthServer(0, CollectorRegistry(), lambda: None)


def election(server: FakeApiserver, identity: str) -> LeaderElection:
    return LeaderElection(
        server.client(),
        "kube-scheduler",
        identity=identity,
        lease_duration=1.0,
        renew_deadline=0.5,
        retry_period=0.1,
    )


class Work:
    """Runs until cancelled; notes that it started and that it was cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def __call__(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


def test_a_signal_stops_the_work_with_status_0_and_health_is_served_meanwhile() -> None:
    (port,) = free_ports(1)
    registry = CollectorRegistry()
    Counter("runner_test_things", "things", registry=registry).inc()
    health = HealthServer(port, registry, lambda: None)

    async def go() -> None:
        work = Work()
        runner = asyncio.create_task(run_component("the work", work, log, health))
        await work.started.wait()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            assert (await http.get("/healthz")).text == "ok"
            assert "runner_test_things_total 1.0" in (await http.get("/metrics")).text
            os.kill(os.getpid(), signal.SIGTERM)
            assert await runner == EXIT_STOPPED
            assert work.cancelled
            with pytest.raises(httpx.ConnectError):
                await http.get("/healthz")  # the health server stopped with the work
        # the handlers are gone: the default disposition is back
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

    run(go)


def test_sigint_stops_it_too() -> None:
    async def go() -> None:
        work = Work()
        runner = asyncio.create_task(run_component("the work", work, log, no_health()))
        await work.started.wait()
        os.kill(os.getpid(), signal.SIGINT)
        assert await runner == EXIT_STOPPED and work.cancelled

    run(go)


def test_work_that_fails_or_ends_gives_status_1(caplog: pytest.LogCaptureFixture) -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    async def ends() -> None:
        return None

    async def go() -> None:
        assert await run_component("the work", fails, log, no_health()) == EXIT_FAILED
        assert await run_component("the work", ends, log, no_health()) == EXIT_FAILED

    with caplog.at_level(logging.ERROR, logger=log.name):
        run(go)
    assert "the work failed: RuntimeError('boom')" in caplog.text
    assert "the work ended; exiting" in caplog.text


def test_with_an_election_the_work_runs_while_leading_and_a_signal_releases_the_lease() -> None:
    server = FakeApiserver(FakeClock())

    async def go() -> None:
        work = Work()
        runner = asyncio.create_task(run_component("the work", work, log, no_health(), election(server, "me")))
        await work.started.wait()
        assert server.spec()["holderIdentity"] == "me"
        os.kill(os.getpid(), signal.SIGTERM)
        assert await runner == EXIT_STOPPED and work.cancelled
        assert server.spec()["holderIdentity"] == ""  # released: a standby takes over at once

    run(go)


def test_losing_the_lease_stops_the_work_with_status_1(caplog: pytest.LogCaptureFixture) -> None:
    server = FakeApiserver(FakeClock())

    async def go() -> None:
        work = Work()
        runner = asyncio.create_task(run_component("the work", work, log, no_health(), election(server, "me")))
        await work.started.wait()
        server.force(holderIdentity="someone-else")
        assert await runner == EXIT_FAILED and work.cancelled
        assert server.objects[LEASE]["spec"]["holderIdentity"] == "someone-else"

    with caplog.at_level(logging.ERROR, logger=log.name):
        run(go)
    assert "leadership lost; exiting" in caplog.text


def test_cancelling_the_runner_cancels_the_work() -> None:
    async def go() -> None:
        work = Work()
        runner = asyncio.create_task(run_component("the work", work, log, no_health()))
        await work.started.wait()
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner
        assert work.cancelled
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

    run(go)
