"""The etcd watch's own HTTP/2 stream (apiserver/storage/h2grpc.py): the frame parser on its
own (any split of the bytes, control frames answered, every way a stream ends), then a real
etcd 3.4 whose events, written while the event loop was blocked, arrive in a few reads rather
than one turn of the loop per event (what made grpc.aio seconds late under load)."""

from __future__ import annotations

import asyncio
import base64
import itertools
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.storage import h2grpc as h2
from apiserver.storage.etcd import EtcdStorage
from apiserver.storage.etcd_client import EtcdClient
from apiserver.storage.interface import Progress, UnavailableError
from machinery.process.launch import free_ports
from tests.store.mvcc.etcd import Etcd, running_etcd


def data(payload: bytes, flags: int = 0, stream: int = h2.STREAM) -> bytes:
    return h2.frame(h2.DATA, flags, stream, payload)


@settings(max_examples=60, deadline=None)
@given(
    msgs=st.lists(st.binary(max_size=300), min_size=1, max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=10),
    chunk=st.integers(min_value=1, max_value=200),
)
def test_messages_survive_any_split_of_frames_and_bytes(msgs: list[bytes], cuts: list[int], chunk: int) -> None:
    body = b"".join(h2.grpc_message(m) for m in msgs)
    # The gRPC bytes cut into DATA frames of `chunk` bytes, the wire cut again at `cuts`.
    wire = b"".join(data(body[i : i + chunk]) for i in range(0, len(body), chunk))
    framer, got = h2.Framer(), []
    points = sorted({c % (len(wire) + 1) for c in cuts} | {0, len(wire)})
    for a, b in itertools.pairwise(points):
        out, ended = framer.feed(wire[a:b])
        got += out
        assert not ended
    assert got == msgs
    assert framer.received == len(body)


def test_padded_data_and_other_streams() -> None:
    msg = h2.grpc_message(b"hello")
    padded = data(bytes((3,)) + msg + b"\0\0\0", flags=h2.PADDED)
    out, ended = h2.Framer().feed(padded + data(h2.grpc_message(b"other"), stream=3))
    assert out == [b"hello"] and not ended


def test_settings_and_pings_are_answered() -> None:
    f = h2.Framer()
    f.feed(h2.frame(h2.SETTINGS, 0, 0, b"") + h2.frame(h2.SETTINGS, h2.ACK, 0, b""))
    f.feed(h2.frame(h2.PING, 0, 0, b"12345678") + h2.frame(h2.PING, h2.ACK, 0, b"abcdefgh"))
    assert f.replies == [h2.frame(h2.SETTINGS, h2.ACK, 0, b""), h2.frame(h2.PING, h2.ACK, 0, b"12345678")]


@pytest.mark.parametrize(
    "end",
    [
        h2.frame(h2.HEADERS, h2.END_STREAM | h2.END_HEADERS, h2.STREAM, b""),
        data(b"", flags=h2.END_STREAM),
        h2.frame(h2.RST_STREAM, 0, h2.STREAM, struct.pack(">I", 8)),
        h2.frame(h2.GOAWAY, 0, 0, struct.pack(">II", 1, 0)),
    ],
    ids=["trailers", "data-end", "rst", "goaway"],
)
def test_every_end_of_the_stream_is_seen(end: bytes) -> None:
    out, ended = h2.Framer().feed(data(h2.grpc_message(b"last")) + end)
    assert out == [b"last"] and ended


def test_headers_without_end_and_other_resets_do_not_end_it() -> None:
    f = h2.Framer()
    _, ended = f.feed(
        h2.frame(h2.HEADERS, h2.END_HEADERS, h2.STREAM, b"\x88")
        + h2.frame(h2.RST_STREAM, 0, 3, struct.pack(">I", 8))
        + h2.frame(h2.WINDOW_UPDATE, 0, 0, struct.pack(">I", 100))
    )
    assert not ended


def test_a_compressed_message_is_refused() -> None:
    with pytest.raises(h2.StreamEnded, match="compressed"):
        h2.Framer().feed(data(b"\x01" + struct.pack(">I", 1) + b"x"))


# ---------------------------------------------------------------------------- real etcd
@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Etcd]:
    with running_etcd(Path(tmp_path_factory.mktemp("etcd"))) as e:
        yield e


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def test_events_written_while_the_loop_is_blocked_arrive_in_a_few_turns(etcd: Etcd) -> None:
    n = 200
    prefix = f"/registry/h2-{time.monotonic_ns()}/"

    async def body() -> tuple[int, list[int]]:
        s = EtcdStorage(EtcdClient([etcd.url]), progress=False)
        try:
            start = await s.current_revision() + 1
            got: list[int] = []

            async def read() -> None:
                async for item in s.watch(prefix, start):
                    if not isinstance(item, Progress):
                        got.extend(e.revision for e in item)

            reader = asyncio.create_task(read())
            await s.create(prefix + "first", b"{}")
            for _ in range(500):  # the watch is up once it delivered the first write
                if got:
                    break
                await asyncio.sleep(0.01)
            assert got, "the watch delivered nothing"
            for i in range(n):  # blocking writes over HTTP: the loop does not turn meanwhile
                etcd.call("/v3/kv/put", {"key": _b64(f"{prefix}k{i}"), "value": _b64("{}")})
            time.sleep(0.2)  # etcd has sent them all
            turns = 0
            deadline = time.monotonic() + 10
            while len(got) < n + 1 and time.monotonic() < deadline:
                await asyncio.sleep(0)
                turns += 1
            reader.cancel()
            return turns, got
        finally:
            await s.close()

    turns, got = asyncio.run(body())
    assert len(got) == n + 1 and got == sorted(got)
    # grpc.aio took two turns of the loop per event (over 400 here).
    assert turns < 40, f"{turns} turns of the event loop for {n} events"


def test_a_watch_with_no_member_listening_is_unavailable_after_the_timeout() -> None:
    (port,) = free_ports(1)

    async def body() -> float:
        s = EtcdStorage(EtcdClient([f"127.0.0.1:{port}"], timeout=0.5), progress=False)
        t0 = time.monotonic()
        try:
            with pytest.raises(UnavailableError):
                async for _ in s.watch("/registry/x/", 1):
                    pass
        finally:
            await s.close()
        return time.monotonic() - t0

    assert asyncio.run(body()) < 5


def test_watch_over_mutual_tls(tmp_path: Path) -> None:
    """etcd with --client-cert-auth: the watch's own connection presents the client certificate
    and speaks HTTP/2 by ALPN (what grpc-go needs over TLS)."""
    from bench.store.peers import EtcdPeer

    peer = EtcdPeer(tmp_path, 1, tls=True)
    peer.start()
    try:
        assert peer.client_tls is not None
        prefix = f"/registry/tls-{time.monotonic_ns()}/"

        async def body() -> list[str]:
            s = EtcdStorage(EtcdClient(peer.endpoints, tls=peer.client_tls), progress=True)
            try:
                start = await s.current_revision() + 1
                watch = s.watch(prefix, start)
                for i in range(3):
                    await s.create(f"{prefix}k{i}", b"{}")
                keys: list[str] = []
                async for item in watch:
                    if not isinstance(item, Progress):
                        keys += [e.key for e in item]
                    if len(keys) == 3:
                        break
                await watch.aclose()  # type: ignore[attr-defined]
                return keys
            finally:
                await s.close()

        assert asyncio.run(asyncio.wait_for(body(), 20)) == [f"{prefix}k{i}" for i in range(3)]
    finally:
        peer.stop()
