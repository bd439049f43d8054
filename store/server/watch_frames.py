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
from store.api.watch import WatchResponse

_LEN = struct.Struct(">I")


class WatchFrameEncoder:
    """Encodes the WatchResponses of one dispatch round; discard it after the round (its cache
    is keyed by object identity, valid only while the events are alive)."""

    def __init__(self, header_wire: list[int]) -> None:
        self._packer = msgpack.Packer(use_bin_type=True)
        self._header = self._packer.pack(header_wire)
        self._events: dict[int, bytes] = {}
        self._arrays: dict[tuple[int, ...], bytes] = {}

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
        key = tuple(map(id, events))
        b = self._arrays.get(key)
        if b is None:
            b = self._packer.pack_array_header(len(events)) + b"".join([self._event(e) for e in events])
            self._arrays[key] = b
        return b

    def frame(self, request_id: int, kind: int, resp: WatchResponse) -> bytes:
        """[request_id, kind, header, resp.to_wire()] as one length-prefixed frame."""
        p = self._packer
        body = b"".join(
            (
                p.pack_array_header(4),
                p.pack(request_id),
                p.pack(kind),
                self._header,
                p.pack_array_header(7),
                p.pack(resp.watch_id),
                p.pack(resp.revision),
                self._events_array(resp.events),
                p.pack(resp.created),
                p.pack(resp.canceled),
                p.pack(resp.compact_revision),
                p.pack(resp.cancel_reason),
            )
        )
        return _LEN.pack(len(body)) + body
