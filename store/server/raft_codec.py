"""Raft messages on the wire: msgpack arrays, entries as [term, index, type, data]."""

from __future__ import annotations

import struct
from typing import Any

import msgpack

from store.api.errors import ProtocolError, StoreError
from store.api.wire import INT64_MAX, Fields, check_bytes, check_int
from store.raft.types import (
    LOCAL_MESSAGES,
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
)

MAX_ENTRY_BYTES = 1 << 26
"""No entry's data can be larger than a peer frame."""
MAX_MEMBERS = 1 << 10


def entry_to_wire(e: Entry) -> list[Any]:
    return [e.term, e.index, int(e.type), e.data]


def entry_from_wire(w: list[Any]) -> Entry:
    return Entry(w[0], w[1], EntryType(w[2]), w[3])


def snapshot_meta_to_wire(m: SnapshotMetadata) -> list[Any]:
    return [m.index, m.term, list(m.conf_state.voters), list(m.conf_state.learners)]


def snapshot_meta_from_wire(w: Any, path: str = "snapshot") -> SnapshotMetadata:
    """Raises ProtocolError naming the field when `w` is not a snapshot's metadata."""
    try:
        f = Fields(w, path, 4)
        index, term = f.integer("index"), f.integer("term")
        voters, vpath = f.array("voters", MAX_MEMBERS)
        learners, lpath = f.array("learners", MAX_MEMBERS)
        conf = ConfState(
            tuple(check_int(v, f"{vpath}[{i}]", lo=1) for i, v in enumerate(voters)),
            tuple(check_int(v, f"{lpath}[{i}]", lo=1) for i, v in enumerate(learners)),
        )
    except StoreError as e:
        raise ProtocolError(f"malformed raft message: {e.message}") from None
    return SnapshotMetadata(index=index, term=term, conf_state=conf)


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


def message_from_wire(w: Any) -> Message:
    """A peer's message, every field checked: ids in [1, 2^63), terms and indexes in
    [0, 2^63), entries well-formed, no local-only message types.  Anything else is a
    ProtocolError naming the field (the connection it came on is closed)."""
    try:
        f = Fields(w, "message", 12)
        kind = f.enum("type", MessageType)
        if kind in LOCAL_MESSAGES:
            raise Fields.fail("message.type", f"{kind.name} is never sent between members")
        to, frm = f.integer("to", lo=1), f.integer("from", lo=1)
        term, log_term, index = f.integer("term"), f.integer("log_term"), f.integer("index")
        raw_entries, epath = f.array("entries")
        entries = [_entry_from_wire(e, f"{epath}[{i}]") for i, e in enumerate(raw_entries)]
        commit = f.integer("commit")
        raw_snap, spath = f.any("snapshot")
        snap = None
        if raw_snap is not None:
            sf = Fields(raw_snap, spath, 2)
            meta_w, mpath = sf.any("metadata")
            meta = snapshot_meta_from_wire(meta_w, mpath)
            snap = Snapshot(meta, sf.blob("data", max_len=INT64_MAX))
        reject, reject_hint = f.flag("reject"), f.integer("reject_hint")
        context = f.blob("context", max_len=1024)
    except StoreError as e:
        raise ProtocolError(f"malformed raft message: {e.message}") from None
    return Message(
        type=kind,
        to=to,
        frm=frm,
        term=term,
        log_term=log_term,
        index=index,
        entries=entries,
        commit=commit,
        snapshot=snap,
        reject=reject,
        reject_hint=reject_hint,
        context=context,
    )


def _entry_from_wire(w: Any, path: str) -> Entry:
    if type(w) is not list or len(w) != 4:
        raise Fields.fail(path, "expected [term, index, type, data]")
    term, index, kind, data = w
    check_int(term, f"{path}.term")
    check_int(index, f"{path}.index")
    if type(kind) is not int or kind not in _ENTRY_TYPES:
        raise Fields.fail(f"{path}.type", f"{kind!r} is not an entry type")
    check_bytes(data, f"{path}.data", MAX_ENTRY_BYTES)
    return Entry(term, index, _ENTRY_TYPES[kind], data)


_ENTRY_TYPES = {int(t): t for t in EntryType}


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
