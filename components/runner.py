"""How a component process lives and ends: its signals, its /healthz and /metrics, its Lease.

The controller-manager, the scheduler, a kubelet and the hollow nodes each run one piece of
work until told to stop, and they should stop and report it alike, so a supervisor (`raftkube
up`, systemd, a test) can treat them alike.  kube's components behave so:

* SIGTERM or SIGINT stops the work (cancelled, and awaited so it can clean up); with leader
  election the Lease is released first, so a standby takes over at once.  Exit status 0.
* Losing the Lease (a renewal missed its deadline, another holder showed up), the work failing,
  or the work ending of its own accord (it is meant to run until stopped): exit status 1, so that
  the supervisor starts the process again, as kube-controller-manager and kube-scheduler do.
* /healthz and /metrics are served (`components.health.HealthServer`) for the whole life of the
  process, leading or not: a standby is healthy.  With leader election, /metrics says whether
  this process leads (`leader_election_master_status{name=<lease>}` 1 or 0, kube's gauge), so
  that whoever runs replicas can tell the leader from the standbys.

Status 2 (bad flags) is the caller's business: it is decided before there is anything to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Gauge

from components.client.leaderelection import DEFAULT_NAMESPACE, LeaderElector, LeaseClient
from components.health import HealthServer

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
EXIT_STOPPED = 0  # stopped by a signal (and the Lease released)
EXIT_FAILED = 1  # leadership lost, or the work failed or ended

Work = Callable[[], Coroutine[Any, Any, None]]  # runs until cancelled


@dataclass(frozen=True, slots=True)
class LeaderElection:
    """The Lease to campaign for, and how; the work runs only while it is held."""

    client: LeaseClient
    lease_name: str
    identity: str | None = None  # None: the elector's default (hostname_<uuid>)
    namespace: str = DEFAULT_NAMESPACE
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    on_new_leader: Callable[[str], None] | None = None  # for the process's own log line


async def run_component(
    name: str,
    work: Work,
    log: logging.Logger,
    health: HealthServer,
    election: LeaderElection | None = None,
) -> int:
    """Serve `health`, run `work` (while leading, with `election`) until a signal or its end,
    and return the exit status.  `name` says what failed in the log ("the scheduler")."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    try:
        await health.start()
        running: asyncio.Task[None] = asyncio.create_task(
            _campaign(work, election, health.registry) if election is not None else work()
        )
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:  # ours cancelled from outside (a test): take both down with us
            stopping.cancel()
            if not running.done():
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
        if stop.is_set():
            if not running.cancelled() and running.exception() is not None:  # ended as the signal came
                log.warning("%s failed while stopping: %r", name, running.exception())
            log.info("stopping")
            return EXIT_STOPPED
        return _why_it_ended(name, running, election is not None, log)
    finally:
        with contextlib.suppress(Exception):
            await health.stop()
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)


async def _campaign(work: Work, election: LeaderElection, registry: CollectorRegistry) -> None:
    """Run `work` while holding the Lease; returns when leadership is lost."""
    status = Gauge(
        "leader_election_master_status",
        "1 while this process holds the Lease, 0 while it stands by",
        ["name"],
        registry=registry,
    ).labels(election.lease_name)
    status.set(0)

    async def leading() -> None:
        status.set(1)
        try:
            await work()
        finally:
            status.set(0)

    elector = LeaderElector(
        election.client,
        election.lease_name,
        namespace=election.namespace,
        identity=election.identity,
        lease_duration=election.lease_duration,
        renew_deadline=election.renew_deadline,
        retry_period=election.retry_period,
        on_started_leading=leading,
        on_new_leader=election.on_new_leader,
    )
    await elector.run()


def _why_it_ended(name: str, task: asyncio.Task[None], elected: bool, log: logging.Logger) -> int:
    """Log why the work ended without a signal; every such end is EXIT_FAILED."""
    if task.cancelled():
        log.error("%s was cancelled; exiting", name)
    elif (exc := task.exception()) is not None:
        log.error("%s failed: %r", name, exc, exc_info=exc)
    elif elected:
        log.error("leadership lost; exiting")
    else:
        log.error("%s ended; exiting", name)
    return EXIT_FAILED
