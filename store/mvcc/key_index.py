"""The retained history of one key (etcd's keyIndex), oldest change first.

etcd describes a key's life as generations: a generation starts with the put that creates
the key (version 1) and ends with the tombstone that deletes it; the next put starts a new
generation, so the version restarts at 1 and create_revision is that put's revision.  Here
a key's changes are stored flat, in two parallel lists, because lookups by revision are then
one `bisect` and the write path is two appends:

    revs[i]  the main revision of change i (strictly increasing)
    kvs[i]   the KeyValue written by change i, or None for a tombstone

A None closes a generation; `generations()` rebuilds etcd's view for tests and debugging.
Each KeyValue carries its own create_revision and version, so no per-generation counters
are needed.  A key changes at most once per revision (a txn that writes a key twice is
refused), which is what makes `revs` strictly increasing.

Compaction at revision c keeps every change after c plus the newest change at or before c
if it is a put (the value a read at c must see); a tombstone at or before c is dropped, and
a key left with no changes leaves the index.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from store.api.kv import KeyValue
from store.mvcc.revision import Revision


@dataclass(slots=True)
class Generation:
    """One life of a key, from its creating put to its tombstone (if any)."""

    created: int
    """Main revision of the put that started it (0 when compaction removed that put)."""
    version: int
    """Number of changes in the generation, tombstone included (etcd's `ver`)."""
    revs: list[Revision] = field(default_factory=list)
    closed: bool = False


class KeyIndex:
    __slots__ = ("key", "kvs", "revs")

    def __init__(self, key: bytes) -> None:
        self.key = key
        self.revs: list[int] = []
        self.kvs: list[KeyValue | None] = []

    def __repr__(self) -> str:
        return f"KeyIndex({self.key!r}, revs={self.revs})"

    def latest(self) -> KeyValue | None:
        """The key's current value, None if it is deleted."""
        return self.kvs[-1]

    def get(self, at_rev: int) -> KeyValue | None:
        """The value at revision `at_rev` (the newest change <= at_rev), None if missing then.
        The caller has checked that `at_rev` is not compacted."""
        revs = self.revs
        if revs[-1] <= at_rev:
            return self.kvs[-1]
        i = bisect_right(revs, at_rev) - 1
        return self.kvs[i] if i >= 0 else None

    def put(self, rev: int, kv: KeyValue) -> None:
        self.revs.append(rev)
        self.kvs.append(kv)

    def tombstone(self, rev: int) -> None:
        self.revs.append(rev)
        self.kvs.append(None)

    def since(self, rev: int) -> list[int]:
        """Main revisions of the changes after `rev`."""
        return self.revs[bisect_right(self.revs, rev) :]

    def compact(self, at_rev: int) -> bool:
        """Drop what no read at or after `at_rev` needs; returns True when nothing is left."""
        revs = self.revs
        i = bisect_right(revs, at_rev) - 1  # the newest change at or before at_rev
        if i < 0:
            return False
        if self.kvs[i] is None:
            i += 1  # a tombstone: nobody can read the deleted value any more
        if i:
            del revs[:i]
            del self.kvs[:i]
        return not revs

    def is_empty(self) -> bool:
        return not self.revs

    def generations(self) -> list[Generation]:
        """etcd's generation view of the retained changes (sub revisions are not kept: 0)."""
        gens: list[Generation] = []
        cur: Generation | None = None
        for rev, kv in zip(self.revs, self.kvs, strict=True):
            if cur is None:
                created = kv.create_revision if kv is not None else 0
                cur = Generation(created, kv.version - 1 if kv is not None else 0)
                gens.append(cur)
            cur.revs.append(Revision(rev))
            cur.version += 1
            if kv is None:
                cur.closed = True
                cur = None
        return gens
