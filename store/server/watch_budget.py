"""The member-wide budget for unsent watch output: however many clients stop reading, the
bytes the member holds for them stay under one ceiling.

Each connection's own backlog is already bounded (watch_streams.py pauses its watchers at
`pause_bytes`), but that bound times 10,000 allowed connections is no bound at all: 101
connections that never read took a member from 41 MiB to over 1 GiB.  So the member also
keeps the sum of every connection's unsent bytes under `limit_bytes`; when a send takes it
over, connections are aborted, the one that has gone longest without reading first, until
the sum is back under.  A client that reads, however slowly, keeps moving to the back of
that queue: the connections cut off are those that stopped.

Only connections that owe something are tracked, so the work is proportional to the stalled
ones, not to every connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, NamedTuple, Protocol, TypeVar


class Backlogged(Protocol):
    def backlog(self) -> int:
        """Bytes written to the connection that its client has not taken yet."""
        ...


C = TypeVar("C", bound=Backlogged)


@dataclass(slots=True)
class _Owed:
    size: int
    """The connection's backlog when last looked at."""
    since: float
    """When its client last took anything (or when it started to owe)."""


class Victim(NamedTuple, Generic[C]):
    conn: C
    owed: int
    """Its backlog when it was picked."""
    since: float
    """When its client last took anything."""


class OutputBudget(Generic[C]):
    def __init__(self, limit_bytes: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit_bytes = limit_bytes
        self.clock = clock
        self._owed: dict[C, _Owed] = {}
        self.total = 0
        """The sum of the tracked backlogs as last looked at (never less than the truth by
        more than what clients read since: reading only lowers a backlog)."""

    def before_send(self, conn: C) -> None:
        """Look at `conn` just before more is written to it: if its backlog went down since
        it was last looked at, its client is reading, and its stall starts over."""
        owed = self._owed.get(conn)
        if owed is not None:
            self._update(conn, owed, conn.backlog())

    def after_send(self, conn: C) -> None:
        """Account what `conn` owes now that more was written to it."""
        now = conn.backlog()
        owed = self._owed.get(conn)
        if owed is None:
            if now > 0:
                self._owed[conn] = _Owed(now, self.clock())
                self.total += now
            return
        self.total += now - owed.size
        owed.size = now
        if now == 0:
            del self._owed[conn]

    def forget(self, conn: C) -> int:
        """`conn` is closed: what it owed is gone.  Returns that, as last counted."""
        owed = self._owed.pop(conn, None)
        if owed is None:
            return 0
        self.total -= owed.size
        return owed.size

    def refresh(self) -> None:
        """Look at every tracked connection again (the sum only falls)."""
        for conn, owed in list(self._owed.items()):
            self._update(conn, owed, conn.backlog())

    def over(self) -> list[Victim[C]]:
        """The connections to abort so that the member owes at most `limit_bytes`: those
        stalled longest first, as few as do.  They are forgotten here; the caller aborts them."""
        if self.total <= self.limit_bytes:
            return []
        self.refresh()
        victims: list[Victim[C]] = []
        if self.total <= self.limit_bytes:
            return victims
        for conn, owed in sorted(self._owed.items(), key=lambda item: item[1].since):
            victims.append(Victim(conn, owed.size, owed.since))
            self.forget(conn)
            if self.total <= self.limit_bytes:
                break
        return victims

    def stalled(self) -> int:
        """Connections that owe something."""
        return len(self._owed)

    def _update(self, conn: C, owed: _Owed, now: int) -> None:
        if now < owed.size:
            owed.since = self.clock()
        self.total += now - owed.size
        owed.size = now
        if now == 0:
            del self._owed[conn]
