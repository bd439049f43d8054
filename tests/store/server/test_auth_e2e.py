"""Nobody without credentials talks to a member (real member processes, real TLS).

Client port: TLS with a certificate from the cluster CA, or nothing.  Peer port: only the
cluster's members.  A watch belongs to the connection that made it."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from machinery.process import pki
from store.api.errors import StoreError
from store.api.framing import encode_frame
from store.api.protocol import ERROR, PROTOCOL, STREAM, split_url
from store.api.watch import WatchCreateRequest
from store.raft.types import Entry, Message, MessageType
from store.server.raft_codec import message_to_wire
from store.server.transport import HELLO
from tests.support.cluster import StoreCluster, running_cluster
from tests.support.raw import RawConn


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreCluster]:
    with running_cluster(tmp_path_factory.mktemp("auth")) as tc:
        yield tc


def run(coro: object) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


def _hello_answered(url: str, ctx: ssl.SSLContext | None) -> bool:
    async def go() -> bool:
        try:
            conn = await RawConn.open(url, ctx, hello=False)
        except (OSError, ssl.SSLError, TimeoutError):
            return False
        try:
            reply = await conn.call(1, "hello", [PROTOCOL], timeout=3)
            return reply is not None and reply[1] == 0
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError):
            return False
        finally:
            conn.close()

    return bool(run(go()))


def test_the_client_port_wants_a_certificate_from_the_cluster_ca(cluster: StoreCluster, tmp_path: Path) -> None:
    url = cluster.endpoints[0]
    ca = cluster.local.pki_dir / "ca.crt"
    other = pki.create_ca(tmp_path / "other")
    stranger = pki.issue_client_cert(other, tmp_path / "stranger", "admin")
    assert _hello_answered(url, cluster.tls)  # the admin certificate
    assert not _hello_answered(url, None)  # plaintext
    assert not _hello_answered(url, pki.client_context(ca))  # TLS, no certificate
    assert not _hello_answered(url, pki.client_context(ca, stranger.cert, stranger.key))  # another CA


def test_the_peer_port_hears_no_one_without_a_member_certificate(cluster: StoreCluster) -> None:
    """A forged append (new entries at term + 1000) from outside, plaintext and with a
    client's certificate: the members' term does not move, no key appears."""
    leader = cluster.wait_leader()
    before = run(cluster.statuses())
    target = next(m for m in cluster.local.members() if m.id != leader)
    host, port = split_url(target.peer_url)
    term = before[target.id]["term"] + 1000  # type: ignore[index]
    forged = message_to_wire(
        Message(
            type=MessageType.APP,
            to=target.id,
            frm=leader,
            term=term,
            log_term=term,
            index=10_000,
            entries=[Entry(term, 10_001, data=b"evil")],
            commit=10_001,
        )
    )
    frames = encode_frame([HELLO, leader]) + encode_frame(["m", [forged]])
    with socket.create_connection((host, port), timeout=2) as s:
        s.sendall(frames)
    client_ctx = cluster.tls
    assert client_ctx is not None

    async def with_client_cert() -> None:
        try:
            _, w = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=client_ctx), 3)
        except (OSError, ssl.SSLError):
            return
        w.write(frames)
        await asyncio.sleep(0.3)
        w.transport.abort()

    run(with_client_cert())
    after = run(cluster.statuses())
    assert all(s is not None and s["term"] == before[i]["term"] for i, s in after.items()), (before, after)  # type: ignore[index]
    assert cluster.wait_leader() == leader


def test_a_watch_can_be_cancelled_only_by_its_own_connection(cluster: StoreCluster) -> None:
    async def go() -> tuple[Any, Any, list[bytes]]:
        owner = await RawConn.open(cluster.endpoints[0], cluster.tls)
        other = await RawConn.open(cluster.endpoints[0], cluster.tls)
        try:
            owner.send([1, "watch", WatchCreateRequest(b"owned/", b"owned0").to_wire()])
            created = await owner.next()
            assert created[1] == STREAM and created[3][3], created
            wid = created[3][0]
            refused = await other.call(2, "watch_cancel", [wid])
            progress = await other.call(3, "watch_progress", [wid])
            async with cluster.client() as c:
                await c.put(b"owned/k", b"still watched")
            event = await owner.next()
            return refused, progress, [e[1][0] for e in event[3][2]]
        finally:
            owner.close()
            other.close()

    refused, progress, keys = run(go())
    assert refused[1] == ERROR and refused[2][0] == "watch-not-found", refused
    assert progress[1] == ERROR and progress[2][0] == "watch-not-found", progress
    assert keys == [b"owned/k"]


def test_the_cli_and_the_client_refuse_a_plaintext_cluster_endpoint_without_insecure(cluster: StoreCluster) -> None:
    """The typed client over plaintext to a TLS member: unavailable, with a hint, not a hang."""

    async def go() -> str:
        from store.client.client import Client

        async with Client(cluster.endpoints[:1], timeout=1.0, connect_timeout=0.5) as c:
            try:
                await c.get(b"k")
            except StoreError as e:
                return f"{e.code}: {e.message}"
        return "answered"

    said = run(go())
    assert said.startswith("unavailable") and "TLS" in said, said


def test_a_member_without_its_key_exits_2_naming_the_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    from machinery.process.launch import free_ports
    from store.launcher import LocalCluster
    from tests.support.cluster import fast_settings

    local = LocalCluster(tmp_path)
    local.create(fast_settings(tmp_path, members=1), ports=free_ports(3))
    key = local.member_dir(1) / "tls" / "member.key"
    key.unlink()
    out = subprocess.run(
        [sys.executable, "-m", "store.server.main", str(local.member_dir(1))],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert str(key) in out.stderr
