"""A deterministic hash of the retained KV state, to check that members hold the same data.

Like etcd's HashKV it covers every retained change (live values, older versions and
tombstones after the compaction point) up to a revision, not just the live keys, so two
members that applied different histories with the same end state still differ.  Leases
are not covered (etcd does not cover them either).
"""

from __future__ import annotations

import struct
import zlib

from store.mvcc.index import Index

_PUT = struct.Struct(">BqqqqII")
_TOMB = struct.Struct(">BqI")


def hash_index(index: Index, revision: int) -> int:
    h = zlib.crc32(b"raftkube-kv")
    for ki in index:
        key = ki.key
        for rev, kv in zip(ki.revs, ki.kvs, strict=True):
            if rev > revision:
                break
            if kv is None:
                h = zlib.crc32(_TOMB.pack(1, rev, len(key)) + key, h)
            else:
                head = _PUT.pack(0, rev, kv.create_revision, kv.version, kv.lease, len(key), len(kv.value))
                h = zlib.crc32(head + key + kv.value, h)
    return h
