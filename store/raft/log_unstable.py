"""Entries and a snapshot the core has accepted but the application has not persisted yet."""

from __future__ import annotations

from store.raft.types import Entry, Snapshot


class Unstable:
    """The not-yet-durable tail of the log.

    Invariant: `entries[i].index == offset + i`, and if `snapshot` is set, `offset ==
    snapshot.metadata.index + 1`.  Everything below `offset` is in stable storage.
    """

    __slots__ = ("entries", "offset", "snapshot")

    def __init__(self, offset: int) -> None:
        self.snapshot: Snapshot | None = None
        self.entries: list[Entry] = []
        self.offset = offset

    def maybe_first_index(self) -> int | None:
        if self.snapshot is not None:
            return self.snapshot.metadata.index + 1
        return None

    def maybe_last_index(self) -> int | None:
        if self.entries:
            return self.offset + len(self.entries) - 1
        if self.snapshot is not None:
            return self.snapshot.metadata.index
        return None

    def maybe_term(self, i: int) -> int | None:
        if i < self.offset:
            if self.snapshot is not None and self.snapshot.metadata.index == i:
                return self.snapshot.metadata.term
            return None
        last = self.maybe_last_index()
        if last is None or i > last:
            return None
        return self.entries[i - self.offset].term

    def stable_to(self, index: int, term: int) -> None:
        """Entries up to `index` (with `term`) are durable now: forget them here."""
        t = self.maybe_term(index)
        if t is None or t != term or index < self.offset:
            # The entry was replaced by a newer append since the Ready was built; the
            # newer entries are still unstable and will be persisted by a later Ready.
            return
        del self.entries[: index + 1 - self.offset]
        self.offset = index + 1

    def stable_snap_to(self, index: int) -> None:
        if self.snapshot is not None and self.snapshot.metadata.index == index:
            self.snapshot = None

    def restore(self, snap: Snapshot) -> None:
        self.offset = snap.metadata.index + 1
        self.entries = []
        self.snapshot = snap

    def truncate_and_append(self, ents: list[Entry]) -> None:
        first = ents[0].index
        if first == self.offset + len(self.entries):
            self.entries.extend(ents)
        elif first <= self.offset:
            # The append replaces everything unstable (and conflicts with stable entries,
            # which the application overwrites when it persists these).
            self.offset = first
            self.entries = list(ents)
        else:
            del self.entries[first - self.offset :]
            self.entries.extend(ents)

    def slice(self, lo: int, hi: int) -> list[Entry]:
        return self.entries[lo - self.offset : hi - self.offset]
