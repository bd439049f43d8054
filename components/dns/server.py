"""The DNS server: UDP and TCP on one address, answering the cluster zone (`records.Zone`) and
forwarding every other name to the host's resolvers.  dnslib reads and writes the wire format.

What a client can do to it is bounded:

* a datagram or TCP message that is not a query (a response, too short) is dropped; one that does
  not parse is FORMERR; other opcodes NOTIMP; anything but one IN-class question FORMERR (several
  questions, a label over 63 bytes, a name over 253 characters) or REFUSED (another class, zone
  transfers).
* UDP answers larger than 512 bytes, or than the EDNS payload size the client offered (up to
  1232, the DNS flag day's size), lose their additional section first; if still too large they go
  out truncated (TC, question only), and the client asks again over TCP.
* TCP: at most `max_connections` at once (more are closed at once), each closed after `idle`
  seconds without a whole message, messages over `max_message` bytes close it.  Messages on one
  connection are answered in order, one at a time, so a connection holds one query's memory.
* forwards: at most `max_inflight` at once, each with a deadline; beyond either, SERVFAIL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import struct
from collections.abc import Sequence
from typing import Any, cast

from dnslib import EDNS0, QTYPE, RCODE, DNSHeader, DNSLabel, DNSQuestion, DNSRecord
from prometheus_client import CollectorRegistry, Counter

from components.dns.records import Zone

log = logging.getLogger("raftkube.dns")

CLASS_IN = 1
OP_QUERY = 0
PLAIN_UDP_SIZE = 512
OUR_UDP_SIZE = 1232  # the EDNS payload we offer and honour at most (DNS flag day 2020)
MAX_NAME = 253  # characters in a name's text form, without the final dot
MAX_LABEL = 63
TRANSFERS = (QTYPE.AXFR, QTYPE.IXFR)

Upstream = tuple[str, int]


class Metrics:
    """Queries by transport and answers by rcode (CoreDNS's coredns_dns_* series, our prefix)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("raftkube_dns_requests", "DNS queries received", ["proto"], registry=registry)
        self.responses = Counter("raftkube_dns_responses", "DNS answers sent", ["rcode"], registry=registry)
        self.forwards = Counter("raftkube_dns_forwards", "Queries forwarded upstream", ["result"], registry=registry)
        self.dropped = Counter("raftkube_dns_dropped", "Messages dropped unanswered", ["why"], registry=registry)


class Forwarder:
    """Asks the upstream resolvers, in order, each for a share of `timeout`; None when none
    answered or too many forwards are in flight (the caller answers SERVFAIL)."""

    def __init__(self, upstreams: Sequence[Upstream], *, timeout: float = 2.0, max_inflight: int = 200) -> None:
        self.upstreams = list(upstreams)
        self.timeout = timeout
        self.max_inflight = max_inflight
        self._inflight = 0

    async def query(self, data: bytes, tcp: bool) -> bytes | None:
        """The upstream's reply to the query `data`, with the query's own ID."""
        if not self.upstreams or self._inflight >= self.max_inflight or len(data) < 12:
            return None
        self._inflight += 1
        try:
            share = self.timeout / len(self.upstreams)
            for host, port in self.upstreams:
                qid = secrets.token_bytes(2)  # our own ID upstream: a spoofed reply must guess it
                try:
                    async with asyncio.timeout(share):
                        reply = await (_ask_tcp if tcp else _ask_udp)(host, port, qid + data[2:])
                except (TimeoutError, OSError, asyncio.IncompleteReadError) as e:
                    log.debug("upstream %s:%d: %r", host, port, e)
                    continue
                if reply is not None:
                    return data[:2] + reply[2:]
            return None
        finally:
            self._inflight -= 1


async def _ask_udp(host: str, port: int, query: bytes) -> bytes | None:
    loop = asyncio.get_running_loop()
    got: asyncio.Future[bytes] = loop.create_future()

    class _One(asyncio.DatagramProtocol):
        def datagram_received(self, data: bytes, addr: Any) -> None:
            if not got.done() and _is_reply_to(data, query):
                got.set_result(data)

        def error_received(self, exc: Exception) -> None:
            if not got.done():
                got.set_exception(exc)

    transport, _ = await loop.create_datagram_endpoint(_One, remote_addr=(host, port))
    try:
        transport.sendto(query)
        return await got
    finally:
        transport.close()


async def _ask_tcp(host: str, port: int, query: bytes) -> bytes | None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(struct.pack("!H", len(query)) + query)
        await writer.drain()
        (n,) = struct.unpack("!H", await reader.readexactly(2))
        reply = await reader.readexactly(n)
        return reply if _is_reply_to(reply, query) else None
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _is_reply_to(reply: bytes, query: bytes) -> bool:
    return len(reply) >= 12 and reply[:2] == query[:2] and bool(reply[2] & 0x80)


class Handler:
    """One message in, the bytes to send back out (None: send nothing)."""

    def __init__(self, zone: Zone, forwarder: Forwarder, metrics: Metrics) -> None:
        self.zone, self.forwarder, self.metrics = zone, forwarder, metrics

    async def handle(self, data: bytes, tcp: bool) -> bytes | None:
        self.metrics.requests.labels("tcp" if tcp else "udp").inc()
        if len(data) < 12 or data[2] & 0x80:  # no header, or a response: never answer those
            self.metrics.dropped.labels("not a query").inc()
            return None
        try:
            request = DNSRecord.parse(data)
        except Exception:  # dnslib raises several kinds (and deep pointer chains, RecursionError)
            (qid,) = struct.unpack("!H", data[:2])
            return self._done(DNSRecord(DNSHeader(id=qid, qr=1, rcode=RCODE.FORMERR)), tcp, PLAIN_UDP_SIZE)
        size = _udp_size(request)
        head = request.header
        reply = DNSRecord(DNSHeader(id=head.id, qr=1, opcode=head.opcode, rd=head.rd, ra=1), q=request.q)
        if not request.questions:
            reply.questions = []
        if any(r.rtype == QTYPE.OPT for r in request.ar):
            reply.add_ar(EDNS0(udp_len=OUR_UDP_SIZE))
        rcode = self._refuse(request)
        if rcode is not None:
            reply.header.rcode = rcode
            if rcode == RCODE.FORMERR:  # the question may not even be writable (a long label)
                reply.questions = []
            return self._done(reply, tcp, size)
        q = request.q
        got = self.zone.answer(q.qname, q.qtype)
        if got is None:
            if self.zone.owns(q.qname):  # cannot be: the zone answers for all of its names
                reply.header.rcode = RCODE.SERVFAIL
                return self._done(reply, tcp, size)
            return await self._forward(data, tcp, reply, size)
        reply.header.aa = 1
        reply.header.rcode = got.rcode
        reply.rr.extend(got.answers)
        reply.auth.extend(got.authority)
        reply.ar[:0] = got.additional
        if got.chase is not None:
            await self._chase(reply, got.chase, q.qtype, tcp)
        return self._done(reply, tcp, size)

    def _refuse(self, request: Any) -> int | None:
        """The rcode for a query this server will not answer, or None."""
        if request.header.opcode != OP_QUERY:
            return int(RCODE.NOTIMP)
        if len(request.questions) != 1:
            return int(RCODE.FORMERR)
        q = request.q
        labels = q.qname.label
        if any(len(x) > MAX_LABEL for x in labels) or sum(len(x) + 1 for x in labels) > MAX_NAME + 1:
            return int(RCODE.FORMERR)
        if q.qclass != CLASS_IN or q.qtype in TRANSFERS:
            return int(RCODE.REFUSED)
        if q.qtype in (253, 254):  # MAILB, MAILA: obsolete
            return int(RCODE.NOTIMP)
        return None

    async def _forward(self, data: bytes, tcp: bool, reply: Any, size: int) -> bytes | None:
        answer = await self.forwarder.query(data, tcp)
        if answer is None:
            self.metrics.forwards.labels("failed").inc()
            reply.header.rcode = RCODE.SERVFAIL
            return self._done(reply, tcp, size)
        self.metrics.forwards.labels("answered").inc()
        self.metrics.responses.labels(RCODE.get(answer[3] & 0xF, "other")).inc()
        return answer

    async def _chase(self, reply: Any, target: str, qtype: int, tcp: bool) -> None:
        """Resolve an ExternalName's target upstream and add what it says (CoreDNS does too, so a
        stub resolver that does not follow CNAMEs gets the addresses)."""
        query = DNSRecord(DNSHeader(id=0, rd=1), q=DNSQuestion(DNSLabel(target), qtype))
        raw = await self.forwarder.query(query.pack(), tcp)
        self.metrics.forwards.labels("answered" if raw is not None else "failed").inc()
        if raw is None:
            return
        with contextlib.suppress(Exception):
            upstream = DNSRecord.parse(raw)
            reply.rr.extend(upstream.rr)
            reply.header.rcode = upstream.header.rcode

    def _done(self, reply: Any, tcp: bool, size: int) -> bytes:
        try:
            data: bytes = reply.pack()
        except Exception:  # a name dnslib will not write (from upstream, or echoed): say so, bare
            log.debug("could not write an answer for %s", reply.q.qname, exc_info=True)
            reply = DNSRecord(DNSHeader(id=reply.header.id, qr=1, rcode=RCODE.SERVFAIL))
            data = reply.pack()
        if not tcp and len(data) > size and any(r.rtype != QTYPE.OPT for r in reply.ar):
            # the additional section is a courtesy: drop it before the answers (RFC 2181 9)
            reply.ar = [r for r in reply.ar if r.rtype == QTYPE.OPT]
            data = reply.pack()
        if not tcp and len(data) > size:
            cut = DNSRecord(
                DNSHeader(id=reply.header.id, qr=1, aa=reply.header.aa, tc=1, rd=reply.header.rd, ra=1),
                questions=list(reply.questions),
            )
            cut.header.rcode = reply.header.rcode
            cut.ar = [r for r in reply.ar if r.rtype == QTYPE.OPT]
            data = cut.pack()
        self.metrics.responses.labels(RCODE.get(reply.header.rcode, "other")).inc()
        return data


def _udp_size(request: Any) -> int:
    """The largest UDP answer the client takes: its EDNS payload size (capped), or 512."""
    for r in request.ar:
        if r.rtype == QTYPE.OPT and isinstance(r.rclass, int):
            return max(PLAIN_UDP_SIZE, min(r.rclass, OUR_UDP_SIZE))
    return PLAIN_UDP_SIZE


# -- the sockets -----------------------------------------------------------------------------------


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server: DNSServer) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)  # asyncio's is not a subclass

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if len(self.server.tasks) >= self.server.max_pending:
            self.server.metrics.dropped.labels("busy").inc()
            return
        task = asyncio.create_task(self._answer(data, addr))
        self.server.tasks.add(task)
        task.add_done_callback(self.server.tasks.discard)

    async def _answer(self, data: bytes, addr: Any) -> None:
        try:
            out = await self.server.handler.handle(data, tcp=False)
        except Exception:
            log.exception("a UDP query from %s failed", addr)
            return
        if out is not None and self.transport is not None and not self.transport.is_closing():
            self.transport.sendto(out, addr)

    def error_received(self, exc: Exception) -> None:  # an ICMP error for an earlier answer
        log.debug("udp: %r", exc)


class DNSServer:
    """UDP and TCP listeners on one host and port, answering with `handler`."""

    def __init__(
        self,
        handler: Handler,
        metrics: Metrics,
        *,
        max_connections: int = 256,
        idle: float = 10.0,
        max_message: int = 4096,
        max_pending: int = 1024,
    ) -> None:
        self.handler, self.metrics = handler, metrics
        self.max_connections, self.idle, self.max_message = max_connections, idle, max_message
        self.max_pending = max_pending  # UDP queries being answered (forwards wait) at once
        self.tasks: set[asyncio.Task[None]] = set()
        self._connections: set[asyncio.Task[Any]] = set()
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None

    @property
    def bound(self) -> bool:
        return self._udp is not None and self._tcp is not None

    async def start(self, host: str, port: int) -> tuple[int, int]:
        """Bind both; returns the (UDP, TCP) ports bound (port 0: the same free port for both
        is not guaranteed, so tests pass a free one)."""
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: _Udp(self), local_addr=(host, port))
        self._udp = transport
        self._tcp = await asyncio.start_server(self._connection, host, port, limit=self.max_message + 2)
        return transport.get_extra_info("sockname")[1], self._tcp.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._udp is not None:
            self._udp.close()
            self._udp = None
        if self._tcp is not None:
            self._tcp.close()
            self._tcp = None
        for task in [*self.tasks, *self._connections]:
            task.cancel()
        await asyncio.gather(*self.tasks, *self._connections, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None or len(self._connections) >= self.max_connections:
            self.metrics.dropped.labels("too many connections").inc()
            writer.close()
            return
        self._connections.add(task)
        try:
            while True:
                async with asyncio.timeout(self.idle):
                    (n,) = struct.unpack("!H", await reader.readexactly(2))
                    if n > self.max_message:
                        self.metrics.dropped.labels("too large").inc()
                        return
                    data = await reader.readexactly(n)
                out = await self.handler.handle(data, tcp=True)
                if out is None:
                    continue
                writer.write(struct.pack("!H", len(out)) + out)
                async with asyncio.timeout(self.idle):
                    await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        except Exception:
            log.exception("a TCP connection failed")
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
