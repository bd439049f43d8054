"""Raft messages on the wire: msgpack arrays, entries as [term, index, type, data]."""

from __future__ import annotations

import struct
from typing import Any

import msgpack

from store.api.errors import ProtocolError
from store.raft.types import (
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
)


def entry_to_wire(e: Entry) -> list[Any]:
    return [e.term, e.index, int(e.type), e.data]


def entry_from_wire(w: list[Any]) -> Entry:
    return Entry(w[0], w[1], EntryType(w[2]), w[3])


def snapshot_meta_to_wire(m: SnapshotMetadata) -> list[Any]:
    return [m.index, m.term, list(m.conf_state.voters), list(m.conf_state.learners)]


def snapshot_meta_from_wire(w: list[Any]) -> SnapshotMetadata:
    return SnapshotMetadata(index=w[0], term=w[1], conf_state=ConfState(tuple(w[2]), tuple(w[3])))


ENTRIES_FIELD = 6
"""Position of the entries in a message's wire array."""


def message_to_wire(m: Message, with_entries: bool = True) -> list[Any]:
    """The wire array of `m`; without entries, field ENTRIES_FIELD is left empty."""
    snap = None
    if m.snapshot is not None:
        snap = [snapshot_meta_to_wire(m.snapshot.metadata), m.snapshot.data]
    return [
        int(m.type),
        m.to,
        m.frm,
        m.term,
        m.log_term,
        m.index,
        [[e.term, e.index, int(e.type), e.data] for e in m.entries] if with_entries else [],
        m.commit,
        snap,
        m.reject,
        m.reject_hint,
        m.context,
    ]


def message_from_wire(w: list[Any]) -> Message:
    try:
        snap = None
        if w[8] is not None:
            snap = Snapshot(snapshot_meta_from_wire(w[8][0]), w[8][1])
        return Message(
            type=MessageType(w[0]),
            to=w[1],
            frm=w[2],
            term=w[3],
            log_term=w[4],
            index=w[5],
            entries=[Entry(t, i, EntryType(k), d) for t, i, k, d in w[6]],
            commit=w[7],
            snapshot=snap,
            reject=w[9],
            reject_hint=w[10],
            context=w[11],
        )
    except (IndexError, TypeError, ValueError) as e:
        raise ProtocolError(f"malformed raft message: {e}") from e


_LEN = struct.Struct(">I")


class BatchEncoder:
    """Frames of ["m", [message, ...]] with each run of entries packed once.

    A leader sends the same new entries to every follower in one Ready; packing them once
    and splicing the bytes into each follower's frame saves a pass over every entry per
    extra follower.  Use one encoder per send (its cache is keyed by object identity)."""

    def __init__(self) -> None:
        self._packer = msgpack.Packer(use_bin_type=True)
        self._entries: dict[tuple[int, int], bytes] = {}

    def _packed_entries(self, m: Message) -> bytes:
        key = (id(m.entries[0]), len(m.entries))
        b = self._entries.get(key)
        if b is None:
            b = self._packer.pack([[e.term, e.index, int(e.type), e.data] for e in m.entries])
            self._entries[key] = b
        return b

    def frame(self, msgs: list[Message]) -> bytes:
        p = self._packer
        parts = [p.pack_array_header(2), p.pack("m"), p.pack_array_header(len(msgs))]
        for m in msgs:
            if not m.entries:
                parts.append(p.pack(message_to_wire(m)))
                continue
            w = message_to_wire(m, with_entries=False)
            parts.append(p.pack_array_header(len(w)))
            for i, value in enumerate(w):
                parts.append(self._packed_entries(m) if i == ENTRIES_FIELD else p.pack(value))
        body = b"".join(parts)
        return _LEN.pack(len(body)) + body
