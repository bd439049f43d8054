"""Peer transport: one outbound TCP stream per peer, length-prefixed msgpack frames.

Outbound: `send()` queues messages per peer and never blocks the Raft loop; a writer task
per peer connects (with backoff), then writes everything queued as one batch frame.  A
queue that overflows while the peer is down drops its oldest messages: Raft retransmits.
Connection failures are reported to Raft (unreachable / snapshot failed) so that flow
control falls back to probing.

Inbound: a listener accepts peer streams; each starts with a hello frame naming the
sender.  Anything that is not our protocol closes that connection only.

Snapshots larger than `CHUNK` travel as a series of chunk frames and are reassembled by
the receiver before being stepped into Raft, so no frame and no single write is huge.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from store.api.errors import ProtocolError
from store.raft.types import Message, MessageType, Snapshot
from store.server.framing import FrameReader, encode_frame, encode_frames
from store.server.raft_codec import BatchEncoder, message_from_wire, message_to_wire, snapshot_meta_from_wire

log = logging.getLogger("raftkube.transport")

HELLO = "raftkube-peer/1"
CHUNK = 1 << 20
MAX_QUEUE = 8192
DIRECT_WRITE_LIMIT = 1 << 20
"""Unsent bytes to a peer above which messages wait in the queue for the writer task's drain."""


@dataclass
class _Peer:
    id: int
    host: str
    port: int
    queue: list[Message] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    writer: asyncio.StreamWriter | None = None
    """Set while connected: the direct path for small batches."""
    closed: bool = False
    """The peer closed the current connection."""


@dataclass
class _SnapAssembly:
    msg_wire: list[Any]
    total: int
    parts: list[bytes] = field(default_factory=list)
    received: int = 0


class PeerTransport:
    def __init__(
        self,
        member_id: int,
        on_messages: Callable[[list[Message]], None],
        on_unreachable: Callable[[int], None],
        on_snapshot_status: Callable[[int, bool], None],
    ) -> None:
        self.member_id = member_id
        self.on_messages = on_messages
        self.on_unreachable = on_unreachable
        self.on_snapshot_status = on_snapshot_status
        self.peers: dict[int, _Peer] = {}
        self.server: asyncio.Server | None = None
        self.inbound: set[asyncio.Task[None]] = set()
        self.frames_in = 0
        self.protocol_errors = 0
        self._closing = False

    # ------------------------------------------------------------------ lifecycle
    async def listen(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True)

    def add_peer(self, peer_id: int, host: str, port: int) -> None:
        if peer_id == self.member_id:
            return
        old = self.peers.get(peer_id)
        if old is not None and (old.host, old.port) == (host, port):
            return
        if old is not None:
            self.remove_peer(peer_id)
        p = _Peer(peer_id, host, port)
        p.task = asyncio.get_running_loop().create_task(self._writer(p), name=f"peer-writer-{peer_id}")
        self.peers[peer_id] = p

    def remove_peer(self, peer_id: int) -> None:
        p = self.peers.pop(peer_id, None)
        if p is not None and p.task is not None:
            p.task.cancel()

    async def close(self) -> None:
        self._closing = True
        for pid in list(self.peers):
            self.remove_peer(pid)
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await self.server.wait_closed()
        for t in list(self.inbound):
            t.cancel()

    # ------------------------------------------------------------------ outbound
    def send(self, msgs: list[Message]) -> None:
        by_peer: dict[int, list[Message]] = {}
        for m in msgs:
            by_peer.setdefault(m.to, []).append(m)
        encoder = BatchEncoder()
        for peer_id, batch in by_peer.items():
            p = self.peers.get(peer_id)
            if p is None:
                continue  # not (or no longer) a peer: Raft will time out and retry
            w = p.writer
            if (
                w is not None
                and not w.is_closing()
                and not p.queue
                and w.transport.get_write_buffer_size() < DIRECT_WRITE_LIMIT
                and all(m.type != MessageType.SNAP for m in batch)
            ):
                # Connected and keeping up: write now, in this loop turn, instead of
                # waking the writer task for it (one loop iteration less per hop).
                w.write(encoder.frame(batch))
                continue
            q = p.queue
            q.extend(batch)
            if len(q) > MAX_QUEUE:
                dropped = q[: len(q) - MAX_QUEUE]
                del q[: len(q) - MAX_QUEUE]
                self._report_lost(p.id, dropped)
            p.wake.set()

    def _report_lost(self, peer_id: int, msgs: list[Message]) -> None:
        self.on_unreachable(peer_id)
        for m in msgs:
            if m.type == MessageType.SNAP:
                self.on_snapshot_status(peer_id, True)

    async def _writer(self, p: _Peer) -> None:
        backoff = 0.05
        while not self._closing:
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(p.host, p.port), timeout=1.0)
            except (TimeoutError, OSError):
                self._fail_queue(p)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
                continue
            backoff = 0.05
            # The stream is one-way, so the only thing ever read is the peer closing it:
            # that must end the direct-write path at once, or messages vanish into a dead
            # socket until the next queued write notices.
            watch_eof = asyncio.get_running_loop().create_task(self._until_closed(p, reader))
            try:
                writer.write(encode_frame([HELLO, self.member_id]))
                p.writer = writer
                await self._pump(p, writer)
            except (OSError, ConnectionError, asyncio.IncompleteReadError) as e:
                log.debug("peer %d connection lost: %s", p.id, e)
            finally:
                p.writer = None
                watch_eof.cancel()
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            self._fail_queue(p)

    async def _until_closed(self, p: _Peer, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while await reader.read(4096):
                pass
        p.writer = None
        p.closed = True
        p.wake.set()  # the pump notices `closed` and gives the connection up

    def _fail_queue(self, p: _Peer) -> None:
        """While the peer is unreachable, what is queued for it is lost; tell Raft."""
        if p.queue:
            lost, p.queue = p.queue, []
            self._report_lost(p.id, lost)

    async def _pump(self, p: _Peer, writer: asyncio.StreamWriter) -> None:
        p.closed = False
        while True:
            if p.closed or writer.is_closing():
                self.on_unreachable(p.id)
                return
            if not p.queue:
                p.wake.clear()
                await p.wake.wait()
                continue
            batch, p.queue = p.queue, []
            plain: list[Message] = []
            for m in batch:
                if m.type == MessageType.SNAP and m.snapshot is not None and len(m.snapshot.data) > CHUNK:
                    if plain:
                        writer.write(encode_frame(["m", [message_to_wire(x) for x in plain]]))
                        plain = []
                    await self._send_snapshot(m, writer)
                else:
                    plain.append(m)
            if plain:
                writer.write(encode_frames([["m", [message_to_wire(x) for x in plain]]]))
            await writer.drain()
            for m in batch:
                if m.type == MessageType.SNAP:
                    self.on_snapshot_status(p.id, False)

    async def _send_snapshot(self, m: Message, writer: asyncio.StreamWriter) -> None:
        assert m.snapshot is not None
        data = m.snapshot.data
        head = message_to_wire(
            Message(type=m.type, to=m.to, frm=m.frm, term=m.term, snapshot=Snapshot(m.snapshot.metadata, b""))
        )
        for off in range(0, len(data), CHUNK):
            writer.write(encode_frame(["s", head, len(data), off, data[off : off + CHUNK]]))
            await writer.drain()

    # ------------------------------------------------------------------ inbound
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.inbound.add(task)
        peer = writer.get_extra_info("peername")
        frames = FrameReader(reader)
        snaps: dict[int, _SnapAssembly] = {}
        try:
            first = await frames.frames()
            if not first or not isinstance(first[0], list) or len(first[0]) != 2 or first[0][0] != HELLO:
                raise ProtocolError(f"peer {peer} did not say hello")
            sender = first[0][1]
            pending = first[1:]
            while True:
                for f in pending:
                    self._handle_frame(sender, f, snaps)
                pending = await frames.frames()
                if not pending:
                    return
        except ProtocolError as e:
            self.protocol_errors += 1
            log.warning("closing peer connection from %s: %s", peer, e)
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.inbound.discard(task)
            writer.close()

    def _handle_frame(self, sender: int, f: Any, snaps: dict[int, _SnapAssembly]) -> None:
        if not isinstance(f, list) or not f:
            raise ProtocolError("peer frame is not an array")
        self.frames_in += 1
        kind = f[0]
        if kind == "m":
            msgs = [message_from_wire(w) for w in f[1]]
            self.on_messages(msgs)
        elif kind == "s":
            head, total, off, chunk = f[1], f[2], f[3], f[4]
            asm = snaps.get(sender)
            if asm is None or off == 0:
                asm = snaps[sender] = _SnapAssembly(head, total)
            if off != asm.received:
                raise ProtocolError(f"snapshot chunk at {off}, expected {asm.received}")
            asm.parts.append(chunk)
            asm.received += len(chunk)
            if asm.received >= asm.total:
                del snaps[sender]
                m = message_from_wire(asm.msg_wire)
                meta = snapshot_meta_from_wire(asm.msg_wire[8][0])
                m.snapshot = Snapshot(meta, b"".join(asm.parts))
                self.on_messages([m])
        else:
            raise ProtocolError(f"unknown peer frame kind {kind!r}")
