"""Raft messages survive the wire unchanged, and malformed ones are refused with a typed error."""

from __future__ import annotations

import msgpack
import pytest

from store.api.errors import ProtocolError
from store.raft.types import ConfState, Entry, EntryType, Message, MessageType, Snapshot, SnapshotMetadata
from store.server.raft_codec import message_from_wire, message_to_wire


def _wire_round_trip(m: Message) -> Message:
    return message_from_wire(msgpack.unpackb(msgpack.packb(message_to_wire(m), use_bin_type=True), raw=False))


def test_append_round_trip() -> None:
    """An append with entries of both kinds keeps every field."""
    m = Message(
        type=MessageType.APP,
        to=2,
        frm=1,
        term=5,
        log_term=4,
        index=10,
        entries=[Entry(5, 11, EntryType.NORMAL, b"a"), Entry(5, 12, EntryType.CONF_CHANGE, b"\x00" * 9)],
        commit=9,
        context=b"ctx",
    )
    assert _wire_round_trip(m) == m


def test_snapshot_and_reject_round_trip() -> None:
    """A snapshot message (with learners) and a rejected response keep every field."""
    snap = Snapshot(SnapshotMetadata(100, 7, ConfState((1, 2, 3), (4,))), b"state")
    m = Message(type=MessageType.SNAP, to=3, frm=1, term=7, snapshot=snap)
    assert _wire_round_trip(m) == m
    r = Message(type=MessageType.APP_RESP, to=1, frm=2, term=7, index=50, reject=True, reject_hint=40, log_term=6)
    assert _wire_round_trip(r) == r


@pytest.mark.parametrize(
    "wire", [[], [999, 1, 2], [int(MessageType.APP), 1, 2, 3, 4, 5, [[1]], 0, None, False, 0, b""]]
)
def test_malformed_message_is_protocol_error(wire: list[object]) -> None:
    """Short arrays, unknown types and bad entries raise ProtocolError, never something untyped."""
    with pytest.raises(ProtocolError):
        message_from_wire(wire)


def test_batch_frame_equals_generic_encoding() -> None:
    """Frames with once-packed entries are byte-identical to the generic encoding."""
    from store.api.framing import encode_frame
    from store.server.raft_codec import BatchEncoder

    ents = [Entry(3, 7, EntryType.NORMAL, b"x" * 10), Entry(3, 8, EntryType.NORMAL, b"y")]
    to2 = Message(type=MessageType.APP, to=2, frm=1, term=3, log_term=3, index=6, entries=ents, commit=5)
    to3 = Message(type=MessageType.APP, to=3, frm=1, term=3, log_term=3, index=6, entries=list(ents), commit=5)
    beat = Message(type=MessageType.HEARTBEAT, to=2, frm=1, term=3, commit=5)
    enc = BatchEncoder()
    for batch in ([to2, beat], [to3]):
        assert enc.frame(batch) == encode_frame(["m", [message_to_wire(m) for m in batch]])
    assert len(enc._entries) == 1
