"""The log storage interface the core reads from, and an in-memory implementation.

The application owns storage: it appends entries and installs snapshots *after* persisting
them (step 1 of the Ready contract), and compacts the log once a snapshot covers it.  The
core only reads.  Index `first_index() - 1` is the "dummy" position: the last index covered
by the snapshot (or 0), whose term is still known so that appends after it can be checked.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Protocol

from store.raft.errors import (
    CompactedError,
    SnapshotOutOfDateError,
    UnavailableError,
)
from store.raft.types import (
    EMPTY_SNAPSHOT,
    ConfState,
    Entry,
    HardState,
    Snapshot,
    SnapshotMetadata,
)


class Storage(Protocol):
    def initial_state(self) -> tuple[HardState, ConfState]:
        """The persisted hard state and the membership as of the latest snapshot."""
        ...

    def entries(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        """Entries [lo, hi), at least one if any, stopping before `max_size` bytes of data."""
        ...

    def term(self, index: int) -> int:
        """Term of the entry at `index`, valid for first_index()-1 <= index <= last_index()."""
        ...

    def first_index(self) -> int: ...

    def last_index(self) -> int: ...

    def snapshot(self) -> Snapshot: ...


ENTRY_OVERHEAD = 16
"""Bytes counted per entry on top of its payload, for the size limits."""

_data = attrgetter("data")


def entry_size(e: Entry) -> int:
    """The size used for byte limits: payload plus a fixed per-entry overhead."""
    return len(e.data) + ENTRY_OVERHEAD


def entries_size(entries: list[Entry]) -> int:
    # map/len/attrgetter keep the loop in C: this runs on every append message.
    return sum(map(len, map(_data, entries))) + ENTRY_OVERHEAD * len(entries)


def limit_size(entries: list[Entry], max_size: int) -> list[Entry]:
    """The longest prefix of `entries` within `max_size` bytes, but never empty."""
    if len(entries) <= 1 or entries_size(entries) <= max_size:
        return entries
    total = 0
    for i, e in enumerate(entries):
        total += len(e.data) + ENTRY_OVERHEAD
        if total > max_size:
            return entries[: max(i, 1)]
    return entries


class MemoryStorage:
    """Storage kept in a Python list; the durable member wraps it with a WAL.

    `_ents[0]` is a dummy entry holding the index and term of the snapshot point, so
    index i lives at `_ents[i - _ents[0].index]`.
    """

    def __init__(self) -> None:
        self.hard_state = HardState()
        self._snapshot = EMPTY_SNAPSHOT
        self._ents: list[Entry] = [Entry(term=0, index=0)]

    # -- reads (the Storage protocol) ------------------------------------------------
    def initial_state(self) -> tuple[HardState, ConfState]:
        return self.hard_state, self._snapshot.metadata.conf_state

    def entries(self, lo: int, hi: int, max_size: int) -> list[Entry]:
        offset = self._ents[0].index
        if lo <= offset:
            raise CompactedError(f"index {lo} is compacted (first index {offset + 1})")
        if hi > self.last_index() + 1:
            raise UnavailableError(f"entries up to {hi - 1} requested, last index is {self.last_index()}")
        return limit_size(self._ents[lo - offset : hi - offset], max_size)

    def term(self, index: int) -> int:
        offset = self._ents[0].index
        if index < offset:
            raise CompactedError(f"term of index {index} is compacted (first index {offset + 1})")
        if index - offset >= len(self._ents):
            raise UnavailableError(f"term of index {index} requested, last index is {self.last_index()}")
        return self._ents[index - offset].term

    def first_index(self) -> int:
        return self._ents[0].index + 1

    def last_index(self) -> int:
        return self._ents[0].index + len(self._ents) - 1

    def snapshot(self) -> Snapshot:
        return self._snapshot

    # -- writes (by the application, after persisting) ------------------------------
    def set_hard_state(self, hs: HardState) -> None:
        self.hard_state = hs

    def apply_snapshot(self, snap: Snapshot) -> None:
        """Replace the whole log by `snap` (a follower installing the leader's snapshot)."""
        if snap.metadata.index <= self._snapshot.metadata.index:
            raise SnapshotOutOfDateError(
                f"snapshot at {snap.metadata.index} is not newer than {self._snapshot.metadata.index}"
            )
        self._snapshot = snap
        self._ents = [Entry(term=snap.metadata.term, index=snap.metadata.index)]

    def create_snapshot(self, index: int, conf_state: ConfState, data: bytes) -> Snapshot:
        """Record the application's state as of applied `index`; does not compact."""
        if index <= self._snapshot.metadata.index:
            raise SnapshotOutOfDateError(f"snapshot at {index} is not newer than {self._snapshot.metadata.index}")
        if index > self.last_index():
            raise UnavailableError(f"snapshot index {index} is beyond last index {self.last_index()}")
        term = self.term(index)
        self._snapshot = Snapshot(SnapshotMetadata(index=index, term=term, conf_state=conf_state), data)
        return self._snapshot

    def compact(self, compact_index: int) -> None:
        """Drop entries before `compact_index`; it becomes the dummy (snapshot) position."""
        offset = self._ents[0].index
        if compact_index <= offset:
            raise CompactedError(f"index {compact_index} is already compacted (first index {offset + 1})")
        if compact_index > self.last_index():
            raise UnavailableError(f"compact index {compact_index} is beyond last index {self.last_index()}")
        i = compact_index - offset
        head = self._ents[i]
        self._ents = [Entry(term=head.term, index=head.index), *self._ents[i + 1 :]]

    def append(self, entries: list[Entry]) -> None:
        """Append (or overwrite a conflicting suffix with) `entries`, which must be contiguous."""
        if not entries:
            return
        first = self.first_index()
        last = entries[-1].index
        if last < first:
            return  # everything is already compacted
        if first > entries[0].index:
            entries = entries[first - entries[0].index :]
        offset = entries[0].index - self._ents[0].index
        if offset > len(self._ents):
            raise UnavailableError(
                f"missing log entry: last index {self.last_index()}, append starts at {entries[0].index}"
            )
        del self._ents[offset:]
        self._ents.extend(entries)


_check: Storage = MemoryStorage()
