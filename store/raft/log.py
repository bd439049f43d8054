"""The Raft log: stable storage plus the unstable tail, with commit and apply cursors.

Invariant: `applied <= committed <= last_index()`, and `first_index() - 1 <= committed`
(nothing uncommitted is ever compacted).
"""

from __future__ import annotations

from store.raft.errors import CompactedError, UnavailableError
from store.raft.log_unstable import Unstable
from store.raft.storage import Storage, limit_size
from store.raft.types import Entry, Snapshot

NO_LIMIT = 1 << 62


class RaftLog:
    __slots__ = ("applied", "committed", "max_applying_size", "storage", "unstable")

    def __init__(self, storage: Storage, max_applying_size: int = NO_LIMIT) -> None:
        self.storage = storage
        first = storage.first_index()
        last = storage.last_index()
        self.unstable = Unstable(last + 1)
        # The snapshot point is known committed and applied.
        self.committed = first - 1
        self.applied = first - 1
        self.max_applying_size = max_applying_size

    def __repr__(self) -> str:
        return (
            f"RaftLog(committed={self.committed}, applied={self.applied}, "
            f"unstable.offset={self.unstable.offset}, len(unstable)={len(self.unstable.entries)})"
        )

    # -- positions ---------------------------------------------------------------------
    def first_index(self) -> int:
        i = self.unstable.maybe_first_index()
        return i if i is not None else self.storage.first_index()

    def last_index(self) -> int:
        i = self.unstable.maybe_last_index()
        return i if i is not None else self.storage.last_index()

    def term(self, i: int) -> int:
        """Term of entry `i`; raises CompactedError / UnavailableError outside the log."""
        t = self.unstable.maybe_term(i)
        if t is not None:
            return t
        dummy = self.first_index() - 1
        if i < dummy:
            raise CompactedError(f"index {i} is compacted")
        if i > self.last_index():
            raise UnavailableError(f"index {i} is beyond last index {self.last_index()}")
        return self.storage.term(i)

    def term_or_zero(self, i: int) -> int:
        """Term of entry `i`, or 0 when it is compacted or missing (never matches a real term)."""
        try:
            return self.term(i)
        except (CompactedError, UnavailableError):
            return 0

    def last_term(self) -> int:
        return self.term(self.last_index())

    def match_term(self, i: int, term: int) -> bool:
        return self.term_or_zero(i) == term

    def is_up_to_date(self, last_index: int, term: int) -> bool:
        """Is a log ending at (last_index, term) at least as up-to-date as ours? (Raft §5.4.1)"""
        our_term = self.last_term()
        return term > our_term or (term == our_term and last_index >= self.last_index())

    # -- appending -----------------------------------------------------------------
    def maybe_append(self, index: int, log_term: int, committed: int, ents: list[Entry]) -> int | None:
        """Append `ents` after entry (index, log_term) if we hold that entry.

        Returns the index of the last new entry, or None when (index, log_term) does not
        match our log (the leader must back up).
        """
        if not self.match_term(index, log_term):
            return None
        last_new = index + len(ents)
        ci = self.find_conflict(ents)
        if ci != 0:
            if ci <= self.committed:
                raise AssertionError(f"entry {ci} conflicts with committed entry (committed {self.committed})")
            self.append(ents[ci - (index + 1) :])
        self.commit_to(min(committed, last_new))
        return last_new

    def append(self, ents: list[Entry]) -> int:
        if not ents:
            return self.last_index()
        after = ents[0].index - 1
        if after < self.committed:
            raise AssertionError(f"append after {after} would overwrite committed {self.committed}")
        self.unstable.truncate_and_append(ents)
        return self.last_index()

    def find_conflict(self, ents: list[Entry]) -> int:
        """Index of the first entry in `ents` missing or with another term in our log, else 0."""
        for e in ents:
            if not self.match_term(e.index, e.term):
                return e.index
        return 0

    def find_conflict_by_term(self, index: int, term: int) -> tuple[int, int]:
        """Our best guess at a matching entry for a leader whose log has `term` at `index`.

        Returns the largest (i, t) with i <= index and t <= term from our log: every entry
        between it and `index` either has a greater term than the leader's at that index or
        is missing, so the leader can skip them in one round trip.
        """
        index = min(index, self.last_index())
        while index > 0:
            try:
                t = self.term(index)
            except CompactedError:
                return index, 0
            if t <= term:
                return index, t
            index -= 1
        return 0, 0

    # -- commit and apply ------------------------------------------------------------
    def commit_to(self, to_commit: int) -> None:
        if to_commit > self.committed:
            if to_commit > self.last_index():
                raise AssertionError(f"commit {to_commit} is beyond last index {self.last_index()}")
            self.committed = to_commit

    def maybe_commit(self, max_index: int, term: int) -> bool:
        """Advance the commit index to `max_index` if that entry is from `term` (Raft §5.4.2)."""
        if max_index > self.committed and self.term_or_zero(max_index) == term:
            self.commit_to(max_index)
            return True
        return False

    def applied_to(self, i: int) -> None:
        if i == 0:
            return
        if i > self.committed or i < self.applied:
            raise AssertionError(f"applied {i} out of range [{self.applied}, {self.committed}]")
        self.applied = i

    def has_next_committed_ents(self) -> bool:
        return self.committed > self.applied and self.applied + 1 >= self.first_index()

    def next_committed_ents(self) -> list[Entry]:
        """Committed entries not yet handed to the application, up to the size limit."""
        if not self.has_next_committed_ents():
            return []
        return self.slice(self.applied + 1, self.committed + 1, self.max_applying_size)

    # -- persistence cursors -----------------------------------------------------------
    def unstable_entries(self) -> list[Entry]:
        return self.unstable.entries

    def stable_to(self, index: int, term: int) -> None:
        self.unstable.stable_to(index, term)

    def stable_snap_to(self, index: int) -> None:
        self.unstable.stable_snap_to(index)

    def snapshot(self) -> Snapshot:
        if self.unstable.snapshot is not None:
            return self.unstable.snapshot
        return self.storage.snapshot()

    def restore(self, snap: Snapshot) -> None:
        """Replace the whole log by a snapshot received from the leader."""
        self.committed = snap.metadata.index
        self.unstable.restore(snap)

    # -- reads -----------------------------------------------------------------------
    def entries(self, i: int, max_size: int = NO_LIMIT) -> list[Entry]:
        if i > self.last_index():
            return []
        return self.slice(i, self.last_index() + 1, max_size)

    def all_entries(self) -> list[Entry]:
        return self.entries(self.first_index())

    def slice(self, lo: int, hi: int, max_size: int = NO_LIMIT) -> list[Entry]:
        """Entries [lo, hi) within `max_size` bytes (at least one); raises CompactedError."""
        if lo > hi:
            raise AssertionError(f"invalid slice {lo} > {hi}")
        if lo < self.first_index():
            raise CompactedError(f"index {lo} is compacted (first index {self.first_index()})")
        if hi > self.last_index() + 1:
            raise UnavailableError(f"slice [{lo}, {hi}) is out of bounds (last index {self.last_index()})")
        if lo == hi:
            return []
        off = self.unstable.offset
        ents: list[Entry] = []
        if lo < off:
            ents = self.storage.entries(lo, min(hi, off), max_size)
            if len(ents) < min(hi, off) - lo:
                return ents  # storage hit the size limit
        if hi > off:
            tail = self.unstable.slice(max(lo, off), hi)
            ents = ents + tail if ents else tail
        return ents if max_size >= NO_LIMIT else limit_size(ents, max_size)
