"""Crash back-off: how long a container that exited waits before it is started again.

As kube's kubelet does it: a container's first restart is at once, and arms a 10 s delay;
each later exit waits out the current delay, counted from when the container finished, and
the restart after it doubles the delay, up to 5 minutes.  A restart more than twice the cap
(10 minutes) after the previous one starts over at 10 s: a container that ran that long is
not crash-looping.  While it waits its status is `waiting: CrashLoopBackOff` with kube's
message.  Times are seconds on the caller's monotonic clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from machinery.duration import SECOND_NS, format_duration

INITIAL_S = 10.0
MAX_S = 300.0
REASON = "CrashLoopBackOff"


@dataclass(slots=True)
class _Entry:
    delay: float  # what the next exit must wait out
    last_restart: float


class CrashBackOff:
    """Per container key ("<pod uid>/<container>"), the wait before its next restart."""

    def __init__(self, initial: float = INITIAL_S, cap: float = MAX_S) -> None:
        if not 0 < initial <= cap:
            raise ValueError(f"back-off needs 0 < initial <= cap, got {initial} and {cap}")
        self.initial = initial
        self.cap = cap
        self._entries: dict[str, _Entry] = {}

    def _live(self, key: str, finished_at: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None or finished_at - entry.last_restart > 2 * self.cap:
            return None
        return entry

    def remaining(self, key: str, finished_at: float, now: float) -> float:
        """Seconds the container that finished at `finished_at` must still wait (0: restart it)."""
        entry = self._live(key, finished_at)
        if entry is None:
            return 0.0
        return max(0.0, entry.delay - (now - finished_at))

    def restarted(self, key: str, finished_at: float, now: float) -> None:
        """The container is being started again: the next exit waits longer."""
        entry = self._live(key, finished_at)
        if entry is None:
            self._entries[key] = _Entry(self.initial, now)
        else:
            entry.delay = min(self.cap, entry.delay * 2)
            entry.last_restart = now

    def delay(self, key: str) -> float:
        """The delay the container's next exit waits out (for the waiting message)."""
        entry = self._entries.get(key)
        return entry.delay if entry is not None else 0.0

    def forget(self, key: str) -> None:
        """The container is gone (its pod deleted): nothing to remember."""
        self._entries.pop(key, None)

    def gc(self, now: float) -> None:
        """Drop the entries no restart would use any more (bounded memory on a busy node)."""
        for key in [k for k, e in self._entries.items() if now - e.last_restart > 2 * self.cap]:
            del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)


def crash_loop_message(delay: float, container: str, pod: str, namespace: str, uid: str) -> str:
    """kube's waiting message: `back-off 20s restarting failed container=c pod=p_ns(uid)`."""
    wait = format_duration(int(delay) * SECOND_NS)  # Go's Duration text of the whole seconds
    return f"back-off {wait} restarting failed container={container} pod={pod}_{namespace}({uid})"
