"""Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.

The contract (`LeaderElector.run()`):

* Campaign: every `retry_period` (jittered by up to 1.2 periods more) read the Lease; create it when
  missing; take it when its holder is empty, or when the record has not changed for the holder's
  `leaseDurationSeconds` *as measured on our own clock* from when we first saw this version.
  The remote `renewTime` is written for humans and never compared with our clock, so wall-clock
  skew between machines does not matter (skew of clock *rate* does: `lease_duration /
  renew_deadline` is the tolerated ratio).
* Every write is a PUT at the resourceVersion read: of two candidates racing, one wins and the
  other gets a Conflict and waits.  `leaseTransitions` grows by one when the holder changes.
* Lead: `on_started_leading()` runs as a task; the Lease is renewed every `retry_period`.  When no
  renewal has succeeded for `renew_deadline` (counted from when the last successful one was
  *sent*, so a standby, which cannot have seen it earlier, waits at least `lease_duration` >
  `renew_deadline` from that moment), or another holder shows up, leadership is lost: the task
  is cancelled and awaited, the Lease is released if still ours (`release_on_cancel`, as
  client-go does), `on_stopped_leading()` is called and `run()` returns.
* Cancelling `run()` while leading cancels and awaits the task, then (`release_on_cancel`) writes
  an empty holder so that a standby takes over on its next try instead of a lease later, calls
  `on_stopped_leading()` and re-raises the CancelledError.
* Errors from the apiserver never end `run()`: transport failures, 5xx and 429 are logged as
  warnings, anything else (a Forbidden while RBAC is bootstrapped) as errors, each kind once
  until the next success; all are retried on the retry period.  One attempt is bounded by
  `renew_deadline`, so a hung request cannot keep a leader leading.
* `on_new_leader(identity)` is called (inline; keep it quick) whenever the observed holder changes
  to a non-empty one, ourselves included.  `on_stopped_leading()` is called only after leading
  (client-go calls it on every exit of Run); it may be sync or async.  If `on_started_leading()`
  raises, we step down as above and `run()` raises that error (a crashed leader must not keep
  the Lease); returning normally keeps the leadership.
* There is no fencing: the guarantee is that at most one candidate *believes* it leads, given
  clocks that tick at about the same rate.  Work that must stop when leadership is lost has to
  honour cancellation.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import random
import socket
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from components.client.rest import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    TransportError,
    path_of,
)
from machinery.clock import Clock, SystemClock
from machinery.objects import Obj

log = logging.getLogger("raftkube.client.leaderelection")

JITTER_FACTOR = 1.2  # client-go's: the acquire loop sleeps retry_period * (1 + U[0, 1.2))
DEFAULT_NAMESPACE = "kube-system"
_EPSILON = 1e-9  # float slack when a sleep ends exactly on a deadline
T = TypeVar("T")


class LeaseClient(Protocol):
    """What the elector needs of `RestClient` (a fake with these three methods does for tests)."""

    async def get(self, path: str) -> Obj: ...

    async def create(self, path: str, body: Obj) -> Obj: ...

    async def replace(self, path: str, body: Obj) -> Obj: ...


def micro_time(when: datetime) -> str:
    """`metav1.MicroTime` as the apiserver prints it: RFC 3339, UTC, six fractional digits."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def default_identity() -> str:
    """hostname_<random>: unique even for two candidates on one host (client-go's convention)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class LeaderElectionRecord:
    """The Lease spec fields the election reads and writes."""

    holder_identity: str
    lease_duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    leader_transitions: int

    @classmethod
    def of(cls, lease: Obj) -> LeaderElectionRecord:
        """Read tolerantly: a Lease written by someone else may lack any field."""
        spec = lease.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        holder = spec.get("holderIdentity")
        duration = spec.get("leaseDurationSeconds")
        transitions = spec.get("leaseTransitions")
        acquire, renew = spec.get("acquireTime"), spec.get("renewTime")
        return cls(
            holder_identity=holder if isinstance(holder, str) else "",
            lease_duration_seconds=duration if isinstance(duration, int) and not isinstance(duration, bool) else 0,
            acquire_time=acquire if isinstance(acquire, str) else None,
            renew_time=renew if isinstance(renew, str) else None,
            leader_transitions=transitions if isinstance(transitions, int) and transitions >= 0 else 0,
        )

    def spec(self) -> Obj:
        spec: Obj = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.leader_transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return spec


def _transient(e: BaseException) -> bool:
    return isinstance(e, TransportError | TimeoutError | ServerError | TooManyRequestsError) or (
        isinstance(e, ApiError) and e.code >= 500
    )


class LeaderElector:
    """One candidate for one Lease.  `await run()` campaigns, leads, and returns when leadership
    is lost; cancel it to stop (releasing the Lease when `release_on_cancel`)."""

    def __init__(
        self,
        client: LeaseClient,
        name: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_cancel: bool = True,
        on_started_leading: Callable[[], Awaitable[None]] | None = None,
        on_stopped_leading: Callable[[], Awaitable[None] | None] | None = None,
        on_new_leader: Callable[[str], None] | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        wall: Callable[[], datetime] = _utc_now,
    ) -> None:
        """`wall` stamps acquireTime/renewTime (informational only); `clock` measures every
        duration; `rng` jitters the campaign so that candidates started together spread out."""
        for param, value in (
            ("lease_duration", lease_duration),
            ("renew_deadline", renew_deadline),
            ("retry_period", retry_period),
        ):
            if not value > 0:
                raise ValueError(f"{param} must be greater than zero, got {value}")
        if lease_duration <= renew_deadline:
            raise ValueError(
                f"lease_duration ({lease_duration}) must be greater than renew_deadline ({renew_deadline})"
            )
        if renew_deadline <= retry_period * JITTER_FACTOR:
            raise ValueError(
                f"renew_deadline ({renew_deadline}) must be greater than retry_period * {JITTER_FACTOR} "
                f"({retry_period * JITTER_FACTOR:g})"
            )
        if not name:
            raise ValueError("name (of the Lease) must not be empty")
        identity = default_identity() if identity is None else identity
        if not identity:
            raise ValueError("identity must not be empty")
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self._client = client
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock: Clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._wall = wall
        self._collection = path_of("coordination.k8s.io", "v1", "leases", namespace)
        self._path = path_of("coordination.k8s.io", "v1", "leases", namespace, name)
        # Our duration in whole seconds, rounded up: a standby never waits less than we assume.
        self._duration_s = max(1, math.ceil(lease_duration))
        self._lease: Obj | None = None  # the Lease as last read or written: its resourceVersion guards our writes
        self._observed: LeaderElectionRecord | None = None
        self._observed_rv: str | None = None
        self._observed_at = 0.0  # our clock when _observed (or its resourceVersion) last changed
        self._reported_leader = ""
        self._leading = False
        self._running = False
        self._logged: set[str] = set()

    # -- accessors ------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """True from a successful acquire until leadership is lost, given up or released."""
        return self._leading

    def leader(self) -> str:
        """The holder in the last record observed ("" before the first read, or after a release)."""
        return self._observed.holder_identity if self._observed else ""

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    # -- the loop -------------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign until leading, then lead until leadership is lost (returns) or cancelled."""
        if self._running:
            raise RuntimeError(f"the elector for {self.describe()} is already running")
        self._running = True
        try:
            log.info("%s: campaigning for lease %s", self.identity, self.describe())
            acquired_at = await self._acquire()
            await self._lead(acquired_at)
        finally:
            self._running = False

    async def _acquire(self) -> float:
        """Try until the Lease is ours; the clock time the winning attempt started."""
        while True:
            started = self._clock.now()
            if await self._attempt(self.renew_deadline):
                return started
            await self._clock.sleep(self.retry_period * (1.0 + self._rng.random() * JITTER_FACTOR))

    async def _lead(self, acquired_at: float) -> None:
        self._leading = True
        log.info("%s: became leader of %s", self.identity, self.describe())
        work = asyncio.create_task(self._work(), name=f"leading {self.describe()}")
        renewer = asyncio.create_task(self._renew_until_lost(acquired_at), name=f"renewing {self.describe()}")
        failure: BaseException | None = None
        try:
            waiting: set[asyncio.Task[None]] = {renewer, work}
            while not renewer.done():
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if work in done and not work.cancelled() and (failure := work.exception()) is not None:
                    log.error("%s: on_started_leading failed; giving up %s", self.identity, self.describe())
                    break
        finally:
            # Leadership ends here, whatever ended it: stop the guarded work before anything else.
            self._leading = False
            renewer.cancel()
            work.cancel()
            await asyncio.wait({renewer, work})
            if not work.cancelled() and work.exception() not in (None, failure):
                log.error("%s: on_started_leading failed while stopping", self.identity, exc_info=work.exception())
            if self.release_on_cancel:
                await self._release()
            await self._stopped()
        if failure is not None:
            raise failure
        if not renewer.cancelled():
            renewer.result()  # a bug in the renew loop surfaces here instead of vanishing

    async def _work(self) -> None:
        if self._on_started_leading is not None:
            await self._on_started_leading()

    async def _renew_until_lost(self, last_ok: float) -> None:
        """Renew every retry_period; return when none has succeeded for renew_deadline."""
        while True:
            wait = min(self.retry_period, last_ok + self.renew_deadline - self._clock.now())
            if wait > 0:
                await self._clock.sleep(wait)
            started = self._clock.now()
            remaining = last_ok + self.renew_deadline - started
            if remaining <= _EPSILON:
                log.warning(
                    "%s: no renewal of %s succeeded for %.1fs: leadership lost",
                    self.identity,
                    self.describe(),
                    self.renew_deadline,
                )
                return
            if await self._attempt(remaining):
                last_ok = started
            elif self._observed is not None and self._observed.holder_identity != self.identity:
                log.warning(
                    "%s: %s is now held by %r: leadership lost",
                    self.identity,
                    self.describe(),
                    self._observed.holder_identity,
                )
                return

    # -- one attempt ----------------------------------------------------------------------------

    async def _attempt(self, budget: float) -> bool:
        """One bounded try at acquiring or renewing; failures are logged, never raised."""
        try:
            ok = await self._within(self._try_acquire_or_renew(), budget)
        except (ApiError, TransportError, TimeoutError) as e:
            self._note(e)
            return False
        if ok:
            self._logged.clear()
        return ok

    async def _try_acquire_or_renew(self) -> bool:
        now = micro_time(self._wall())
        ours = LeaderElectionRecord(self.identity, self._duration_s, now, now, 0)
        # Fast path: a leader writes at the version it last wrote, saving the read.
        if self._leading and self._lease is not None and self._observed is not None:
            kept = replace(
                ours,
                acquire_time=self._observed.acquire_time,
                leader_transitions=self._observed.leader_transitions,
            )
            try:
                self._observe(await self._client.replace(self._path, self._with(self._lease, kept)))
                return True
            except (ApiError, TransportError) as e:
                self._note(e)  # then read what is there
        try:
            lease = await self._client.get(self._path)
        except NotFoundError:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": ours.spec(),
            }
            self._observe(await self._client.create(self._collection, body))
            return True
        record = self._observe(lease)
        if record.holder_identity and record.holder_identity != self.identity:
            duration = record.lease_duration_seconds or self._duration_s
            if self._clock.now() < self._observed_at + duration:
                return False  # held, and we have not yet seen it unchanged for its duration
        if record.holder_identity == self.identity:
            ours = replace(ours, acquire_time=record.acquire_time, leader_transitions=record.leader_transitions)
        else:
            ours = replace(ours, leader_transitions=record.leader_transitions + 1)
        self._observe(await self._client.replace(self._path, self._with(lease, ours)))
        return True

    async def _release(self) -> None:
        """Write an empty holder, guarded by the resourceVersion, if the Lease is still ours."""
        if self._lease is None or self._observed is None or self._observed.holder_identity != self.identity:
            return
        try:
            await self._within(self._write_release(), self.renew_deadline)
        except (ApiError, TransportError, TimeoutError) as e:
            log.warning("%s: could not release %s: %s", self.identity, self.describe(), e)
            return
        if not self._observed.holder_identity:
            log.info("%s: released %s", self.identity, self.describe())

    async def _write_release(self) -> None:
        now = micro_time(self._wall())
        # leaseDurationSeconds must stay positive; an empty holder is free whatever it says.
        empty = LeaderElectionRecord("", 1, now, now, self._observed.leader_transitions if self._observed else 0)
        assert self._lease is not None
        try:
            self._observe(await self._client.replace(self._path, self._with(self._lease, empty)))
            return
        except ConflictError:
            pass  # a renewal cancelled in flight may have landed: read the version now there
        record = self._observe(await self._client.get(self._path))
        if record.holder_identity == self.identity:
            empty = replace(empty, leader_transitions=record.leader_transitions)
            self._observe(await self._client.replace(self._path, self._with(self._lease, empty)))

    # -- bookkeeping ----------------------------------------------------------------------------

    def _observe(self, lease: Obj) -> LeaderElectionRecord:
        """Remember the Lease; restart the expiry clock when its record or version changed."""
        record = LeaderElectionRecord.of(lease)
        meta = lease.get("metadata")
        rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
        rv = rv if isinstance(rv, str) else None
        if record != self._observed or rv != self._observed_rv:
            self._observed, self._observed_rv = record, rv
            self._observed_at = self._clock.now()
        self._lease = lease
        holder = record.holder_identity
        if holder and holder != self._reported_leader:
            self._reported_leader = holder
            log.info("%s: %s is led by %s", self.identity, self.describe(), holder)
            if self._on_new_leader is not None:
                try:
                    self._on_new_leader(holder)
                except Exception:
                    log.exception("%s: on_new_leader(%r) failed", self.identity, holder)
        return record

    def _with(self, lease: Obj, record: LeaderElectionRecord) -> Obj:
        """`lease` (its metadata, so its resourceVersion) carrying `record`; other spec fields kept."""
        spec = lease.get("spec")
        return {**lease, "spec": {**(spec if isinstance(spec, dict) else {}), **record.spec()}}

    def _note(self, e: BaseException) -> None:
        """Log a failed attempt: lost races quietly, every other kind once until a success."""
        if isinstance(e, ConflictError | AlreadyExistsError):
            log.debug("%s: lost a race for %s: %s", self.identity, self.describe(), e)
            return
        kind = type(e).__name__
        if kind in self._logged:
            log.debug("%s: %s again: %s", self.identity, kind, e)
            return
        self._logged.add(kind)
        log.log(
            logging.WARNING if _transient(e) else logging.ERROR,
            "%s: lease %s: %s: %s (retrying every %.1fs; repeats are logged at debug level until a success)",
            self.identity,
            self.describe(),
            kind,
            e,
            self.retry_period,
        )

    async def _stopped(self) -> None:
        log.info("%s: stopped leading %s", self.identity, self.describe())
        if self._on_stopped_leading is None:
            return
        try:
            result = self._on_stopped_leading()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("%s: on_stopped_leading failed", self.identity)

    async def _within(self, attempt: Coroutine[Any, Any, T], seconds: float) -> T:
        """`attempt`'s result, or TimeoutError when `seconds` pass first on our clock."""
        task = asyncio.ensure_future(attempt)
        timer = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait({task, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            task.cancel()
            timer.cancel()
            await asyncio.wait({task, timer})
            if not task.cancelled():
                task.exception()  # retrieved here even if we are being cancelled; result() re-raises it
        if task.cancelled():
            raise TimeoutError(f"no answer within {seconds:.1f}s")
        return task.result()
