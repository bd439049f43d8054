"""`kubectl port-forward` on the kubelet: SPDY/3 (`spdy.py`) tunneled through a WebSocket whose
subprotocol is `SPDY/3.1+portforward.k8s.io`, every message a piece of the SPDY byte stream.

For each local connection kubectl opens two streams with the same `requestid`: an error stream
and a data stream, each naming the pod `port`.  Once both are there the kubelet connects to the
port on the pod's address (host network: the node's) and copies bytes both ways as DATA frames.
When the pod's side ends, both streams get FIN; a port nobody listens on gets kube's text on the
error stream and both streams reset (kubectl then ends the session, as it does against kube).
Every frame this side sends goes through one queue, in the order its headers were compressed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from aiohttp import WSMsgType, web

from components.kubelet import spdy

log = logging.getLogger("raftkube.kubelet.portforward")
PROTOCOL = "SPDY/3.1+portforward.k8s.io"
MAX_MESSAGE = 1 << 20
MAX_PAIRS = 256  # concurrent forwarded connections in one session
CONNECT_TIMEOUT_S = 5.0
CHUNK = 32 * 1024
SEND_QUEUE = 64


@dataclass(slots=True)
class _Pair:
    port: int
    request_id: str
    error_id: int = 0
    data_id: int = 0
    writer: asyncio.StreamWriter | None = None
    pump: asyncio.Task[None] | None = None
    done: bool = False
    pending: list[tuple[bytes, bool]] = field(default_factory=list)  # data (and FIN) before the connection


def _stream_headers(headers: dict[str, str]) -> tuple[str, int, str]:
    """(streamtype, port, requestid); SpdyError when kube's kubelet would refuse them."""
    kind = headers.get("streamtype", "")
    if kind not in ("error", "data"):
        raise spdy.SpdyError(f"streamtype must be error or data, got {kind!r}")
    text = headers.get("port", "")
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise spdy.SpdyError(f"port must be from 1 to 65535, got {text!r}")
    request_id = headers.get("requestid", "")
    if not request_id or len(request_id) > 32:
        raise spdy.SpdyError(f"requestid must be given (at most 32 characters), got {request_id!r}")
    return kind, int(text), request_id


class PortForwardSession:
    """One kubectl port-forward session: the SPDY streams of its connections to `host`."""

    def __init__(self, host: str, pod: str, uid: str) -> None:
        self.host, self.pod, self.uid = host, pod, uid
        self.decoder = spdy.Decoder()
        self.encoder = spdy.Encoder()
        self.outbox: asyncio.Queue[bytes | None] = asyncio.Queue(SEND_QUEUE)
        self.pairs: dict[str, _Pair] = {}
        self.by_stream: dict[int, _Pair] = {}
        self.last_stream = 0

    async def received(self, data: bytes) -> bool:
        """Handle the client's bytes; False once the session is over (GOAWAY)."""
        for frame in self.decoder.feed(data):
            if frame.kind == spdy.SYN_STREAM:
                await self._opened(frame)
            elif frame.kind == spdy.DATA:
                await self._data(frame)
            elif frame.kind == spdy.RST_STREAM:
                pair = self.by_stream.get(frame.stream_id)
                if pair is not None:
                    await self._finish(pair)
            elif frame.kind == spdy.PING:
                await self.outbox.put(frame.raw)  # the same frame back
            elif frame.kind == spdy.GOAWAY:
                return False
        return True

    async def _opened(self, frame: spdy.Frame) -> None:
        if frame.stream_id <= self.last_stream or frame.stream_id % 2 == 0:
            raise spdy.SpdyError(f"stream {frame.stream_id}: a client opens odd, increasing stream ids")
        self.last_stream = frame.stream_id
        try:
            kind, port, request_id = _stream_headers(frame.headers)
        except spdy.SpdyError as e:
            log.info("port-forward: refusing stream %d: %s", frame.stream_id, e)
            await self.outbox.put(self.encoder.rst_stream(frame.stream_id, spdy.CANCEL))
            return
        pair = self.pairs.get(request_id)
        if pair is None:
            if len(self.pairs) >= MAX_PAIRS:
                await self.outbox.put(self.encoder.rst_stream(frame.stream_id, spdy.REFUSED_STREAM))
                return
            pair = self.pairs[request_id] = _Pair(port, request_id)
        if (kind == "error" and pair.error_id) or (kind == "data" and pair.data_id) or pair.port != port:
            await self.outbox.put(self.encoder.rst_stream(frame.stream_id, spdy.PROTOCOL_ERROR))
            return
        if kind == "error":
            pair.error_id = frame.stream_id
        else:
            pair.data_id = frame.stream_id
        self.by_stream[frame.stream_id] = pair
        await self.outbox.put(self.encoder.syn_reply(frame.stream_id))
        if pair.error_id and pair.data_id:
            await self._connect(pair)

    async def _connect(self, pair: _Pair) -> None:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, pair.port), CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else "connection timed out"
            message = f"error forwarding port {pair.port} to pod {self.pod}, uid {self.uid}: {reason}"
            await self.outbox.put(spdy.Encoder.data(pair.error_id, message.encode()))
            await self.outbox.put(self.encoder.rst_stream(pair.data_id, spdy.CANCEL))
            await self.outbox.put(self.encoder.rst_stream(pair.error_id, spdy.CANCEL))
            self._forget(pair)
            return
        pair.writer = writer
        for data, fin in pair.pending:
            await self._to_pod(pair, data, fin)
        pair.pending.clear()
        pair.pump = asyncio.create_task(self._from_pod(pair, reader))

    async def _data(self, frame: spdy.Frame) -> None:
        pair = self.by_stream.get(frame.stream_id)
        if pair is None or frame.stream_id != pair.data_id:
            return  # the error stream's FIN, or a stream already gone
        if pair.writer is None:
            if sum(len(d) for d, _ in pair.pending) + len(frame.data) > MAX_MESSAGE:
                raise spdy.SpdyError("too much data before the error stream was opened")
            pair.pending.append((frame.data, frame.fin))
            return
        await self._to_pod(pair, frame.data, frame.fin)

    async def _to_pod(self, pair: _Pair, data: bytes, fin: bool) -> None:
        assert pair.writer is not None
        try:
            if data:
                pair.writer.write(data)
                await pair.writer.drain()
            if fin and pair.writer.can_write_eof():
                pair.writer.write_eof()
        except OSError:
            await self._finish(pair)

    async def _from_pod(self, pair: _Pair, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(CHUNK):
                await self.outbox.put(spdy.Encoder.data(pair.data_id, data))
        await self._finish(pair)

    async def _finish(self, pair: _Pair) -> None:
        """The pod's side ended (or the client reset): FIN both streams, close the connection."""
        if pair.done:
            return
        pair.done = True
        if pair.error_id:
            await self.outbox.put(spdy.Encoder.data(pair.error_id, fin=True))
        if pair.data_id:
            await self.outbox.put(spdy.Encoder.data(pair.data_id, fin=True))
        self._forget(pair)

    def _forget(self, pair: _Pair) -> None:
        self.pairs.pop(pair.request_id, None)
        for stream in (pair.error_id, pair.data_id):
            self.by_stream.pop(stream, None)
        if pair.writer is not None:
            pair.writer.close()
        if pair.pump is not None and pair.pump is not asyncio.current_task():
            pair.pump.cancel()

    async def close(self) -> None:
        for pair in list(self.pairs.values()):
            pair.done = True
            self._forget(pair)


async def serve(request: web.Request, host: str, pod: str, uid: str) -> web.StreamResponse:
    offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
    if PROTOCOL not in offered:
        raise web.HTTPBadRequest(text=f"port-forward speaks {PROTOCOL} over WebSocket; offered: {offered or 'none'}\n")
    ws = web.WebSocketResponse(protocols=(PROTOCOL,), max_msg_size=MAX_MESSAGE, autoping=True)
    await ws.prepare(request)
    session = PortForwardSession(host, pod, uid)

    async def send() -> None:
        while (frame := await session.outbox.get()) is not None:
            await ws.send_bytes(frame)

    sender = asyncio.create_task(send())
    try:
        async for msg in ws:
            if msg.type != WSMsgType.BINARY or not await session.received(msg.data):
                break
    except spdy.SpdyError as e:
        log.info("port-forward to %s: %s; closing", pod, e)
    except ConnectionError:
        pass
    finally:
        await session.close()
        sender.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await sender
        with contextlib.suppress(Exception):
            await ws.close()
    return ws
