"""RequestProgress on an etcd Watch stream, as kube-apiserver uses it for consistent reads from
its watch cache (every 100 ms while a LIST waits): raftkube answers as etcd does, side by side
with a real etcd (Debian's 3.4).  With the stream's watches all caught up, one response with
watch id -1, no events, at the store's revision.  On a stream without watches raftkube answers
nothing, as etcd 3.5+ (which answers only when every watch of the stream is synced, its fix of
bookmarks ahead of undelivered events); etcd 3.4 still answered at once, whatever the state."""

from __future__ import annotations

import queue

import grpc
import pytest

from store.etcdapi.messages import SERVICES, pb
from tests.store.etcdapi.watch_support import TIMEOUT, Stream, ser, target

__all__ = ["target"]  # the module's fixture


def test_a_progress_request_is_answered_like_etcd(target: str, request: pytest.FixtureRequest) -> None:
    etcd34 = request.node.callspec.params["target"] == "etcd"
    with grpc.insecure_channel(target) as channel:
        put = channel.unary_unary(
            SERVICES["KV"]["Put"].path, request_serializer=ser, response_deserializer=pb.PutResponse.FromString
        )
        head = put(pb.PutRequest(key=b"/progress/a", value=b"1"), timeout=TIMEOUT).header.revision

        empty = Stream(channel)
        try:
            empty.send(pb.WatchRequest(progress_request=pb.WatchProgressRequest()))
            if etcd34:
                assert empty.next().watch_id == -1
            else:
                with pytest.raises(queue.Empty):  # a stream without watches gets no answer
                    empty.next(timeout=0.5)
        finally:
            empty.close()

        s = Stream(channel)
        try:
            for key in (b"/progress/a", b"/progress/b"):
                s.send(pb.WatchRequest(create_request=pb.WatchCreateRequest(key=key)))
                created = s.next()
                assert created.created and not created.canceled and not created.events
            head = put(pb.PutRequest(key=b"/progress/a", value=b"2"), timeout=TIMEOUT).header.revision
            event = s.next()
            assert [e.kv.value for e in event.events] == [b"2"]
            s.send(pb.WatchRequest(progress_request=pb.WatchProgressRequest()))
            progress = s.next()
            assert progress.watch_id == -1 and not progress.events, progress
            assert not progress.created and not progress.canceled
            assert progress.header.revision == head
            with pytest.raises(queue.Empty):  # one answer for the stream, not one per watch
                s.next(timeout=0.5)
        finally:
            s.close()
