"""Watch responses as wire frames, with every event serialized once per dispatch round.

A hundred watchers on one prefix receive the same Event objects (the hub shares them), so
encoding each response from scratch would pack every event a hundred times.  Instead each
event is packed once (cached by identity for the round) and a watcher's frame is assembled
from the packed pieces: msgpack arrays are a header followed by their packed elements.
"""

from __future__ import annotations

import struct

import msgpack

from store.api.kv import Event
from store.api.protocol import END, STREAM
from store.api.watch import WatchResponse

_LEN = struct.Struct(">I")
_ARRAY4 = msgpack.packb([None] * 4)[:1]
_ARRAY7 = msgpack.packb([None] * 7)[:1]
_PLAIN_TAIL = msgpack.packb(False) + msgpack.packb(False) + msgpack.packb(0) + msgpack.packb("")
"""created, canceled, compact_revision, cancel_reason of an ordinary response, packed once."""


class WatchFrameEncoder:
    """Encodes the WatchResponses of one dispatch round; discard it after the round (its cache
    is keyed by object identity, valid only while the events are alive)."""

    def __init__(self, header_wire: list[int]) -> None:
        self._packer = msgpack.Packer(use_bin_type=True)
        self._header = self._packer.pack(header_wire)
        self._events: dict[int, bytes] = {}
        self._arrays: dict[tuple[int, ...], bytes] = {}
        self._lists: dict[int, tuple[list[Event], bytes]] = {}
        """By identity of the list itself: watchers of one feed share their list of events.
        The list is kept referenced, so that its id cannot be reused within the round."""

    def _event(self, e: Event) -> bytes:
        b = self._events.get(id(e))
        if b is None:
            kv = e.kv
            prev = e.prev_kv
            b = self._packer.pack(
                [
                    int(e.type),
                    [kv.key, kv.create_revision, kv.mod_revision, kv.version, kv.value, kv.lease],
                    None
                    if prev is None
                    else [prev.key, prev.create_revision, prev.mod_revision, prev.version, prev.value, prev.lease],
                ]
            )
            self._events[id(e)] = b
        return b

    def _events_array(self, events: list[Event]) -> bytes:
        """The packed array of `events`; watchers of one prefix usually get the very same
        sequence of Event objects, so whole arrays are cached too (keyed by identities)."""
        shared = self._lists.get(id(events))
        if shared is not None:
            return shared[1]
        key = tuple(map(id, events))
        b = self._arrays.get(key)
        if b is None:
            b = self._packer.pack_array_header(len(events)) + b"".join([self._event(e) for e in events])
            self._arrays[key] = b
        self._lists[id(events)] = (events, b)
        return b

    def watch_frame(self, request_id: int, resp: WatchResponse) -> bytes:
        """The frame of `resp` on the watch stream of `request_id`: STREAM, or END once canceled."""
        return self.frame(request_id, END if resp.canceled else STREAM, resp)

    def frame(self, request_id: int, kind: int, resp: WatchResponse) -> bytes:
        """[request_id, kind, header, resp.to_wire()] as one length-prefixed frame."""
        p = self._packer
        if resp.created or resp.canceled or resp.compact_revision or resp.cancel_reason:
            tail = (
                p.pack(resp.created)
                + p.pack(resp.canceled)
                + p.pack(resp.compact_revision)
                + p.pack(resp.cancel_reason)
            )
        else:
            tail = _PLAIN_TAIL
        body = b"".join(
            (
                _ARRAY4,
                p.pack(request_id),
                p.pack(kind),
                self._header,
                _ARRAY7,
                p.pack(resp.watch_id),
                p.pack(resp.revision),
                self._events_array(resp.events),
                tail,
            )
        )
        return _LEN.pack(len(body)) + body
