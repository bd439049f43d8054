"""Watch events of either backend, cut into one batch per revision.

Both the store and etcd send all events of one revision in one response, but a response may
hold several revisions; the Storage contract promises one batch per revision.
"""

from __future__ import annotations

from collections.abc import Iterable

from apiserver.storage.interface import StorageEvent


def event(is_delete: bool, key: bytes, value: bytes, revision: int, prev: bytes | None) -> StorageEvent:
    """A StorageEvent from a backend event: a delete carries the last value (from prev_kv)."""
    k = key.decode("utf-8", errors="surrogateescape")
    if is_delete:
        return StorageEvent("delete", k, prev if prev is not None else b"", revision, prev)
    return StorageEvent("put", k, value, revision, prev)


def by_revision(events: Iterable[StorageEvent]) -> list[list[StorageEvent]]:
    """Consecutive events of the same revision grouped, in order."""
    out: list[list[StorageEvent]] = []
    for e in events:
        if out and out[-1][-1].revision == e.revision:
            out[-1].append(e)
        else:
            out.append([e])
    return out
