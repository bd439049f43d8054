"""Raft messages on the wire: msgpack arrays, entries as [term, index, type, data]."""

from __future__ import annotations

from typing import Any

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


def message_to_wire(m: Message) -> list[Any]:
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
        [[e.term, e.index, int(e.type), e.data] for e in m.entries],
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
