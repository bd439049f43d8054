"""Lifecycle hooks, as kube's kubelet runs them: which handler a container's `postStart` or
`preStop` names, and each hook run's bookkeeping (pure; the kubelet runs the handlers).

postStart runs once a container has started; until it has finished the container is not
reported running, and if it fails the container is killed (then restarted by the pod's
policy).  preStop runs before the container is sent SIGTERM for any kill (deletion, a failed
liveness probe, a changed spec); it counts against the grace period, and a container whose
preStop outlived the grace still gets MIN_GRACE_S after SIGTERM, as kube gives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")
MIN_GRACE_S = 2.0
POST_START, PRE_STOP = "postStart", "preStop"


@dataclass(frozen=True, slots=True)
class Handler:
    kind: str
    action: Mapping[str, Any]


def handler_of(container: Mapping[str, Any], hook: str) -> Handler | None:
    """The handler of the container's `hook`, or None when it has none (or names no kind we
    know: kube's validation refuses such a pod before it gets here)."""
    lifecycle = container.get("lifecycle")
    spec = lifecycle.get(hook) if isinstance(lifecycle, Mapping) else None
    if not isinstance(spec, Mapping):
        return None
    for kind in HANDLERS:
        action = spec.get(kind)
        if isinstance(action, Mapping):
            return Handler(kind, action)
    return None


@dataclass(slots=True)
class HookRun:
    container: str
    attempt: int  # the container run it belongs to
    hook: str
    handler: Handler
    deadline: float
    started: bool = False
    done: bool = False
    ok: bool = True
    message: str = ""


class Hooks:
    """The hook runs of one pod's containers."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, int, str], HookRun] = {}

    def post_start(self, container: Mapping[str, Any], attempt: int, now: float, timeout: float) -> None:
        handler = handler_of(container, POST_START)
        if handler is not None:
            name = str(container["name"])
            self._runs[(name, attempt, POST_START)] = HookRun(name, attempt, POST_START, handler, now + timeout)

    def post_start_pending(self, container: str, attempt: int) -> bool:
        run = self._runs.get((container, attempt, POST_START))
        return run is not None and not run.done

    def post_start_failed(self, container: str, attempt: int) -> HookRun | None:
        run = self._runs.get((container, attempt, POST_START))
        return run if run is not None and run.done and not run.ok else None

    def pre_stop(self, container: Mapping[str, Any], attempt: int, now: float, grace: float) -> float | None:
        """The grace to stop the container with now, or None while its preStop still runs."""
        name = str(container["name"])
        run = self._runs.get((name, attempt, PRE_STOP))
        if run is None:
            handler = handler_of(container, PRE_STOP)
            if handler is None or grace <= 0:
                return grace
            self._runs[(name, attempt, PRE_STOP)] = HookRun(name, attempt, PRE_STOP, handler, now + grace)
            return None
        if not run.done and now < run.deadline:
            return None
        return max(run.deadline - now, MIN_GRACE_S)

    def due(self) -> list[HookRun]:
        """Hook runs to start now (each is handed out once)."""
        out = [r for r in self._runs.values() if not r.started]
        for r in out:
            r.started = True
        return out

    def finished(self, run: HookRun, ok: bool, message: str) -> None:
        run.done, run.ok, run.message = True, ok, message

    def forget(self, container: str, keep_attempt: int) -> None:
        """Drop the runs of the container's earlier runs."""
        for key in [k for k in self._runs if k[0] == container and k[1] < keep_attempt]:
            del self._runs[key]
