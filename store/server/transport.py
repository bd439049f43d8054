"""Peer transport: one outbound TCP stream per peer, length-prefixed msgpack frames.

Outbound: `send()` queues messages per peer and never blocks the Raft loop; a writer task
per peer connects (with backoff), then writes everything queued as one batch frame.  A
queue that overflows while the peer is down drops its oldest messages: Raft retransmits.
Connection failures are reported to Raft (unreachable / snapshot failed) so that flow
control falls back to probing.

Inbound: a listener accepts peer streams; each starts with a hello frame naming the
sender.  Anything that is not our protocol closes that connection only.

Who may speak: with TLS (the default), both ends present certificates signed by the
cluster CA; the hello must name the member its certificate names, the member we dial must
be the one whose certificate answers, and every message on a connection must come from
its sender and be addressed to us.  Members removed from the cluster are refused.  Every
message is checked field by field (raft_codec), so a malformed one closes only its
connection.  Without TLS (`--insecure`) the same checks run, but the hello is taken on trust.

Snapshots larger than `CHUNK` travel as a series of chunk frames and are reassembled by
the receiver before being stepped into Raft, so no frame and no single write is huge.
Append batches are split so that no frame carries more than `FRAME_BUDGET` bytes of
entries (a lagging follower is sent many messages at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from machinery.process import pki
from store.api.errors import ProtocolError
from store.api.framing import FrameReader, encode_frame
from store.api.wire import INT64_MAX
from store.raft.types import Message, MessageType, Snapshot
from store.server.raft_codec import BatchEncoder, message_from_wire, message_to_wire

log = logging.getLogger("raftkube.transport")

HELLO = "raftkube-peer/1"
CHUNK = 1 << 20
MAX_QUEUE = 8192
DIRECT_WRITE_LIMIT = 1 << 20
"""Unsent bytes to a peer above which messages wait in the queue for the writer task's drain."""
FRAME_BUDGET = 8 << 20
"""Bytes of entries per frame at most (a single larger message goes alone); the receiver
refuses frames over framing.MAX_FRAME."""
MAX_SNAPSHOT_BYTES = 1 << 40
HANDSHAKE_TIMEOUT = 5.0
MAX_INBOUND = 64
"""Inbound peer connections at once (a cluster has at most a handful of peers)."""


def message_size(m: Message) -> int:
    """About the bytes `m` takes on the wire (its entries' data dominate)."""
    return 64 + sum(len(e.data) + 16 for e in m.entries)


def split_batch(msgs: list[Message], budget: int = FRAME_BUDGET) -> Iterator[list[Message]]:
    """`msgs` in order, in runs of at most `budget` bytes (a bigger message alone)."""
    run: list[Message] = []
    size = 0
    for m in msgs:
        n = message_size(m)
        if run and size + n > budget:
            yield run
            run, size = [], 0
        run.append(m)
        size += n
    if run:
        yield run


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
    msg: Message
    """The snapshot message the chunks belong to, decoded (and checked) from the first chunk."""
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
        server_tls: ssl.SSLContext | None = None,
        client_tls: ssl.SSLContext | None = None,
        is_removed: Callable[[int], bool] = lambda _: False,
    ) -> None:
        self.member_id = member_id
        self.on_messages = on_messages
        self.on_unreachable = on_unreachable
        self.on_snapshot_status = on_snapshot_status
        self.server_tls = server_tls
        self.client_tls = client_tls
        self.is_removed = is_removed
        self.peers: dict[int, _Peer] = {}
        self.server: asyncio.Server | None = None
        self.inbound: set[asyncio.Task[None]] = set()
        self.frames_in = 0
        self.protocol_errors = 0
        self._closing = False

    # ------------------------------------------------------------------ lifecycle
    async def listen(self, host: str, port: int) -> None:
        # TLS is started by hand after accepting, so that pending handshakes count against
        # MAX_INBOUND and are timed out.
        self.server = await asyncio.start_server(self._accept, host, port, reuse_address=True)

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
                for run in split_batch(batch):
                    w.write(encoder.frame(run))
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
                reader, writer = await asyncio.wait_for(self._dial(p), timeout=1.0 + HANDSHAKE_TIMEOUT)
            except (TimeoutError, OSError, ssl.SSLError, pki.PKIError) as e:
                log.debug("cannot reach peer %d: %s", p.id, e)
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

    async def _dial(self, p: _Peer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Connect to `p`; with TLS, make sure the member that answers is the one we dialled."""
        if self.client_tls is None:
            return await asyncio.wait_for(asyncio.open_connection(p.host, p.port), timeout=1.0)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(p.host, p.port, ssl=self.client_tls, ssl_handshake_timeout=HANDSHAKE_TIMEOUT),
            timeout=1.0 + HANDSHAKE_TIMEOUT,
        )
        try:
            pki.check_server_identity(writer.get_extra_info("peercert"), p.id)
        except pki.PKIError:
            writer.transport.abort()
            raise
        return reader, writer

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
                    for run in split_batch(plain):
                        writer.write(encode_frame(["m", [message_to_wire(x) for x in run]]))
                    plain = []
                    await self._send_snapshot(m, writer)
                else:
                    plain.append(m)
            for run in split_batch(plain):
                writer.write(encode_frame(["m", [message_to_wire(x) for x in run]]))
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
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.inbound) >= MAX_INBOUND:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self.inbound.add(task)
        try:
            await self._serve(reader, writer)
        finally:
            self.inbound.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        frames = FrameReader(reader)
        snaps: dict[int, _SnapAssembly] = {}
        try:
            certified: int | None = None
            if self.server_tls is not None:
                await writer.start_tls(self.server_tls, ssl_handshake_timeout=HANDSHAKE_TIMEOUT)
                ident = pki.peer_identity(writer.get_extra_info("ssl_object"))
                if ident.kind != "member" or ident.member_id is None:
                    raise ProtocolError(f"{ident} is not a member: the peer port is for members only")
                certified = ident.member_id
            first = await asyncio.wait_for(frames.frames(), HANDSHAKE_TIMEOUT)
            sender = self._hello_sender(first[0] if first else None, certified)
            pending = first[1:]
            while True:
                if self.is_removed(sender):
                    raise ProtocolError(f"member {sender} was removed from the cluster")
                for f in pending:
                    self._handle_frame(sender, f, snaps)
                pending = await frames.frames()
                if not pending:
                    return
        except (ProtocolError, pki.PKIError) as e:
            self.protocol_errors += 1
            log.warning("closing peer connection from %s: %s", peer, e)
        except TimeoutError:
            self.protocol_errors += 1
            log.warning("closing peer connection from %s: no hello in time", peer)
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ssl.SSLError) as e:
            log.debug("peer connection from %s ended: %s", peer, e)
        finally:
            writer.transport.abort()

    def _hello_sender(self, f: Any, certified: int | None) -> int:
        """The member a connection speaks for: named by its hello, which must agree with its
        certificate (when there is one) and must not be us or a removed member."""
        if type(f) is not list or len(f) != 2 or f[0] != HELLO:
            raise ProtocolError("the first frame must be a peer hello")
        sender = f[1]
        if type(sender) is not int or not 1 <= sender <= INT64_MAX:
            raise ProtocolError(f"peer hello names no member id: {str(sender)[:64]}")
        if certified is not None and sender != certified:
            raise ProtocolError(f"peer hello claims member {sender}, its certificate is member {certified}'s")
        if sender == self.member_id:
            raise ProtocolError(f"peer hello claims our own id {sender}")
        if self.is_removed(sender):
            raise ProtocolError(f"member {sender} was removed from the cluster")
        return sender

    def _check_origin(self, sender: int, m: Message) -> None:
        if m.frm != sender:
            raise ProtocolError(f"member {sender} sent a message from member {m.frm}")
        if m.to != self.member_id:
            raise ProtocolError(f"member {sender} sent a message for member {m.to} to member {self.member_id}")

    def _handle_frame(self, sender: int, f: Any, snaps: dict[int, _SnapAssembly]) -> None:
        if type(f) is not list or not f:
            raise ProtocolError("peer frame is not an array")
        self.frames_in += 1
        kind = f[0]
        if kind == "m":
            if len(f) != 2 or type(f[1]) is not list:
                raise ProtocolError("a message frame must be ['m', [message, ...]]")
            msgs = [message_from_wire(w) for w in f[1]]
            for m in msgs:
                self._check_origin(sender, m)
            self.on_messages(msgs)
        elif kind == "s":
            self._snapshot_chunk(sender, f, snaps)
        else:
            raise ProtocolError(f"unknown peer frame kind {str(kind)[:32]!r}")

    def _snapshot_chunk(self, sender: int, f: list[Any], snaps: dict[int, _SnapAssembly]) -> None:
        if len(f) != 5:
            raise ProtocolError("a snapshot frame must be ['s', head, total, offset, chunk]")
        head, total, off, chunk = f[1], f[2], f[3], f[4]
        if type(total) is not int or not 0 < total <= MAX_SNAPSHOT_BYTES:
            raise ProtocolError(f"snapshot size {str(total)[:32]} is out of range")
        if type(off) is not int or type(chunk) is not bytes or not chunk:
            raise ProtocolError("snapshot chunk offset or bytes malformed")
        asm = snaps.get(sender)
        if asm is None or off == 0:
            if off != 0:
                raise ProtocolError(f"snapshot chunk at {off} without its start")
            m = message_from_wire(head)  # checked before a byte is kept
            self._check_origin(sender, m)
            if m.type != MessageType.SNAP or m.snapshot is None:
                raise ProtocolError("snapshot chunks must carry a snapshot message")
            asm = snaps[sender] = _SnapAssembly(m, total)
        if off != asm.received or asm.total != total:
            raise ProtocolError(f"snapshot chunk at {off} of {total}, expected {asm.received} of {asm.total}")
        if asm.received + len(chunk) > asm.total:
            raise ProtocolError("snapshot chunks run past the announced size")
        asm.parts.append(chunk)
        asm.received += len(chunk)
        if asm.received == asm.total:
            del snaps[sender]
            m = asm.msg
            assert m.snapshot is not None
            m.snapshot = Snapshot(m.snapshot.metadata, b"".join(asm.parts))
            self.on_messages([m])
