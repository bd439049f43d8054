"""An in-memory Storage that honours the Protocol (a test double of a pure interface).

Versions of every key are kept (MVCC), so lists at a past revision and watches from one work;
`compact` forgets what a later reader may no longer ask for.  Tests can end every open watch
(`end_watches`), make them fail (`fail_watches`), and ask for progress notices.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator
from typing import Any

from apiserver.storage.interface import (
    CompactedError,
    KeyExistsError,
    KeyNotFoundError,
    Page,
    Progress,
    RevisionConflictError,
    StorageError,
    StorageEvent,
    Stored,
    UnavailableError,
)

_END = object()


class MemStorage:
    """`progress=False` models a backend that cannot tell progress: request_progress does nothing."""

    def __init__(self, *, progress: bool = False) -> None:
        self.revision = 1
        self.compacted = 0
        self._versions: dict[str, list[tuple[int, bytes | None]]] = {}  # key -> [(rev, value or None)]
        self._log: list[StorageEvent] = []
        self._queues: list[tuple[str, asyncio.Queue[Any]]] = []
        self._progress = progress
        self.watch_calls = 0
        self.list_calls = 0

    # ---- reads ----

    def _at(self, key: str, revision: int) -> Stored | None:
        found = None
        for rev, value in self._versions.get(key, ()):
            if rev > revision:
                break
            found = None if value is None else Stored(key, value, rev)
        return found

    async def get(self, key: str) -> Stored | None:
        return self._at(key, self.revision)

    async def list(self, prefix: str, *, start_key: str = "", limit: int = 0, revision: int = 0) -> Page:
        self.list_calls += 1
        revision = revision or self.revision
        if revision < self.compacted:
            raise CompactedError(self.compacted)
        keys = sorted(k for k in self._versions if k.startswith(prefix) and k >= start_key)
        items: list[Stored] = []
        more = False
        for key in keys:
            stored = self._at(key, revision)
            if stored is None:
                continue
            if limit and len(items) == limit:
                more = True
                break
            items.append(stored)
        return Page(items, revision, more)

    async def current_revision(self) -> int:
        return self.revision

    # ---- writes ----

    def _write(self, key: str, value: bytes | None, prev: Stored | None) -> int:
        self.revision += 1
        self._versions.setdefault(key, []).append((self.revision, value))
        if value is None:
            assert prev is not None
            event = StorageEvent("delete", key, prev.value, self.revision)
        else:
            event = StorageEvent("put", key, value, self.revision, prev.value if prev else None)
        self._log.append(event)
        for prefix, queue in self._queues:
            if key.startswith(prefix):
                queue.put_nowait([event])
        return self.revision

    def bump(self) -> int:
        """A write elsewhere in the store (another resource): the revision moves, no event here."""
        self.revision += 1
        return self.revision

    async def create(self, key: str, value: bytes) -> int:
        if self._at(key, self.revision) is not None:
            raise KeyExistsError(key)
        return self._write(key, value, None)

    async def update(self, key: str, value: bytes, expected_revision: int) -> int:
        current = self._at(key, self.revision)
        if current is None:
            raise KeyNotFoundError(key)
        if expected_revision and current.revision != expected_revision:
            raise RevisionConflictError(key, current)
        return self._write(key, value, current)

    async def delete(self, key: str, expected_revision: int = 0) -> Stored:
        current = self._at(key, self.revision)
        if current is None:
            raise KeyNotFoundError(key)
        if expected_revision and current.revision != expected_revision:
            raise RevisionConflictError(key, current)
        rev = self._write(key, None, current)
        return Stored(key, current.value, rev)

    async def compact(self, revision: int) -> None:
        self.compacted = max(self.compacted, min(revision, self.revision))
        self._log = [e for e in self._log if e.revision >= self.compacted]

    async def close(self) -> None:
        self.end_watches()

    # ---- watch ----

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[builtins.list[StorageEvent] | Progress]:
        self.watch_calls += 1
        if start_revision < self.compacted:
            raise CompactedError(self.compacted)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        for event in self._log:
            if event.revision >= start_revision and event.key.startswith(prefix):
                queue.put_nowait([event])
        entry = (prefix, queue)
        self._queues.append(entry)
        try:
            while True:
                item = await queue.get()
                if item is _END:
                    return
                if isinstance(item, StorageError):
                    raise item
                yield item
        finally:
            self._queues.remove(entry)

    def end_watches(self) -> None:
        for _, queue in self._queues:
            queue.put_nowait(_END)

    def fail_watches(self) -> None:
        for _, queue in self._queues:
            queue.put_nowait(UnavailableError("no quorum"))

    @property
    def open_watches(self) -> int:
        return len(self._queues)

    async def progress_supported(self) -> bool:
        return True

    async def request_progress(self) -> None:
        if self._progress:
            for _, queue in self._queues:
                queue.put_nowait(Progress(self.revision))
