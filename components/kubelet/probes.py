"""One container probe over time: when it is due, and what it reports, as kube's prober does.

A probe is due `initialDelaySeconds` after the container started, then every
`periodSeconds`.  Its verdict changes only after `failureThreshold` failures in a row (to
failure) or `successThreshold` successes in a row (to success); a single result against the
current verdict changes nothing.  Before its first verdict a readiness probe reports not
ready, a liveness probe alive, a startup probe unknown; while a startup probe has not
succeeded the other two are not run at all (`Container` applies that).  A liveness or
startup failure means the kubelet kills the container (and restarts it by the pod's policy).

`Probe.parse` checks the spec fields at the edge: wrong types and ranges are a `ProbeError`
naming the field, as the apiserver's validation would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KINDS = ("startupProbe", "livenessProbe", "readinessProbe")
HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
SUCCESS, FAILURE, UNKNOWN = "success", "failure", "unknown"
_INITIAL = {"startupProbe": UNKNOWN, "livenessProbe": SUCCESS, "readinessProbe": FAILURE}


class ProbeError(ValueError):
    """A probe spec that cannot be run; the message names the field."""


def _field(spec: Mapping[str, Any], name: str, default: int, least: int, where: str) -> int:
    value = spec.get(name, default)
    if value is None:
        value = default
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProbeError(f"{where}.{name}: must be an integer, got {type(value).__name__}")
    if value < least:
        raise ProbeError(f"{where}.{name}: must be at least {least}, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class Probe:
    kind: str  # startupProbe, livenessProbe, readinessProbe
    handler: str  # exec, httpGet, tcpSocket, grpc
    action: Mapping[str, Any]  # the handler's own fields, checked by the runtime that runs it
    initial_delay: int
    period: int
    timeout: int
    success_threshold: int
    failure_threshold: int

    @classmethod
    def parse(cls, kind: str, spec: Any, where: str) -> Probe:
        if kind not in KINDS:
            raise ProbeError(f"{where}: unknown probe kind {kind!r}")
        if not isinstance(spec, Mapping):
            raise ProbeError(f"{where}: must be an object, got {type(spec).__name__}")
        given = [h for h in HANDLERS if spec.get(h) is not None]
        if len(given) != 1:
            raise ProbeError(f"{where}: must specify exactly one handler of {', '.join(HANDLERS)}")
        action = spec[given[0]]
        if not isinstance(action, Mapping):
            raise ProbeError(f"{where}.{given[0]}: must be an object, got {type(action).__name__}")
        success = _field(spec, "successThreshold", 1, 1, where)
        if kind != "readinessProbe" and success != 1:
            raise ProbeError(f"{where}.successThreshold: must be 1 for a {kind}, got {success}")
        return cls(
            kind=kind,
            handler=given[0],
            action=action,
            initial_delay=_field(spec, "initialDelaySeconds", 0, 0, where),
            period=_field(spec, "periodSeconds", 10, 1, where),
            timeout=_field(spec, "timeoutSeconds", 1, 1, where),
            success_threshold=success,
            failure_threshold=_field(spec, "failureThreshold", 3, 1, where),
        )


class ProbeTracker:
    """One probe of one running container: its schedule, its run of equal results, its verdict."""

    def __init__(self, probe: Probe, started_at: float) -> None:
        self.probe = probe
        self.next_due = started_at + probe.initial_delay
        self.result = _INITIAL[probe.kind]
        self._last = ""  # the last observed result, and how many in a row
        self._run = 0

    def due(self, now: float) -> bool:
        return now >= self.next_due

    def count_from(self, started_at: float) -> None:
        """The container's own start time, once known: the initial delay counts from it (kube's
        worker compares with `State.Running.StartedAt`), not from the moment the kubelet asked
        for the start, which is earlier by the start's latency.  Only before the first probe."""
        if self._run == 0:
            self.next_due = max(self.next_due, started_at + self.probe.initial_delay)

    def observe(self, ok: bool, now: float) -> bool:
        """Record one probe's outcome; True when the verdict changed."""
        self.next_due = now + self.probe.period
        seen = SUCCESS if ok else FAILURE
        self._run = self._run + 1 if seen == self._last else 1
        self._last = seen
        needed = self.probe.success_threshold if ok else self.probe.failure_threshold
        if self._run < needed or seen == self.result:
            return False
        self.result = seen
        return True

    @property
    def kills(self) -> bool:
        """Whether the verdict means the container must be killed (liveness or startup failed)."""
        return self.probe.kind != "readinessProbe" and self.result == FAILURE


class Container:
    """The probes of one container run: startup first, then liveness and readiness."""

    def __init__(self, spec: Mapping[str, Any], started_at: float, where: str) -> None:
        self.trackers = {
            kind: ProbeTracker(Probe.parse(kind, spec[kind], f"{where}.{kind}"), started_at)
            for kind in KINDS
            if spec.get(kind) is not None
        }

    def count_from(self, started_at: float) -> None:
        for tracker in self.trackers.values():
            tracker.count_from(started_at)

    @property
    def started(self) -> bool:
        """`status.started`: the startup probe succeeded (or there is none)."""
        startup = self.trackers.get("startupProbe")
        return startup is None or startup.result == SUCCESS

    @property
    def ready(self) -> bool:
        """`status.ready`: started, and the readiness probe says so (or there is none)."""
        if not self.started:
            return False
        readiness = self.trackers.get("readinessProbe")
        return readiness is None or readiness.result == SUCCESS

    @property
    def must_restart(self) -> bool:
        return any(t.kills for t in self.trackers.values())

    def due(self, now: float) -> list[ProbeTracker]:
        """The probes to run now: only the startup probe until it succeeded, and it never again
        after (kube stops probing startup once it passed)."""
        startup = self.trackers.get("startupProbe")
        if startup is not None and startup.result != SUCCESS:
            return [startup] if startup.due(now) else []
        return [t for k, t in self.trackers.items() if k != "startupProbe" and t.due(now)]

    def next_due(self) -> float | None:
        """When the next probe is due (None: nothing to probe)."""
        startup = self.trackers.get("startupProbe")
        if startup is not None and startup.result != SUCCESS:
            return startup.next_due
        times = [t.next_due for k, t in self.trackers.items() if k != "startupProbe"]
        return min(times) if times else None
