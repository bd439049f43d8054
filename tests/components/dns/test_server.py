"""The server's handling of messages: answers from the zone, refusals of what it will not answer,
truncation, forwarding (to a second server standing in for the host's resolver), the bounds on
TCP connections; and that no bytes a client sends make it raise."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from dnslib import EDNS0, QTYPE, RCODE, DNSHeader, DNSQuestion, DNSRecord
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from components.dns.records import Zone
from components.dns.server import DNSServer, Forwarder, Handler, Metrics
from machinery.process.launch import free_ports


def zone() -> Zone:
    z = Zone("cluster.local")
    z.set_service({"metadata": {"namespace": "default", "name": "kubernetes"}, "spec": {"clusterIP": "10.96.0.1"}})
    z.set_service({"metadata": {"namespace": "ns1", "name": "big"}, "spec": {"clusterIP": "None"}})
    eps = [{"addresses": [f"10.244.{i // 250}.{i % 250 + 1}"]} for i in range(60)]
    labels = {"kubernetes.io/service-name": "big"}
    z.set_slice(
        {"metadata": {"namespace": "ns1", "name": "big-1", "labels": labels}, "addressType": "IPv4", "endpoints": eps}
    )
    return z


def handler(upstreams: list[tuple[str, int]] | None = None) -> Handler:
    return Handler(zone(), Forwarder(upstreams or [], timeout=0.5), Metrics(CollectorRegistry()))


def run(h: Handler, data: bytes, tcp: bool = False) -> Any:
    out = asyncio.run(h.handle(data, tcp))
    return None if out is None else DNSRecord.parse(out)


def test_answers_from_the_zone_with_the_question_and_id() -> None:
    q = DNSRecord.question("kubernetes.default.svc.cluster.local", "A")
    got = run(handler(), q.pack())
    assert got.header.id == q.header.id and got.header.aa == 1 and got.header.rcode == RCODE.NOERROR
    assert [str(r.rdata) for r in got.rr] == ["10.96.0.1"] and str(
        got.q.qname
    ) == "kubernetes.default.svc.cluster.local."


def test_refusals() -> None:
    h = handler()
    multi = DNSRecord(DNSHeader(id=7), questions=[DNSQuestion("a.cluster.local"), DNSQuestion("b.cluster.local")])
    assert run(h, multi.pack()).header.rcode == RCODE.FORMERR
    assert run(h, DNSRecord(DNSHeader(id=7)).pack()).header.rcode == RCODE.FORMERR  # no question
    chaos = DNSRecord(q=DNSQuestion("version.bind", QTYPE.TXT, 3))
    assert run(h, chaos.pack()).header.rcode == RCODE.REFUSED
    assert run(h, DNSRecord.question("cluster.local", "AXFR").pack()).header.rcode == RCODE.REFUSED
    notify = DNSRecord(DNSHeader(id=9, opcode=4), q=DNSQuestion("cluster.local"))
    assert run(h, notify.pack()).header.rcode == RCODE.NOTIMP
    long_label = b"\x00\x01\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + bytes([70]) + b"a" * 70 + b"\x00\x00\x01\x00\x01"
    assert run(h, long_label).header.rcode == RCODE.FORMERR
    long_name = b"".join(bytes([60]) + b"b" * 60 for _ in range(5))
    assert run(h, long_label[:12] + long_name + b"\x00\x00\x01\x00\x01").header.rcode == RCODE.FORMERR
    assert run(h, b"\x12\x34" + b"\x01\x00" + b"\xff" * 20).header.rcode == RCODE.FORMERR  # garbage after a header
    assert run(h, b"\x12\x34") is None  # no header: dropped
    reply = DNSRecord.question("kubernetes.default.svc.cluster.local").reply()
    assert run(h, reply.pack()) is None  # a response: never answered


def test_outside_the_zone_without_upstreams_is_servfail() -> None:
    assert run(handler(), DNSRecord.question("example.com").pack()).header.rcode == RCODE.SERVFAIL


def test_udp_answers_are_truncated_to_what_the_client_takes() -> None:
    h = handler()
    q = DNSRecord.question("big.ns1.svc.cluster.local", "A")
    small = run(h, q.pack())
    assert small.header.tc == 1 and not small.rr and str(small.q.qname) == "big.ns1.svc.cluster.local."
    assert len(run(h, q.pack(), tcp=True).rr) == 60
    q.add_ar(EDNS0(udp_len=4096))
    out = asyncio.run(h.handle(q.pack(), False))
    assert out is not None and len(out) <= 1232
    big = DNSRecord.parse(out)
    assert big.header.tc == 0 and len(big.rr) == 60


def test_udp_answers_lose_their_additional_section_before_their_answers() -> None:
    h = handler()
    ports = [{"name": "http", "port": 80, "protocol": "TCP"}]
    h.zone.set_service({"metadata": {"namespace": "ns1", "name": "six"}, "spec": {"clusterIP": "None", "ports": ports}})
    eps = [{"addresses": [f"10.1.0.{i}"], "hostname": f"host-number-{i}"} for i in range(6)]
    meta = {"namespace": "ns1", "name": "six", "labels": {"kubernetes.io/service-name": "six"}}
    h.zone.set_slice({"metadata": meta, "addressType": "IPv4", "endpoints": eps, "ports": ports})
    q = DNSRecord.question("_http._tcp.six.ns1.svc.cluster.local", "SRV")
    over_udp, over_tcp = run(h, q.pack()), run(h, q.pack(), tcp=True)
    assert over_udp.header.tc == 0 and len(over_udp.rr) == 6 and not over_udp.ar
    assert len(over_tcp.rr) == 6 and len(over_tcp.ar) == 6


@given(st.binary(max_size=600))
@settings(max_examples=300, deadline=None)
def test_random_bytes_never_raise(data: bytes) -> None:
    out = asyncio.run(handler().handle(data, tcp=False))
    assert out is None or (len(out) >= 12 and out[:2] == data[:2])


@given(st.binary(max_size=80), st.sampled_from([b"\x00\x01", b"\x00\x21", b"\x00\x0c", b"\x00\xff"]))
@settings(max_examples=300, deadline=None)
def test_random_names_never_raise(name: bytes, qtype: bytes) -> None:
    data = b"\xab\xcd\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + name + b"\x00" + qtype + b"\x00\x01"
    out = asyncio.run(handler().handle(data, tcp=True))
    assert out is not None and out[:2] == b"\xab\xcd"


def test_a_deep_pointer_chain_is_formerr() -> None:
    # question i's name is a label and a pointer to question i-1's: the parser recurses 1200 deep (past Python's limit)
    body = b"\x01a\x00\x00\x01\x00\x01"
    offsets = [12]
    for _ in range(1200):
        offsets.append(12 + len(body))
        body += b"\x01a" + struct.pack("!H", 0xC000 | offsets[-2]) + b"\x00\x01\x00\x01"
    data = b"\x00\x05\x01\x00" + struct.pack("!H", len(offsets)) + b"\x00" * 6 + body
    assert run(handler(), data, tcp=True).header.rcode == RCODE.FORMERR


@asynccontextmanager
async def serving(z: Zone, upstreams: list[tuple[str, int]], **bounds: Any) -> AsyncIterator[int]:
    (port,) = free_ports(1)
    server = DNSServer(
        Handler(z, Forwarder(upstreams, timeout=1.0), Metrics(CollectorRegistry())),
        Metrics(CollectorRegistry()),
        **bounds,
    )
    await server.start("127.0.0.1", port)
    try:
        yield port
    finally:
        await server.stop()


async def ask(port: int, name: str, qtype: str = "A", tcp: bool = False) -> Any:
    q = DNSRecord.question(name, qtype)
    raw = await asyncio.to_thread(q.send, "127.0.0.1", port, tcp=tcp, timeout=3)
    return DNSRecord.parse(raw)


def test_forwarding_over_udp_and_tcp_and_servfail_when_upstream_is_silent() -> None:
    async def main() -> None:
        upstream = Zone("example.com")
        upstream.set_service({"metadata": {"namespace": "x", "name": "y"}, "spec": {"clusterIP": "192.0.2.7"}})
        async with serving(upstream, []) as up, serving(zone(), [("127.0.0.1", up)]) as port:
            for tcp in (False, True):
                got = await ask(port, "y.x.svc.example.com", tcp=tcp)
                assert [str(r.rdata) for r in got.rr] == ["192.0.2.7"] and got.header.aa == 1  # the upstream's
                assert (await ask(port, "kubernetes.default.svc.cluster.local", tcp=tcp)).rr
        (silent,) = free_ports(1)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", silent))
            async with serving(zone(), [("127.0.0.1", silent)]) as port:
                got = await ask(port, "example.org")
                assert got.header.rcode == RCODE.SERVFAIL

    asyncio.run(main())


def test_external_names_are_chased_upstream() -> None:
    async def main() -> None:
        upstream = Zone("example.com")
        upstream.set_service({"metadata": {"namespace": "x", "name": "y"}, "spec": {"clusterIP": "192.0.2.7"}})
        z = zone()
        ext = {"type": "ExternalName", "externalName": "y.x.svc.example.com"}
        z.set_service({"metadata": {"namespace": "ns1", "name": "ext"}, "spec": ext})
        async with serving(upstream, []) as up, serving(z, [("127.0.0.1", up)]) as port:
            got = await ask(port, "ext.ns1.svc.cluster.local")
            assert [str(r.rdata) for r in got.rr] == ["y.x.svc.example.com.", "192.0.2.7"]
            got = await ask(port, "ext.ns1.svc.cluster.local", "CNAME")
            assert [str(r.rdata) for r in got.rr] == ["y.x.svc.example.com."]

    asyncio.run(main())


def test_tcp_bounds_connections_idle_and_size() -> None:
    async def main() -> None:
        async with serving(zone(), [], max_connections=2, idle=0.5, max_message=512) as port:
            held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
            await asyncio.sleep(0.05)
            r, w = await asyncio.open_connection("127.0.0.1", port)
            assert await asyncio.wait_for(r.read(), 2) == b""  # closed at once: over the limit
            w.close()
            for r, _ in held:  # idle ones are closed
                assert await asyncio.wait_for(r.read(), 2) == b""
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"\xff\xff" + b"x" * 100)
            assert await asyncio.wait_for(r.read(), 2) == b""  # too large: closed
            w.close()
            for _, w in held:
                w.close()
            # and it still answers, over a connection carrying two queries
            r, w = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(2):
                q = DNSRecord.question("kubernetes.default.svc.cluster.local").pack()
                w.write(struct.pack("!H", len(q)) + q)
                (n,) = struct.unpack("!H", await asyncio.wait_for(r.readexactly(2), 2))
                assert DNSRecord.parse(await r.readexactly(n)).rr
            w.close()

    asyncio.run(main())
