"""Watch frames assembled from once-packed events decode to exactly what to_wire() gives."""

from __future__ import annotations

import msgpack

from store.api.framing import encode_frame
from store.api.kv import Event, EventType, KeyValue
from store.api.protocol import STREAM
from store.api.watch import WatchResponse
from store.server.watch_frames import WatchFrameEncoder


def test_frame_equals_generic_encoding() -> None:
    """Byte for byte the same frame as the generic encoder, for events with and without prev_kv."""
    kv = KeyValue(b"k", 2, 5, 3, b"v", 7)
    prev = KeyValue(b"k", 2, 4, 2, b"u", 0)
    events = [Event(EventType.PUT, kv, prev), Event(EventType.DELETE, KeyValue(b"j", 0, 5, 0, b""))]
    resp = WatchResponse(watch_id=9, revision=5, events=events)
    header = [1, 2, 5, 3]
    enc = WatchFrameEncoder(header)
    frame = enc.frame(42, STREAM, resp)
    assert frame == encode_frame([42, STREAM, header, resp.to_wire()])
    body = msgpack.unpackb(frame[4:], raw=False)
    assert WatchResponse.from_wire(body[3]) == resp


def test_shared_events_are_packed_once() -> None:
    """Two watchers with the same Event objects reuse the packed bytes."""
    ev = Event(EventType.PUT, KeyValue(b"a", 2, 2, 1, b"x"))
    enc = WatchFrameEncoder([0, 0, 2, 1])
    a = enc.frame(1, STREAM, WatchResponse(1, 2, [ev]))
    b = enc.frame(2, STREAM, WatchResponse(2, 2, [ev]))
    assert len(enc._events) == 1
    assert msgpack.unpackb(a[4:])[3][2] == msgpack.unpackb(b[4:])[3][2]
