"""[store.raft] limits set in cluster.toml take effect in the member processes.

A relay between the other members and member 3 passes their peer stream through unchanged
and decodes the Raft messages in it, so the test sees the append messages the leader
really sends.  Before max_size_per_msg reached member.json, the members ran with the
default 1 MiB whatever cluster.toml said, and a follower catching up got its whole
backlog in one append.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from pathlib import Path

import msgpack

from store.api.framing import HEADER
from store.api.protocol import split_url
from store.raft.storage import entries_size
from store.raft.types import Entry, MessageType
from store.server.raft_codec import message_from_wire
from tests.support.cluster import StoreCluster, fast_settings

TIMEOUT = 10.0


class AppendRecorder:
    """Relays peer connections to `target` on a thread of its own and keeps the entries of
    every append message that passes."""

    def __init__(self, target: str, avoid: set[int]) -> None:
        self.target = split_url(target)
        self.appends: list[list[Entry]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="append-recorder", daemon=True)
        self._thread.start()
        self._server: asyncio.Server | None = None
        self.port = asyncio.run_coroutine_threadsafe(self._listen(avoid), self._loop).result(TIMEOUT)

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    async def _listen(self, avoid: set[int]) -> int:
        # The members' ports are not bound until they start: never take one of them.
        for _ in range(50):
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            port: int = self._server.sockets[0].getsockname()[1]
            if port not in avoid:
                return port
            self._server.close()
            await self._server.wait_closed()
        raise RuntimeError("no free port for the relay")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up_w: asyncio.StreamWriter | None = None
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
            back = asyncio.get_running_loop().create_task(self._until_closed(up_r, writer))
            try:
                while True:
                    head = await reader.readexactly(HEADER.size)
                    body = await reader.readexactly(HEADER.unpack(head)[0])
                    self._record(body)
                    up_w.write(head + body)
                    await up_w.drain()
            finally:
                back.cancel()
        except (OSError, ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, up_w):
                if w is not None:
                    w.close()
            self._tasks.discard(task)

    @staticmethod
    async def _until_closed(up_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The stream is one-way: the receiver only ever closes it; pass that on."""
        with contextlib.suppress(OSError, ConnectionError):
            while await up_r.read(4096):
                pass
        writer.close()

    def _record(self, body: bytes) -> None:
        frame = msgpack.unpackb(body, raw=False, strict_map_key=False)
        if isinstance(frame, list) and frame and frame[0] == "m":
            for w in frame[1]:
                m = message_from_wire(w)
                if m.type == MessageType.APP and m.entries:
                    self.appends.append(m.entries)

    def close(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for t in list(self._tasks):
                t.cancel()
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=2.0)

        try:
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(TIMEOUT)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(TIMEOUT)
            self._loop.close()


def test_max_size_per_msg_from_cluster_toml_bounds_the_appends(tmp_path: Path) -> None:
    """A follower that was down catches up in appends of at most max_size_per_msg bytes of entries
    (an append carries at least one entry, whatever its size), as [store.raft] asked."""
    limit, writes, value = 4096, 200, b"v" * 1000
    s = fast_settings(tmp_path)
    s = dataclasses.replace(s, raft=dataclasses.replace(s.raft, max_size_per_msg=limit))
    tc = StoreCluster(s, insecure=True)  # the relay reads plaintext Raft frames
    members = tc.local.members()
    ports = {split_url(u)[1] for m in members for u in (m.peer_url, m.client_url, m.http_url)}
    relay = AppendRecorder(members[2].peer_url, avoid=ports)
    try:
        for src in (1, 2):
            tc.local.set_peer_dial(src, {3: relay.url})
        tc.start()
        tc.wait_leader()
        tc.local.stop_member(3, timeout=5)
        tc.wait_leader(exclude=(3,))

        async def write() -> int:
            async with tc.client(tc.endpoints[:2]) as c:
                rev = 0
                for i in range(0, writes, 20):
                    done = await asyncio.gather(*(c.put(b"big/%04d" % j, value) for j in range(i, i + 20)))
                    rev = max(rev, *(r.revision for r in done))
                return rev

        revision = asyncio.run(write())
        before = len(relay.appends)
        tc.start_member(3)
        tc.wait_applied(revision, [3], timeout=30)
        catch_up = relay.appends[before:]
    finally:
        tc.stop()
        relay.close()
    carried = [e for ents in catch_up for e in ents if len(e.data) >= len(value)]
    assert len(carried) >= writes, "the catch-up did not pass through the relay"
    sizes = [entries_size(ents) for ents in catch_up]
    too_big = [(len(ents), size) for ents, size in zip(catch_up, sizes, strict=True) if len(ents) > 1 and size > limit]
    assert not too_big, f"appends over max_size_per_msg={limit} (entries, bytes): {too_big[:5]}"
    assert len(catch_up) >= writes * len(value) // limit
