"""LinkProxy on plain asyncio sockets (what it forwards, loses, delays and closes), then a
real 3-member cluster whose peer links run through a ProxyMesh."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import pytest

from store.api.errors import StoreError
from store.api.framing import HEADER, encode_frame
from store.chaos.network import ProxyMesh
from store.chaos.proxy import LinkProxy
from store.client.client import Client
from store.server.config import read_member_file
from tests.support.cluster import StoreCluster, fast_settings

HELLO = ["raftkube-peer/1", 7]


@dataclass
class Received:
    frames: list[tuple[float, Any]] = field(default_factory=list)
    closed: bool = False

    def objs(self) -> list[Any]:
        return [o for _, o in self.frames]


class Sink:
    """A peer's listener: decodes frames per connection and notes when each arrived."""

    def __init__(self) -> None:
        self.conns: list[Received] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        rec = Received()
        self.conns.append(rec)
        buf = bytearray()
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                buf += data
                while len(buf) >= 4 and len(buf) >= 4 + HEADER.unpack_from(buf)[0]:
                    n = HEADER.unpack_from(buf)[0]
                    rec.frames.append((time.monotonic(), msgpack.unpackb(bytes(buf[4 : 4 + n]))))
                    del buf[: 4 + n]
        rec.closed = True
        writer.close()

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()


async def until(cond: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


async def closed_by_peer(reader: asyncio.StreamReader, timeout: float = 2.0) -> bool:
    """True if the proxy closed (or reset) this connection within `timeout`."""
    try:
        return await asyncio.wait_for(reader.read(1), timeout) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


_dialled: list[asyncio.StreamWriter] = []


async def dial(proxy: LinkProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A sender's connection to the proxy, closed by `hang_up` when the test ends."""
    r, w = await asyncio.open_connection(proxy.host, proxy.port)
    _dialled.append(w)
    return r, w


def hang_up() -> None:
    while _dialled:
        _dialled.pop().close()


def with_proxy(body: Callable[[LinkProxy, Sink], Awaitable[None]], framed: bool = True, seed: int = 1) -> None:
    async def go() -> None:
        sink = Sink()
        await sink.start()
        proxy = LinkProxy(("127.0.0.1", sink.port), framed=framed, seed=seed)
        await proxy.start()
        try:
            await asyncio.wait_for(body(proxy, sink), 20)
        finally:
            hang_up()
            await proxy.close()
            await sink.close()
            await asyncio.sleep(0.01)

    asyncio.run(go())


def test_forwards_whole_frames_in_order() -> None:
    """Every frame arrives once, in order, and the counters say so."""

    async def body(proxy: LinkProxy, sink: Sink) -> None:
        _, w = await dial(proxy)
        w.write(encode_frame(HELLO) + b"".join(encode_frame(["m", i]) for i in range(200)))
        await w.drain()
        await until(lambda: len(sink.conns) == 1 and len(sink.conns[0].frames) == 201)
        assert sink.conns[0].objs() == [HELLO] + [["m", i] for i in range(200)]
        assert proxy.stats.frames_forwarded == 201 and proxy.stats.connections == 1
        w.close()
        await until(lambda: sink.conns[0].closed)

    with_proxy(body)


def test_drop_share_is_roughly_right_and_never_the_hello() -> None:
    """drop(0.3) loses about 30% of frames (seeded), the first frame never; drop(1.0) leaves only it."""

    async def body(proxy: LinkProxy, sink: Sink) -> None:
        proxy.drop(0.3)
        _, w = await dial(proxy)
        w.write(encode_frame(HELLO) + b"".join(encode_frame(["m", i]) for i in range(2000)))
        await w.drain()
        await until(lambda: proxy.stats.frames_forwarded + proxy.stats.frames_dropped == 2001)
        await until(lambda: len(sink.conns[0].frames) == proxy.stats.frames_forwarded)
        got = sink.conns[0].objs()
        assert got[0] == HELLO
        assert 1250 < len(got) - 1 < 1550
        assert [m[1] for m in got[1:]] == sorted(m[1] for m in got[1:])
        proxy.drop(1.0)
        _, w2 = await dial(proxy)
        w2.write(encode_frame(HELLO) + encode_frame(["m", 1]))
        await w2.drain()
        await until(lambda: len(sink.conns) == 2 and len(sink.conns[1].frames) == 1)
        await asyncio.sleep(0.1)
        assert sink.conns[1].objs() == [HELLO]

    with_proxy(body)


def test_delay_keeps_order_and_adds_about_the_delay() -> None:
    """delay(0.1, 0.05): every frame is 50..150 ms late (plus scheduling), in sending order."""

    async def body(proxy: LinkProxy, sink: Sink) -> None:
        proxy.delay(0.1, 0.05)
        _, w = await dial(proxy)
        sent: list[float] = []
        w.write(encode_frame(HELLO))
        sent.append(time.monotonic())
        for i in range(40):
            w.write(encode_frame(["m", i]))
            await w.drain()
            sent.append(time.monotonic())
            await asyncio.sleep(0.005)
        await until(lambda: len(sink.conns[0].frames) == 41)
        rec = sink.conns[0]
        assert rec.objs() == [HELLO] + [["m", i] for i in range(40)]
        lat = [t - s for (t, _), s in zip(rec.frames, sent, strict=True)]
        assert min(lat) >= 0.045, lat
        assert max(lat) < 0.3, lat
        assert 0.07 < sum(lat) / len(lat) < 0.17, lat

    with_proxy(body)


def test_blackhole_swallows_silently_then_heal_resumes_new_frames() -> None:
    """While blackholed nothing arrives and the sender's connection stays open; after heal,
    new frames flow (lost ones stay lost), and a connection opened meanwhile gets its hello first."""

    async def body(proxy: LinkProxy, sink: Sink) -> None:
        r, w = await dial(proxy)
        w.write(encode_frame(HELLO) + encode_frame(["m", "a"]))
        await until(lambda: len(sink.conns) == 1 and len(sink.conns[0].frames) == 2)
        proxy.blackhole()
        w.write(encode_frame(["m", "b"]) + encode_frame(["m", "c"]))
        await w.drain()
        r2, w2 = await dial(proxy)
        w2.write(encode_frame(["raftkube-peer/1", 8]) + encode_frame(["m", "x"]))
        await w2.drain()
        assert not await closed_by_peer(r, 0.3)
        assert not await closed_by_peer(r2, 0.01)
        assert sink.conns[0].objs() == [HELLO, ["m", "a"]]
        assert all(not c.frames for c in sink.conns[1:])
        assert proxy.stats.frames_dropped == 3
        proxy.heal()
        w.write(encode_frame(["m", "d"]))
        w2.write(encode_frame(["m", "y"]))
        await until(lambda: len(sink.conns) == 2 and len(sink.conns[0].frames) == 3 and len(sink.conns[1].frames) == 2)
        assert sink.conns[0].objs() == [HELLO, ["m", "a"], ["m", "d"]]
        assert sink.conns[1].objs() == [["raftkube-peer/1", 8], ["m", "y"]]

    with_proxy(body)


def test_cut_resets_live_connections_and_accepts_new_ones() -> None:
    """cut() closes every live connection at once; the next one is forwarded as usual."""

    async def body(proxy: LinkProxy, sink: Sink) -> None:
        conns = [await dial(proxy) for _ in range(2)]
        for _, w in conns:
            w.write(encode_frame(HELLO))
        await until(lambda: len(sink.conns) == 2 and all(c.frames for c in sink.conns))
        proxy.cut()
        for r, _ in conns:
            assert await closed_by_peer(r)
        await until(lambda: all(c.closed for c in sink.conns))
        assert proxy.stats.closed_by_fault == 2
        _, w = await dial(proxy)
        w.write(encode_frame(HELLO) + encode_frame(["m", 1]))
        await until(lambda: len(sink.conns) == 3 and len(sink.conns[2].frames) == 2)

    with_proxy(body)


def test_unreachable_target_closes_the_connection_soon() -> None:
    """With nobody at the target, the connection is closed (after a short hold, not at once)."""

    async def go() -> None:
        sink = Sink()
        await sink.start()
        await sink.close()
        proxy = LinkProxy(("127.0.0.1", sink.port))
        await proxy.start()
        try:
            r, w = await dial(proxy)
            w.write(encode_frame(HELLO))
            t0 = time.monotonic()
            assert await closed_by_peer(r)
            assert time.monotonic() - t0 >= 0.15
            assert proxy.stats.upstream_failures == 1
        finally:
            hang_up()
            await proxy.close()

    asyncio.run(go())


def test_raw_mode_forwards_both_ways_and_blackhole_breaks_the_stream_until_heal() -> None:
    """In front of a request/response port: echoes pass; blackholed, requests go unanswered;
    on heal that (now unparseable) connection is closed and a new one works."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(4096):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def go() -> None:
        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        proxy = LinkProxy(("127.0.0.1", server.sockets[0].getsockname()[1]), framed=False)
        await proxy.start()
        try:
            r, w = await dial(proxy)
            w.write(b"ping")
            assert await asyncio.wait_for(r.readexactly(4), 2) == b"ping"
            proxy.blackhole()
            w.write(b"lost")
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(r.read(1), 0.3)
            proxy.heal()
            assert await closed_by_peer(r)
            r2, w2 = await dial(proxy)
            w2.write(b"pong")
            assert await asyncio.wait_for(r2.readexactly(4), 2) == b"pong"
            with pytest.raises(ValueError):
                proxy.drop(0.1)
        finally:
            hang_up()
            await proxy.close()
            server.close()

    asyncio.run(go())


# ---------------------------------------------------------------------- a real cluster behind a ProxyMesh


@pytest.fixture
def meshed(tmp_path: Path) -> Iterator[tuple[StoreCluster, ProxyMesh]]:
    """A 3-member cluster (fast_settings) whose peer links all go through a ProxyMesh."""
    tc = StoreCluster(fast_settings(tmp_path), insecure=True)
    mesh = ProxyMesh(tc.local, seed=7)
    try:
        tc.start()
        tc.wait_leader()
        yield tc, mesh
    finally:
        tc.stop()
        mesh.close()


def test_mesh_faults_select_the_right_links(tmp_path: Path) -> None:
    """partition, bridge, isolate and per-link faults mark exactly the intended directed links
    (on a laid-out cluster whose members are not running)."""
    tc = StoreCluster(fast_settings(tmp_path), insecure=True)
    with ProxyMesh(tc.local, seed=1) as mesh:

        def holes() -> set[str]:
            return {k for k, v in mesh.stats().items() if v["blackhole"]}

        mesh.partition([[1], [2, 3]])
        assert holes() == {"1->2", "2->1", "1->3", "3->1"}
        mesh.heal()
        mesh.bridge(1, 2, [3])
        assert holes() == {"1->3", "3->1"}
        mesh.heal()
        mesh.isolate(2)
        mesh.one_way(3, 1)
        assert holes() == {"1->2", "2->1", "3->2", "2->3", "3->1"}
        mesh.heal_link(3, 1)
        assert holes() == {"1->2", "2->1", "3->2", "2->3"}
        mesh.heal()
        mesh.delay((1, 2), 0.05, 0.01)
        mesh.drop(3, 0.25)
        st = mesh.stats()
        assert st["1->2"]["delay_mean"] == 0.05 and st["2->1"]["delay_mean"] == 0.0
        assert {k for k, v in st.items() if v["drop"] == 0.25} == {"1->3", "3->1", "2->3", "3->2"}
        mesh.cut_clients(2)
        assert mesh.stats()["client-2"]["blackhole"]
        with pytest.raises(ValueError):
            mesh.isolate(9)
        with pytest.raises(ValueError):
            mesh.partition([[1, 2], [2, 3]])
    mesh.close()
    with pytest.raises(RuntimeError):
        mesh.heal()


def put(tc: StoreCluster, key: bytes, value: bytes, members: list[int] | None = None, timeout: float = 5.0) -> int:
    """Write through the given members (all by default); the revision it got."""
    eps = [tc.endpoint(m) for m in members] if members else None

    async def go() -> int:
        async with tc.client(eps, timeout=timeout) as c:
            return (await c.put(key, value)).revision

    return asyncio.run(go())


def role(tc: StoreCluster, member: int) -> str | None:
    st = asyncio.run(tc.statuses())[member]
    return None if st is None else str(st["role"])


def wait_for(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(0.05)


def assert_converged(tc: StoreCluster, timeout: float = 15.0) -> int:
    """A fresh write reaches every member and their key spaces hash equal at its revision."""
    rev = put(tc, b"chaos/marker", b"%d" % time.monotonic_ns(), timeout=timeout)
    ids = tc.local.member_ids()
    tc.wait_applied(rev, ids, timeout=timeout)

    async def hashes() -> set[int]:
        async with tc.client() as c:
            return {(await c.hash_kv(tc.endpoint(m), rev))[0] for m in ids}

    assert len(asyncio.run(hashes())) == 1
    return rev


def test_mesh_points_members_at_their_link_proxies(meshed: tuple[StoreCluster, ProxyMesh]) -> None:
    """Each member dials peer j through proxy i->j: Raft traffic shows up on every link."""
    tc, mesh = meshed
    put(tc, b"chaos/a", b"1")
    for i in (1, 2, 3):
        dial = read_member_file(tc.local.member_dir(i)).peer_dial
        assert dial == {j: mesh.peer_url(i, j) for j in (1, 2, 3) if j != i}
    links = [f"{i}->{j}" for i in (1, 2, 3) for j in (1, 2, 3) if i != j]
    wait_for(lambda: all(mesh.stats()[k]["frames_forwarded"] > 0 for k in links), 5, "a frame on every link")


def test_isolated_leader_steps_down_and_the_rest_carry_on_then_all_converge(
    meshed: tuple[StoreCluster, ProxyMesh],
) -> None:
    """Isolating the leader: the other two elect a leader and take writes; the old one steps
    down (CheckQuorum) and refuses writes; after heal all three hold the same data."""
    tc, mesh = meshed
    old = tc.wait_leader()
    rest = [m for m in (1, 2, 3) if m != old]
    mesh.isolate(old)
    new = tc.wait_leader(timeout=10, exclude=(old,))
    assert new in rest
    rev = put(tc, b"chaos/while-isolated", b"v", members=rest)
    wait_for(lambda: role(tc, old) != "leader", 5, "the isolated leader steps down")
    with pytest.raises(StoreError):
        put(tc, b"chaos/refused", b"v", members=[old], timeout=1.0)
    mesh.heal()
    tc.wait_leader(timeout=10)
    assert assert_converged(tc) > rev

    async def refused_absent() -> int:
        async with tc.client() as c:
            return len((await c.get(b"chaos/refused")).kvs)

    assert asyncio.run(refused_absent()) == 0


def test_one_way_blackhole_leader_to_follower(meshed: tuple[StoreCluster, ProxyMesh]) -> None:
    """The leader's messages to one follower are lost (the follower's to it still arrive):
    writes commit with the other follower, the cut-off one lags, and catches up on heal."""
    tc, mesh = meshed
    leader = tc.wait_leader()
    deaf, other = (m for m in (1, 2, 3) if m != leader)
    mesh.one_way(leader, deaf)
    revs = [put(tc, b"chaos/one-way/%d" % i, b"v", members=[leader, other]) for i in range(10)]
    tc.wait_applied(revs[-1], [leader, other])
    st = asyncio.run(tc.statuses())
    assert st[deaf] is not None and st[deaf]["revision"] < revs[-1]
    assert mesh.stats()[f"{leader}->{deaf}"]["frames_dropped"] > 0
    mesh.heal()
    tc.wait_leader(timeout=10)
    assert_converged(tc)


def test_lossy_slow_links_still_make_progress(meshed: tuple[StoreCluster, ProxyMesh]) -> None:
    """30% of frames lost and 75 +- 50 ms of delay on every link: writes still commit."""
    tc, mesh = meshed
    for m in (1, 2, 3):
        mesh.drop(m, 0.3)
        mesh.delay(m, 0.075, 0.05)
    done = 0
    deadline = time.monotonic() + 30
    while done < 10 and time.monotonic() < deadline:
        with contextlib.suppress(StoreError):
            put(tc, b"chaos/lossy/%d" % done, b"v", timeout=5.0)
            done += 1
    assert done == 10, f"only {done} writes committed in 30s"
    stats = mesh.stats()
    assert sum(s["frames_dropped"] for s in stats.values()) > 0
    mesh.heal()
    tc.wait_leader(timeout=10)
    assert_converged(tc)


def test_cut_all_connections_reconnect(meshed: tuple[StoreCluster, ProxyMesh]) -> None:
    """Resetting every peer connection of the leader, again and again: members reconnect
    through the proxies and writes keep committing."""
    tc, mesh = meshed
    leader = tc.wait_leader()
    before = mesh.stats()
    for i in range(5):
        mesh.cut_all(leader)
        put(tc, b"chaos/cut/%d" % i, b"v")
        time.sleep(0.1)
    after = mesh.stats()
    for m in (1, 2, 3):
        if m != leader:
            for link in (f"{leader}->{m}", f"{m}->{leader}"):
                assert after[link]["connections"] > before[link]["connections"], link
                assert after[link]["closed_by_fault"] >= 1, link
    assert_converged(tc)


def test_clients_cut_from_one_member(meshed: tuple[StoreCluster, ProxyMesh]) -> None:
    """cut_clients: that member is unreachable through its proxied endpoint while the
    cluster stays healthy; heal_clients makes it reachable again."""
    tc, mesh = meshed
    leader = tc.wait_leader()
    m = next(i for i in (1, 2, 3) if i != leader)
    url = mesh.client_url(m)

    async def status_via_proxy() -> dict[str, Any]:
        async with Client([url], timeout=1.0, connect_timeout=0.5) as c:
            return (await c.status(endpoint=url)).to_json()

    assert asyncio.run(status_via_proxy())["id"] == m
    mesh.cut_clients(m)
    t0 = time.monotonic()
    with pytest.raises(StoreError):
        asyncio.run(status_via_proxy())
    assert time.monotonic() - t0 < 5
    put(tc, b"chaos/clients-cut", b"v")
    st = asyncio.run(tc.statuses())
    assert all(s is not None and s["healthy"] for s in st.values())
    mesh.heal_clients(m)
    assert asyncio.run(status_via_proxy())["id"] == m
