"""A TCP proxy for one network link, with faults the chaos suite switches at run time.

Members dial each peer through a proxy (`MemberConfig.peer_dial`), so the proxy sees exactly
one direction of Raft traffic: i's messages to j.  Faults therefore act per direction.

Peer mode is frame-aware (the length prefix of store/api/framing.py): it only ever
forwards or loses whole frames, so the stream stays parseable whatever is lost, and it
never loses the first frame (the hello naming the sender): without it the receiver would
close the stream as garbage, which is a protocol failure, not a network one.  Raw mode
forwards bytes as they come (for a member's client port); it supports blackhole, cut and
delay, and closes a connection whose bytes it discarded when healed, since its stream is
no longer parseable.

Faults:
* blackhole: nothing is forwarded, connections stay open and what arrives is read and
  discarded, so the sender learns nothing (as with dropped packets);
* cut: every live connection is closed now (reset); new connections are accepted;
* delay(mean, jitter): each frame is delivered mean +- jitter later, in order;
* drop(share): that share of frames is lost (seeded RNG);
* heal: all of the above off.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import deque
from dataclasses import asdict, dataclass

from store.api.framing import HEADER, MAX_FRAME

READ_SIZE = 1 << 18
QUEUE_LIMIT = 8 << 20
"""Bytes waiting for their delivery time per connection before the proxy stops reading
(back pressure on the sender, as a full TCP window would be)."""
REFUSED_HOLD = 0.2
"""Seconds a connection is held open (and fed to nothing) when the target refuses it."""
FLUSH_GRACE = 2.0
"""Seconds granted, on top of the configured delay, to deliver what a closing sender wrote."""


@dataclass
class ProxyStats:
    """Counters for reports; in raw mode a "frame" is one chunk read from the socket."""

    connections: int = 0
    open: int = 0
    closed_by_fault: int = 0
    frames_forwarded: int = 0
    frames_dropped: int = 0
    bytes_forwarded: int = 0
    bytes_dropped: int = 0
    upstream_failures: int = 0


class LinkProxy:
    """Listens on 127.0.0.1 and forwards each accepted connection to `target`."""

    def __init__(
        self,
        target: tuple[str, int],
        *,
        framed: bool = True,
        seed: int = 0,
        name: str = "",
        connect_timeout: float = 1.0,
    ) -> None:
        self.target = target
        self.framed = framed
        self.name = name or f"proxy->{target[0]}:{target[1]}"
        self.connect_timeout = connect_timeout
        self.rng = random.Random(seed)
        self.stats = ProxyStats()
        self.blackholed = False
        self.delay_mean = 0.0
        self.delay_jitter = 0.0
        self.drop_share = 0.0
        self.host = "127.0.0.1"
        self.port = 0
        self._server: asyncio.Server | None = None
        self._conns: set[_Conn] = set()

    # ------------------------------------------------------------------ lifecycle
    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen (port 0: one the OS picks, so there is no race for a free port)."""
        self._server = await asyncio.start_server(self._serve, host, port)
        self.host = host
        self.port = self._server.sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"tcp://{self.host}:{self.port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for c in list(self._conns):
            c.shutdown(reset=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), timeout=2.0)

    # ------------------------------------------------------------------ faults (loop thread only)
    def blackhole(self) -> None:
        self.blackholed = True

    def cut(self) -> None:
        """Reset every live connection; senders reconnect through the proxy."""
        for c in list(self._conns):
            self.stats.closed_by_fault += 1
            c.shutdown(reset=True)

    def delay(self, mean_s: float, jitter_s: float = 0.0) -> None:
        """Delay each frame by mean +- jitter (raw mode: each chunk, towards the target only)."""
        if mean_s < 0 or jitter_s < 0:
            raise ValueError("delay and jitter must not be negative")
        self.delay_mean, self.delay_jitter = mean_s, jitter_s

    def drop(self, share: float) -> None:
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"drop share must be within [0, 1], got {share}")
        if share and not self.framed:
            raise ValueError("raw proxies cannot drop: a lost chunk corrupts the stream")
        self.drop_share = share

    def heal(self) -> None:
        """Forward everything again; connections that cannot carry on are closed."""
        self.blackholed = False
        self.delay_mean = self.delay_jitter = self.drop_share = 0.0
        for c in list(self._conns):
            c.on_heal()

    def faults(self) -> dict[str, float | bool]:
        return {
            "blackhole": self.blackholed,
            "delay_mean": self.delay_mean,
            "delay_jitter": self.delay_jitter,
            "drop": self.drop_share,
        }

    def report(self) -> dict[str, float | int | bool | str]:
        return {"target": f"{self.target[0]}:{self.target[1]}", **asdict(self.stats), **self.faults()}

    # ------------------------------------------------------------------ connections
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(self, reader, writer)
        self._conns.add(conn)
        self.stats.connections += 1
        self.stats.open += 1
        try:
            await conn.run()
        except (OSError, ConnectionError):
            pass
        finally:
            conn.shutdown(reset=False)
            self._conns.discard(conn)
            self.stats.open -= 1

    def due_time(self, now: float) -> float:
        if self.delay_mean == 0 and self.delay_jitter == 0:
            return now
        d = self.delay_mean + self.rng.uniform(-self.delay_jitter, self.delay_jitter)
        return now + max(0.0, d)

    def lose(self, size: int) -> None:
        self.stats.frames_dropped += 1
        self.stats.bytes_dropped += size


class _Conn:
    """One proxied connection: client -> (delay queue) -> upstream, and upstream -> client."""

    def __init__(self, proxy: LinkProxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.p = proxy
        self.client_r = reader
        self.client_w = writer
        self.up_w: asyncio.StreamWriter | None = None
        self.up_dead = False
        """Upstream is gone while blackholed: kept quiet until heal, then closed."""
        self.tainted = False
        """Raw bytes were discarded: the stream cannot be resumed."""
        self.first = True
        self.held_hello: bytes | None = None
        self.queue: deque[tuple[float, bytes | None, bool]] = deque()
        self.queued = 0
        self.last_due = 0.0
        self.wake = asyncio.Event()
        self.room = asyncio.Event()
        self.room.set()
        self.children: list[asyncio.Task[None]] = []
        self.closed = False

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            up_r, self.up_w = await asyncio.wait_for(asyncio.open_connection(*self.p.target), self.p.connect_timeout)
        except (TimeoutError, OSError):
            self.p.stats.upstream_failures += 1
            if not self.p.blackholed:
                # As a refused connection, but not at once: the sender reconnects without
                # backoff after a connection that did open, and would spin.
                await self._discard_for(REFUSED_HOLD)
                return
            self.up_dead = True
        else:
            self.children.append(loop.create_task(self._backward(up_r)))
        self.children.append(loop.create_task(self._deliver()))
        await self._forward()
        if self.closed:
            return
        # The sender closed its side: deliver what it wrote (after its delay), then close.
        self._enqueue(loop.time(), None, False)
        grace = self.p.delay_mean + self.p.delay_jitter + FLUSH_GRACE
        await asyncio.wait({self.children[-1]}, timeout=grace)

    async def _discard_for(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                while data := await self.client_r.read(READ_SIZE):
                    self.p.lose(len(data))

    def shutdown(self, reset: bool) -> None:
        if self.closed:
            return
        self.closed = True
        self.room.set()
        for t in self.children:
            t.cancel()
        for w in (self.client_w, self.up_w):
            if w is not None:
                if reset:
                    w.transport.abort()
                else:
                    w.close()

    def on_heal(self) -> None:
        if self.up_dead or self.tainted:
            self.p.stats.closed_by_fault += 1
            self.shutdown(reset=True)
        elif self.held_hello is not None:
            self.queue.appendleft((0.0, self.held_hello, True))
            self.queued += len(self.held_hello)
            self.held_hello = None
            self.wake.set()

    # ------------------------------------------------------------------ client -> upstream
    async def _forward(self) -> None:
        loop = asyncio.get_running_loop()
        buf = bytearray()
        while not self.closed:
            chunk = await self.client_r.read(READ_SIZE)
            if not chunk:
                return
            if not self.p.framed:
                self._admit(loop.time(), chunk, False)
            else:
                buf += chunk
                pos = 0
                while len(buf) - pos >= HEADER.size:
                    (n,) = HEADER.unpack_from(buf, pos)
                    if n > MAX_FRAME:
                        self.shutdown(reset=True)  # not our protocol: the member would close it too
                        return
                    end = pos + HEADER.size + n
                    if end > len(buf):
                        break
                    self._admit(loop.time(), bytes(buf[pos:end]), self.first)
                    self.first = False
                    pos = end
                del buf[:pos]
            if self.queued > QUEUE_LIMIT:
                self.room.clear()
                await self.room.wait()

    def _admit(self, now: float, data: bytes, hello: bool) -> None:
        """Decide a frame's fate as it arrives: lost now, or queued for its delivery time."""
        p = self.p
        if p.blackholed or self.up_dead:
            self._discard(data, hello)
            return
        if not hello and p.drop_share and p.rng.random() < p.drop_share:
            p.lose(len(data))
            return
        self._enqueue(p.due_time(now), data, hello)

    def _enqueue(self, due: float, data: bytes | None, hello: bool) -> None:
        due = max(due, self.last_due)  # per-connection order is kept, as TCP would
        self.last_due = due
        self.queue.append((due, data, hello))
        self.queued += len(data) if data else 0
        self.wake.set()

    def _discard(self, data: bytes, hello: bool) -> None:
        if hello and self.p.framed:
            self.held_hello = data  # sent ahead of the first frame forwarded after heal
            return
        self.p.lose(len(data))
        if not self.p.framed:
            self.tainted = True

    async def _deliver(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.queue:
                self.wake.clear()
                await self.wake.wait()
                continue
            now = loop.time()
            if self.queue[0][0] > now:
                await asyncio.sleep(self.queue[0][0] - now)
                continue
            out = bytearray()
            finished = False
            while self.queue and self.queue[0][0] <= now:
                _, data, hello = self.queue.popleft()
                if data is None:
                    finished = True
                    break
                self.queued -= len(data)
                if self.p.blackholed or self.up_dead or self.up_w is None:
                    self._discard(data, hello)
                    continue
                if self.held_hello is not None:
                    out += self.held_hello
                    self._count(self.held_hello)
                    self.held_hello = None
                out += data
                self._count(data)
            if self.queued <= QUEUE_LIMIT:
                self.room.set()
            if out and self.up_w is not None:
                try:
                    self.up_w.write(out)
                    await self.up_w.drain()
                except (OSError, ConnectionError):
                    self._upstream_lost()
            if finished:
                if self.up_w is not None:
                    self.up_w.close()
                return

    def _count(self, data: bytes) -> None:
        self.p.stats.frames_forwarded += 1
        self.p.stats.bytes_forwarded += len(data)

    # ------------------------------------------------------------------ upstream -> client
    async def _backward(self, up_r: asyncio.StreamReader) -> None:
        """Replies (raw mode) and, in both modes, the upstream closing the connection."""
        try:
            while data := await up_r.read(READ_SIZE):
                if self.p.blackholed:
                    self.p.lose(len(data))
                    self.tainted = True
                    continue
                self.client_w.write(data)
                await self.client_w.drain()
        except (OSError, ConnectionError):
            pass
        self._upstream_lost()

    def _upstream_lost(self) -> None:
        if self.p.blackholed:
            self.up_dead = True  # the sender must not learn of it before heal
        else:
            self.shutdown(reset=False)
