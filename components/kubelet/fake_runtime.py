"""The `fake` runtime: containers that are only records, for hollow nodes and scale tests.

A container "runs" from `start` until it is stopped or its run time is over; nothing is
executed.  Its behaviour comes from the pod's annotations (the pod worker passes them in
the run's meta):

    fake.raftkube.io/start-latency-ms   how long `start` takes to report the container running
    fake.raftkube.io/run-seconds        it exits by itself after this long (default: never)
    fake.raftkube.io/exit-code          with this code (default 0)

Time comes from the clock given (the tests' is manual); memory is a few small records per
container, dropped with `remove_pod`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from components.kubelet.containerlog import timestamp
from components.kubelet.process_runtime import RunState

PREFIX = "fake.raftkube.io/"
START_LATENCY = PREFIX + "start-latency-ms"
RUN_SECONDS = PREFIX + "run-seconds"
EXIT_CODE = PREFIX + "exit-code"
STOPPED_EXIT = 143  # what a container that honoured SIGTERM reports (128 + 15)
MAX_LATENCY_S = 3600.0


class FakeBehaviourError(ValueError):
    """An annotation the fake runtime cannot follow (names the annotation)."""


@dataclass(frozen=True, slots=True)
class Behaviour:
    start_latency_s: float = 0.0
    run_s: float | None = None
    exit_code: int = 0


def behaviour(annotations: Mapping[str, Any]) -> Behaviour:
    def number(key: str, least: float, most: float) -> float | None:
        text = annotations.get(key)
        if text is None:
            return None
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise FakeBehaviourError(f"{key}: must be a number, got {text!r}") from None
        if not least <= value <= most:
            raise FakeBehaviourError(f"{key}: must be from {least:g} to {most:g}, got {text!r}")
        return value

    latency = number(START_LATENCY, 0, MAX_LATENCY_S * 1000)
    run = number(RUN_SECONDS, 0, 10 * 365 * 86400)
    code = number(EXIT_CODE, 0, 255)
    if code is not None and code != int(code):
        raise FakeBehaviourError(f"{EXIT_CODE}: must be an integer, got {annotations.get(EXIT_CODE)!r}")
    return Behaviour((latency or 0.0) / 1000, run, int(code or 0))


@dataclass(slots=True)
class _Run:
    attempt: int
    created: float
    behaviour: Behaviour
    meta: Any
    stopped_at: float | None = None

    def started_at(self) -> float:
        return self.created + self.behaviour.start_latency_s

    def ended(self, now: float) -> tuple[float, int] | None:
        """(when, exit code) once it has ended."""
        natural = None if self.behaviour.run_s is None else self.started_at() + self.behaviour.run_s
        if self.stopped_at is not None and (natural is None or self.stopped_at < natural):
            return self.stopped_at, STOPPED_EXIT
        if natural is not None and natural <= now:
            return natural, self.behaviour.exit_code
        return None


class FakeRuntime:
    needs_command = False  # nothing is run, so nothing needs naming
    simulated = True  # probes and hooks are not run either: they succeed

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._runs: dict[tuple[str, str], list[_Run]] = {}  # (pod uid, container) -> its runs

    def start(
        self,
        namespace: str,
        pod: str,
        uid: str,
        container: str,
        argv: list[str],
        env: dict[str, str],
        cwd: str | None = None,
        meta: dict[str, Any] | None = None,
        sandbox: Any = None,  # nothing runs, so nothing is set apart
        executable: str | None = None,
    ) -> int:
        runs = self._runs.setdefault((uid, container), [])
        now = self.clock()
        if runs and now < runs[-1].started_at():
            return runs[-1].attempt  # still starting: the worker asked again, nothing new
        annotations = (meta or {}).get("annotations") or {}
        run = _Run(len(runs), now, behaviour(annotations), meta)
        runs.append(run)
        return run.attempt

    def seen(self, uid: str, container: str, attempt: int | None = None) -> RunState | None:
        runs = self._runs.get((uid, container))
        if not runs:
            return None
        run = runs[-1] if attempt is None else (runs[attempt] if 0 <= attempt < len(runs) else None)
        if run is None:
            return None
        now = self.clock()
        if now < run.started_at() and run.stopped_at is None:
            if attempt is not None or run.attempt == 0:
                return None  # not started yet: ContainerCreating
            run = runs[-2]  # the worker sees the previous run until this one is up
        started = timestamp(int(run.started_at() * 1e9))
        ended = run.ended(now)
        if ended is None:
            return RunState(run.attempt, True, started, meta=run.meta)
        at, code = ended
        reason = "Completed" if code == 0 else "Error"
        return RunState(run.attempt, False, started, code, timestamp(int(at * 1e9)), reason, meta=run.meta)

    def stop(self, uid: str, container: str, grace_s: float, now: float) -> None:
        runs = self._runs.get((uid, container))
        if runs and runs[-1].stopped_at is None and runs[-1].ended(now) is None:
            runs[-1].stopped_at = now  # a fake container honours SIGTERM at once

    def tick(self, now: float) -> None:
        pass  # nothing outlives its grace period

    def remove_pod(self, uid: str, namespace: str, pod: str) -> None:
        for key in [k for k in self._runs if k[0] == uid]:
            del self._runs[key]

    def running_pods(self) -> list[str]:
        return sorted({uid for uid, _ in self._runs})

    def exec_context(self, uid: str, container: str) -> None:
        return None  # nothing runs: nothing to exec into
