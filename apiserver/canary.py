"""Test-only broken modes of the apiserver, switched on by `RAFTKUBE_CHAOS_CANARY` in its
environment (machinery/canary.py), so that `raftkube chaos cluster --canary MODE` shows its checks catch the bug
they are there for.  Nothing else sets the variable; an unknown value is ignored.

    drop-watch-event   the ConfigMaps watch cache keeps the DROP_AT-th change of namespace
                       `chaos` in its state but never sends it to a watcher (a lost event:
                       the run's watch-stream check must see the gap)
    ack-before-commit  every ACK_EVERY-th update of a ConfigMap of namespace `chaos` is
                       answered as written at the next revision and never written (an
                       acknowledged write lost: the run's acknowledged-writes check must see it)
"""

from __future__ import annotations

from typing import Any

from apiserver.storage.interface import Storage
from machinery.canary import mode

DROP_WATCH_EVENT = "drop-watch-event"
DROP_AT = 100
ACK_BEFORE_COMMIT = "ack-before-commit"
ACK_EVERY = 50
CHAOS_CONFIGMAPS = "/registry/configmaps/chaos/"


class WatchEventDropper:
    """Counts the chaos namespace's ConfigMap changes and says which one to drop (one only)."""

    def __init__(self, resource_plural: str) -> None:
        self.armed = mode() == DROP_WATCH_EVENT and resource_plural == "configmaps"
        self.seen = 0

    def drops(self, key: str) -> bool:
        if not self.armed or not key.startswith(CHAOS_CONFIGMAPS):
            return False
        self.seen += 1
        return self.seen == DROP_AT


def storage(inner: Storage) -> Storage:
    """`inner`, or under ack-before-commit the storage that skips some writes it acknowledges."""
    return AckBeforeCommit(inner) if mode() == ACK_BEFORE_COMMIT else inner


class AckBeforeCommit:
    """A storage that answers some updates without making them (see the module docstring)."""

    def __init__(self, inner: Storage) -> None:
        self._inner = inner
        self._updates = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def update(self, key: str, value: bytes, expected_revision: int) -> int:
        if key.startswith(CHAOS_CONFIGMAPS):
            self._updates += 1
            if self._updates % ACK_EVERY == 0:
                return await self._inner.current_revision() + 1
        return await self._inner.update(key, value, expected_revision)
