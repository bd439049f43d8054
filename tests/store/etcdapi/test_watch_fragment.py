"""A Watch created with `fragment` gets a revision larger than the member's largest request
message (--max-request-bytes 1.5 MiB + gRPC's 512 KiB) in several responses, each `fragment`
but the last, cut at event boundaries as etcd's sendFragments cuts them; a watch without it
gets the revision whole.  The same steps and checks run against raftkube and a real etcd
(Debian's 3.4), so the rule the checks state is etcd's."""

from __future__ import annotations

from typing import Any

import grpc

from store.etcdapi.messages import SERVICES, pb
from tests.store.etcdapi.watch_support import Stream, ser, target

__all__ = ["target"]  # the module's fixture

LIMIT = (3 << 19) + (512 << 10)
"""etcd's default max-request-bytes (1.5 MiB) and its gRPC overhead: fragments stay under it."""
KEYS = 300
VALUE = b"v" * (10 << 10)


def _unary(channel: grpc.Channel, service: str, name: str, req: Any) -> Any:
    method = SERVICES[service][name]
    call = channel.unary_unary(method.path, request_serializer=ser, response_deserializer=method.response.FromString)
    return call(req, timeout=10)


def _events(stream: Stream, count: int, *watch_ids: int) -> dict[int, list[Any]]:
    """Each watch's responses until they carry `count` events."""
    got: dict[int, list[Any]] = {w: [] for w in watch_ids}
    while any(sum(len(r.events) for r in rs) < count for rs in got.values()):
        r = stream.next()
        if r.watch_id in got and r.events:
            got[r.watch_id].append(r)
    return got


def test_a_large_revision_comes_in_fragments_only_to_the_watch_that_asked(target: str) -> None:
    channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", 16 << 20)])
    stream = Stream(channel)
    try:
        for i in range(KEYS):
            _unary(channel, "KV", "Put", pb.PutRequest(key=b"frag/%04d" % i, value=VALUE))
        for wid, fragment in ((1, True), (2, False)):
            create = pb.WatchCreateRequest(key=b"frag/", range_end=b"frag0", prev_kv=True, fragment=fragment)
            create.watch_id = wid
            stream.send(pb.WatchRequest(create_request=create))
            assert stream.next().created
        # one revision: 300 deletes, each with its 10 KiB previous value (~3.1 MB)
        _unary(channel, "KV", "DeleteRange", pb.DeleteRangeRequest(key=b"frag/", range_end=b"frag0"))

        got = _events(stream, KEYS, 1, 2)
        whole, pieces = got[2], got[1]
        assert len(whole) == 1 and not whole[0].fragment and whole[0].ByteSize() > LIMIT
        assert len(pieces) >= 2
        assert [p.fragment for p in pieces] == [True] * (len(pieces) - 1) + [False]
        keys = [e.kv.key for p in pieces for e in p.events]
        assert keys == [e.kv.key for e in whole[0].events]  # the same events, in order, once
        assert all(e.prev_kv.value == VALUE for p in pieces for e in p.events)
        assert len({p.header.revision for p in pieces}) == 1
        for i, p in enumerate(pieces):
            assert p.ByteSize() < LIMIT or len(p.events) == 1
            if i < len(pieces) - 1:  # as many events as fit: the next one would have passed it
                grown = pb.WatchResponse()
                grown.CopyFrom(p)
                grown.events.append(pieces[i + 1].events[0])
                assert grown.ByteSize() >= LIMIT
    finally:
        stream.close()
        channel.close()
