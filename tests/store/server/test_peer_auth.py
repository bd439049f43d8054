"""Who may talk on the peer port: members of this cluster, as themselves, about themselves.

A PeerTransport for member 1 with the cluster's TLS listens on a real socket; attackers
connect with whatever they have (nothing, a client certificate, another member's
certificate, another CA) and send what used to take a cluster over: forged appends, term
bumps, terms of 2^64-1, messages in another member's name.  Nothing of theirs may reach
Raft.  Each case says what it gets."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from machinery.process import pki
from store.api.framing import encode_frame
from store.raft.types import Entry, Message, MessageType
from store.server.raft_codec import message_to_wire
from store.server.transport import HELLO, MAX_INBOUND, PeerTransport, split_batch

HOSTS = ["127.0.0.1", "localhost"]


@dataclass
class Certs:
    ca: pki.CertFiles
    members: dict[int, pki.CertFiles]
    client: pki.CertFiles
    foreign_member: pki.CertFiles


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    ca = pki.create_ca(tmp_path / "ca")
    members = {i: pki.issue_member_cert(ca, tmp_path / f"m{i}", i, HOSTS) for i in (1, 2, 3, 5)}
    other = pki.create_ca(tmp_path / "other")
    return Certs(
        ca,
        members,
        pki.issue_client_cert(ca, tmp_path / "clients", "admin"),
        pki.issue_member_cert(other, tmp_path / "foreign", 2, HOSTS),
    )


@dataclass
class Listener:
    """Member 1's transport, recording what reaches its Raft node."""

    transport: PeerTransport
    port: int
    delivered: list[Message] = field(default_factory=list)


def _listener(certs: Certs, removed: frozenset[int] = frozenset({5})) -> tuple[PeerTransport, list[Message]]:
    files = certs.members[1]
    got: list[Message] = []
    t = PeerTransport(
        1,
        got.extend,
        lambda _p: None,
        lambda _p, _f: None,
        server_tls=pki.server_context(files),
        client_tls=pki.client_context(files.ca, files.cert, files.key),
        is_removed=lambda peer: peer in removed,
    )
    return t, got


def _ctx(files: pki.CertFiles | None, ca: pki.CertFiles) -> ssl.SSLContext:
    if files is None:
        return pki.client_context(ca.ca)
    return pki.client_context(ca.ca, files.cert, files.key)


def append(frm: int, to: int = 1, term: int = 7) -> list[Any]:
    """A forged append: new entries at a higher term, which would rewrite the log."""
    m = Message(
        type=MessageType.APP,
        to=to,
        frm=frm,
        term=term,
        log_term=1,
        index=1,
        entries=[Entry(term, 2, data=b"evil")],
        commit=2,
    )
    return message_to_wire(m)


async def _attempt(port: int, ctx: ssl.SSLContext | None, frames: list[Any]) -> bool:
    """Connect, send the frames; True if the listener kept the connection open afterwards."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port, ssl=ctx), 5)
    except (OSError, ssl.SSLError, TimeoutError):
        return False
    try:
        for f in frames:
            writer.write(encode_frame(f))
        await writer.drain()
        try:
            data = await asyncio.wait_for(reader.read(1), 1.0)
        except TimeoutError:
            return True  # still open: nothing to say, nothing refused
        return bool(data)
    except (OSError, ssl.SSLError):
        return False
    finally:
        writer.transport.abort()


def _run_against_listener(certs: Certs, ctx: ssl.SSLContext | None, frames: list[Any]) -> tuple[bool, list[Message]]:
    async def main() -> tuple[bool, list[Message]]:
        t, got = _listener(certs)
        await t.listen("127.0.0.1", 0)
        assert t.server is not None
        port = t.server.sockets[0].getsockname()[1]
        try:
            kept = await _attempt(port, ctx, frames)
            await asyncio.sleep(0.05)
            return kept, got
        finally:
            await t.close()

    return asyncio.run(main())


@pytest.fixture
def cases(certs: Certs) -> Iterator[dict[str, tuple[ssl.SSLContext | None, list[Any]]]]:
    c = certs
    yield {
        # No credentials at all: plaintext on a TLS port.
        "plaintext": (None, [[HELLO, 2], ["m", [append(2)]]]),
        # TLS but no certificate.
        "no certificate": (_ctx(None, c.ca), [[HELLO, 2], ["m", [append(2)]]]),
        # A client's certificate is no member's.
        "client certificate": (_ctx(c.client, c.ca), [[HELLO, 2], ["m", [append(2)]]]),
        # A member of another cluster (another CA).
        "another CA": (_ctx(c.foreign_member, c.ca), [[HELLO, 2], ["m", [append(2)]]]),
        # Member 2's certificate, claiming to be member 3.
        "hello names another member": (_ctx(c.members[2], c.ca), [[HELLO, 3], ["m", [append(3)]]]),
        # Member 2, speaking in member 3's name.
        "message from another member": (_ctx(c.members[2], c.ca), [[HELLO, 2], ["m", [append(3)]]]),
        # Member 2, with a message for member 3.
        "message for another member": (_ctx(c.members[2], c.ca), [[HELLO, 2], ["m", [append(2, to=3)]]]),
        # A term of 2^64-1 used to crash two members for good.
        "term 2^64-1": (_ctx(c.members[2], c.ca), [[HELLO, 2], ["m", [append(2, term=2**64 - 1)]]]),
        # A removed member's certificate still chains to the CA: refused by its id.
        "removed member": (_ctx(c.members[5], c.ca), [[HELLO, 5], ["m", [append(5)]]]),
        # A local-only message type on the wire.
        "local message type": (
            _ctx(c.members[2], c.ca),
            [[HELLO, 2], ["m", [message_to_wire(Message(type=MessageType.HUP, to=1, frm=2))]]],
        ),
        # Snapshot chunks that announce more than they carry, or start mid-way.
        "snapshot chunk mid-way": (_ctx(c.members[2], c.ca), [[HELLO, 2], ["s", append(2), 10, 5, b"12345"]]),
        "snapshot size out of range": (_ctx(c.members[2], c.ca), [[HELLO, 2], ["s", append(2), -1, 0, b"x"]]),
    }


@pytest.mark.parametrize(
    "case",
    [
        "plaintext",
        "no certificate",
        "client certificate",
        "another CA",
        "hello names another member",
        "message from another member",
        "message for another member",
        "term 2^64-1",
        "removed member",
        "local message type",
        "snapshot chunk mid-way",
        "snapshot size out of range",
    ],
)
def test_nothing_from_an_impostor_or_a_malformed_peer_reaches_raft(
    certs: Certs, cases: dict[str, tuple[ssl.SSLContext | None, list[Any]]], case: str
) -> None:
    ctx, frames = cases[case]
    kept, delivered = _run_against_listener(certs, ctx, frames)
    assert delivered == [], f"{case}: {delivered}"
    assert not kept, f"{case}: the connection stayed open"


def test_member_2_speaking_for_itself_is_heard(certs: Certs) -> None:
    heartbeat = message_to_wire(Message(type=MessageType.HEARTBEAT, to=1, frm=2, term=3))
    kept, delivered = _run_against_listener(certs, _ctx(certs.members[2], certs.ca), [[HELLO, 2], ["m", [heartbeat]]])
    assert kept
    assert [(m.type, m.frm, m.term) for m in delivered] == [(MessageType.HEARTBEAT, 2, 3)]


def test_dialling_a_peer_checks_that_the_member_answering_is_the_one_dialled(certs: Certs) -> None:
    """Member 1 dials "member 2" at an address where member 3 answers: nothing is sent."""

    async def main() -> list[Message]:
        got: list[Message] = []
        m3 = certs.members[3]
        impostor = PeerTransport(
            3,
            got.extend,
            lambda _p: None,
            lambda _p, _f: None,
            server_tls=pki.server_context(m3),
            client_tls=pki.client_context(m3.ca, m3.cert, m3.key),
        )
        await impostor.listen("127.0.0.1", 0)
        assert impostor.server is not None
        port = impostor.server.sockets[0].getsockname()[1]
        t, _ = _listener(certs)
        t.add_peer(2, "127.0.0.1", port)
        t.send([Message(type=MessageType.HEARTBEAT, to=2, frm=1, term=1)])
        await asyncio.sleep(0.5)
        await t.close()
        await impostor.close()
        return got

    assert asyncio.run(main()) == []


def test_inbound_connections_are_capped(certs: Certs) -> None:
    """Idle sockets on the peer port cannot use up the member's file descriptors."""

    async def main() -> int:
        t, _ = _listener(certs)
        await t.listen("127.0.0.1", 0)
        assert t.server is not None
        port = t.server.sockets[0].getsockname()[1]
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(MAX_INBOUND + 10)]
        await asyncio.sleep(0.2)
        served = len(t.inbound)
        for _, w in conns:
            w.transport.abort()
        await t.close()
        return served

    assert asyncio.run(main()) <= MAX_INBOUND


def test_append_batches_are_split_to_stay_within_the_receivers_frame_limit() -> None:
    """A lagging follower is sent hundreds of 1 MiB appends at once: they go in frames of a
    few MiB, never one frame of hundreds (which the follower refused, for a minute)."""
    msgs = [
        Message(type=MessageType.APP, to=2, frm=1, term=1, entries=[Entry(1, i, data=b"x" * (1 << 20))])
        for i in range(1, 200)
    ]
    runs = list(split_batch(msgs))
    assert [m for r in runs for m in r] == msgs
    assert all(sum(len(e.data) for m in r for e in m.entries) <= 8 << 20 for r in runs)
    # One message bigger than the budget goes alone rather than being refused.
    huge = Message(type=MessageType.APP, to=2, frm=1, term=1, entries=[Entry(1, 1, data=b"x" * (9 << 20))])
    assert list(split_batch([huge])) == [[huge]]
