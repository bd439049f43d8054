"""The msgpack form of a KVStore: one byte string restores keys, history, compaction point
and leases (lease key attachments are rebuilt from the live keys).

Layout (an array, version first so the format can change):
    [1, revision, compact_revision,
     kept,      # [[key, create, mod, version, value, lease], ...]: values kept at or below the
                # compaction point (the newest put per key), in key order
     history,   # one entry per revision after the compaction point, oldest first; an entry is
                # the list of that revision's changes in sub order: [key, value, lease] for a
                # put, [key] for a delete.  Create revisions, versions and prev_kv follow from
                # replaying them, so they are not stored twice.
     leases]    # [[id, granted_ttl], ...]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from store.api.kv import Event, EventType, KeyValue

FORMAT = 1


@dataclass(slots=True)
class Snapshot:
    revision: int
    compact: int
    kept: list[KeyValue]
    history: list[list[list[Any]]]
    leases: list[tuple[int, int]]


def encode(
    revision: int, compact: int, kept: list[KeyValue], history: list[list[Event]], leases: list[tuple[int, int]]
) -> bytes:
    hist = [
        [[ev.kv.key, ev.kv.value, ev.kv.lease] if ev.type is EventType.PUT else [ev.kv.key] for ev in evs]
        for evs in history
    ]
    kept_w = [[kv.key, kv.create_revision, kv.mod_revision, kv.version, kv.value, kv.lease] for kv in kept]
    out: bytes = msgpack.packb([FORMAT, revision, compact, kept_w, hist, [list(le) for le in leases]])
    return out


def decode(data: bytes) -> Snapshot:
    w = msgpack.unpackb(data)
    if not isinstance(w, list) or not w or w[0] != FORMAT:
        raise ValueError(f"not a raftkube KV snapshot (format {w[0] if isinstance(w, list) and w else '?'})")
    _, revision, compact, kept_w, hist, leases = w
    kept = [KeyValue(k[0], k[1], k[2], k[3], k[4], k[5]) for k in kept_w]
    return Snapshot(revision, compact, kept, hist, [(le[0], le[1]) for le in leases])
