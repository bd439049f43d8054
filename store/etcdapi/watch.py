"""etcd's Watch call: one bidirectional stream carrying many watches, served by the member's
watch hub through the same WatchStreams as our own protocol (store/server/watch_streams.py),
so an etcd client that stops reading is paused, then cut off, exactly as ours is.

What an etcd client sees is etcd's (server/etcdserver/api/v3rpc/watch.go):
* watch ids are the stream's own, from 0 (or the one the client asked for); a create is
  answered `created` at the current revision; a create that cannot be (a duplicate id, an
  empty range, a negative start) is answered created-and-canceled with etcd's reason;
* a watch from a compacted revision gets its `created` response, then a canceled one with
  `compact_revision` set;
* a cancel of a watch of this stream is answered `canceled`; of any other id, not at all;
* a progress request is answered, when every watch of the stream has been sent everything,
  by one response with watch id -1 at the revision they all reached; otherwise (and on a
  stream with no watches) not at all — a client asks again (kube-apiserver every 100 ms);
* a client's half-close ends nothing: the watches go on until the call is cancelled.

A watch created with `fragment` gets a response larger than the member's largest request
message (--max-request-bytes + 512 KiB, as etcd) split into several, each `fragment` but the
last, at event boundaries; one event is never split (etcd's sendFragments).

Several Watch calls on one HTTP/2 connection (kube-apiserver opens one per resource) are one
client as far as limits go: MAX_WATCHES_PER_CONNECTION counts the watches of all of them, and
what the connection has not sent yet is shared between them, so that a connection that reads
is not cut off for its streams' bytes counted once per stream.

Responses are assembled from serialized pieces (`EtcdWatchEncoder`): every event is
serialized once per dispatch round however many watchers get it.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from machinery.http2 import ENHANCE_YOUR_CALM, Http2Connection
from store.api import errors as E
from store.api.kv import Event
from store.api.watch import WatchResponse
from store.etcdapi import convert
from store.etcdapi.grpc import Call, frame_message
from store.etcdapi.messages import pb
from store.server.watch_streams import WatchStreams

INVALID_WATCH_ID = -1
DUPLICATE_ID = "mvcc: duplicate watch ID provided on the WatchStream"
EMPTY_RANGE = "mvcc: watcher range is empty"
COMPACTED = "mvcc: required revision has been compacted"

# protobuf tags of WatchResponse's fields (etcdserverpb/rpc.proto)
_HEADER, _WATCH_ID, _CREATED, _CANCELED, _COMPACT, _REASON, _EVENTS = 0x0A, 0x10, 0x18, 0x20, 0x28, 0x32, 0x5A
_FRAGMENT = b"\x38\x01"  # fragment = 7, true


class FragmentedId(int):
    """The stream's id of a watch that asked for `fragment`: what WatchCall.token gives the
    round's encoder, which splits that watch's large responses (the encoder is shared by every
    etcd stream of the round, so the choice travels with the id)."""

    __slots__ = ()


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _len_field(tag: int, data: bytes) -> bytes:
    return bytes((tag,)) + _varint(len(data)) + data


class EtcdWatchEncoder:
    """The gRPC messages of one dispatch round (etcd WatchResponses, framed)."""

    def __init__(self, header: list[int], fragment_bytes: int = 0) -> None:
        self._header_field = _len_field(_HEADER, convert.header(header).SerializeToString())
        self._header = header
        self._events: dict[int, bytes] = {}
        self.fragment_bytes = fragment_bytes
        """A response of a fragmenting watch at least this large is split (0: none is)."""

    def _event(self, e: Event) -> bytes:
        b = self._events.get(id(e))
        if b is None:
            ev = pb.Event(type=int(e.type), kv=convert.key_value(e.kv))
            if e.prev_kv is not None:
                ev.prev_kv.CopyFrom(convert.key_value(e.prev_kv))
            b = self._events[id(e)] = _len_field(_EVENTS, ev.SerializeToString())
        return b

    def _message(
        self, watch_id: int, resp: WatchResponse, *, created: bool, canceled: bool, fragment: bool = False
    ) -> bytes:
        compacted = canceled and resp.compact_revision != 0
        # etcd cancels a watch that fell behind a compaction with a header at revision 0 and no
        # reason, only compact_revision (v3rpc/watch.go sendLoop)
        revision = 0 if compacted else resp.revision
        parts = [
            _len_field(_HEADER, convert.header(self._header, revision).SerializeToString())
            if revision != self._header[2]
            else self._header_field
        ]
        if watch_id:
            parts.append(bytes((_WATCH_ID,)) + _varint(watch_id))
        if created:
            parts.append(b"\x18\x01")
        if canceled:
            parts.append(b"\x20\x01")
            if resp.compact_revision:
                parts.append(bytes((_COMPACT,)) + _varint(resp.compact_revision))
            if resp.cancel_reason and not compacted:
                parts.append(_len_field(_REASON, resp.cancel_reason.encode()))
        events = [self._event(e) for e in resp.events]
        if fragment and len(events) > 1:
            head = sum(map(len, parts))
            if head + sum(map(len, events)) >= self.fragment_bytes:
                return self._fragments(parts, head, events)
        return frame_message(b"".join([*parts, *events]))

    def _fragments(self, parts: list[bytes], head: int, events: list[bytes]) -> bytes:
        """etcd's sendFragments: as many events a response as keep it under `fragment_bytes`
        (at least one), every response `fragment` but the last."""
        out: list[bytes] = []
        i = 0
        while i < len(events):
            size, j = head + len(_FRAGMENT), i
            while j < len(events) and (j == i or size + len(events[j]) < self.fragment_bytes):
                size += len(events[j])
                j += 1
            more = [_FRAGMENT] if j < len(events) else []
            out.append(frame_message(b"".join([*parts, *more, *events[i:j]])))
            i = j
        return b"".join(out)

    def watch_frame(self, token: int, resp: WatchResponse) -> bytes:
        if resp.created and resp.canceled:  # from the hub (a compacted start): created, then canceled apart
            return self._message(token, resp, created=True, canceled=False) + self._message(
                token, resp, created=False, canceled=True
            )
        fragment = type(token) is FragmentedId and self.fragment_bytes > 0
        return self._message(token, resp, created=resp.created, canceled=resp.canceled, fragment=fragment)


_WATCH_CALLS: WeakKeyDictionary[Http2Connection, set[WatchCall]] = WeakKeyDictionary()
"""Each connection's live Watch calls (the connection's limits are theirs together)."""


class WatchCall:
    """The server side of one Watch call: a streaming handler for grpc.py, and a watch owner
    for WatchStreams."""

    def __init__(self, call: Call, streams: WatchStreams, header: Any, fragment_bytes: int) -> None:
        self.call = call
        self.streams = streams
        self.header = header
        self.fragment_bytes = fragment_bytes
        self.watches: dict[int, int] = {}
        """Hub watch id -> this stream's watch id."""
        self._ids: dict[int, int] = {}
        """This stream's watch id -> hub watch id."""
        self._next_id = 0
        self._progress_all: set[int] = set()
        """Hub watch ids whose next progress response answers a progress request (id -1)."""
        self._fragmenting: set[int] = set()
        """Hub watch ids created with `fragment`."""
        self._siblings = _WATCH_CALLS.setdefault(call.stream.conn, set())
        """The Watch calls of this call's connection, this one included."""
        self._siblings.add(self)

    # -- WatchOwner ---------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self.call.closed

    @property
    def peer(self) -> str:
        return self.call.peer

    def backlog(self) -> int:
        """What this stream has queued, and its share of what the connection has not sent: the
        shares of a connection's Watch calls add up to what it owes, once."""
        stream = self.call.stream
        return stream.queued + stream.conn.transport_backlog() // max(1, len(self._siblings))

    def connection_watches(self) -> int:
        return sum(len(c.watches) for c in self._siblings)

    def send(self, data: bytes) -> None:
        self.call.send_encoded(data)

    def abort(self) -> None:
        self.call.abort()

    def frame_encoder(self, header: list[int]) -> EtcdWatchEncoder:
        return EtcdWatchEncoder(header, self.fragment_bytes)

    def token(self, resp: WatchResponse) -> int | None:
        local = self.watches.get(resp.watch_id)
        if local is None:
            return None
        if resp.canceled:
            self._ids.pop(local, None)
            self._fragmenting.discard(resp.watch_id)
        elif resp.watch_id in self._progress_all and resp.is_progress_notify:
            self._progress_all.discard(resp.watch_id)
            return INVALID_WATCH_ID
        elif resp.watch_id in self._fragmenting:
            return FragmentedId(local)
        return local

    # -- StreamingHandler ---------------------------------------------------------------
    def message(self, msg: Any) -> None:
        which = msg.WhichOneof("request_union")
        if which == "create_request":
            self._create(msg.create_request)
        elif which == "cancel_request":
            self._cancel(msg.cancel_request.watch_id)
        elif which == "progress_request":
            wid = self.streams.state.hub.progress_if_all_synced(list(self.watches))
            if wid is not None:
                self._progress_all.add(wid)
                self.streams.schedule()
        # anything else is ignored, as etcd does (it does not end the stream)

    def half_closed(self) -> None:
        """The client sends no more requests; its watches go on (etcd's recvLoop ends quietly)."""

    def cancelled(self) -> None:
        self.streams.drop(self)
        self._ids.clear()
        self._fragmenting.clear()
        self._siblings.discard(self)

    # -- requests -----------------------------------------------------------------------
    def _refuse(self, reason: str) -> None:
        """etcd's answer to a create it cannot make: ONE response, created and canceled with the
        reason, watch id -1 (clientv3 takes its error from that response; a created response
        without the reason first would end the client's watch with an empty error)."""
        rev = self.header()[2]
        resp = WatchResponse(0, rev, created=True, canceled=True, cancel_reason=reason)
        self._send_now(EtcdWatchEncoder(self.header())._message(INVALID_WATCH_ID, resp, created=True, canceled=True))

    def _send_now(self, framed: bytes) -> None:
        """An answer sent outside the hub's rounds (a refused create, a cancel), which the hub's
        pausing does not hold back: a client that keeps asking and never reads is reset once its
        stream owes more than watch_backlog_limit (its watches end with it)."""
        self.call.send_encoded(framed)
        unread, limit = self.call.stream.queued, self.streams.limit_bytes
        if unread > limit:
            self.call.reset(
                ENHANCE_YOUR_CALM, f"{unread} bytes of watch answers unread, over watch_backlog_limit ({limit})"
            )

    def _create(self, creq: Any) -> None:
        if creq.start_revision < 0:
            self._refuse(COMPACTED)
            return
        try:
            req = convert.watch_create(creq)
        except convert.GrpcStatus as s:
            self._refuse(s.message)
            return
        if not req.key:
            req.key = b"\0"  # etcd: \x00 is the smallest key
        if req.range_end not in (b"", b"\0") and req.key >= req.range_end:
            self._refuse(EMPTY_RANGE)
            return
        local = creq.watch_id
        if local == 0:
            while self._next_id in self._ids:
                self._next_id += 1
            local = self._next_id
            self._next_id += 1
        elif local < 0 or local in self._ids:
            self._refuse(DUPLICATE_ID)
            return
        try:
            hub_id = self.streams.create(self, local, req)
        except E.StoreError as e:
            self._refuse(convert.status_of(e).message)
            return
        self._ids[local] = hub_id
        if creq.fragment:
            self._fragmenting.add(hub_id)

    def _cancel(self, local: int) -> None:
        hub_id = self._ids.pop(local, None)
        if hub_id is None or hub_id not in self.watches:
            return  # not a watch of this stream (any more): etcd answers nothing
        self.streams.cancel(self, hub_id)
        self._progress_all.discard(hub_id)
        self._fragmenting.discard(hub_id)
        resp = WatchResponse(hub_id, self.header()[2], canceled=True)
        self._send_now(EtcdWatchEncoder(self.header()).watch_frame(local, resp))
