"""Kernel faults between members on hosts of their own (root), with mutual TLS on: nftables
rules in the members' namespaces isolate a leader (another is elected; the isolated one
falls behind and catches up once healed), make links lossy (writes still commit: TCP
resends), cut a member's clients off (live connections aborted, new ones dropped) and reset
peer connections (the members redial).  Heal leaves no rule behind."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.api.errors import StoreError
from store.chaos.kernel_net import TABLE, KernelMesh
from tests.support.cluster import StoreCluster, running_cluster
from tests.support.network import free_cidr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StoreCluster]:
    with running_cluster(tmp_path_factory.mktemp("kernel"), hosts="netns", hosts_subnet=free_cidr()) as tc:
        assert tc.tls is not None  # the point: faults with TLS on
        yield tc


@pytest.fixture
def mesh(cluster: StoreCluster) -> Iterator[KernelMesh]:
    m = KernelMesh(cluster.local)
    try:
        yield m
    finally:
        m.heal()


def put(tc: StoreCluster, key: bytes, endpoints: list[str] | None = None, timeout: float = 3.0) -> int | None:
    """The revision of a put, or None when it failed within `timeout`."""

    async def go() -> int | None:
        async with tc.client(endpoints, timeout=timeout, connect_timeout=1.0) as c:
            try:
                return (await c.put(key, b"v")).revision
            except (StoreError, OSError, TimeoutError):
                return None

    return asyncio.run(asyncio.wait_for(go(), timeout + 5))


def tables(mesh: KernelMesh, member: int) -> str:
    argv = [*mesh.net.argv(mesh.cluster.host_name(member), ["nft", "list", "tables"])]
    return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=True).stdout


def test_an_isolated_leader_is_replaced_and_catches_up_once_healed(cluster: StoreCluster, mesh: KernelMesh) -> None:
    old = cluster.wait_leader()
    mesh.isolate(old)
    new = cluster.wait_leader(exclude=(old,))
    assert new != old
    others = [cluster.endpoint(m) for m in mesh.ids if m != old]
    rev = put(cluster, b"while-isolated", others)
    assert rev is not None
    assert put(cluster, b"to-the-isolated-one", [cluster.endpoint(old)], timeout=1.0) is None
    mesh.heal()
    assert f"table inet {TABLE}" not in tables(mesh, old)
    cluster.wait_applied(rev, mesh.ids, timeout=15)


def test_lossy_links_still_commit_and_heal_removes_the_rules(cluster: StoreCluster, mesh: KernelMesh) -> None:
    leader = cluster.wait_leader()
    mesh.drop(leader, 0.3)
    assert (
        "numgen random mod 10000 < 3000"
        in subprocess.run(
            mesh.net.argv(mesh.cluster.host_name(leader), ["nft", "list", "table", "inet", TABLE]),
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    )
    revs = [put(cluster, b"lossy-%d" % i, timeout=5.0) for i in range(5)]
    assert all(r is not None for r in revs), revs
    mesh.heal()
    assert all(f"table inet {TABLE}" not in tables(mesh, m) for m in mesh.ids)


def test_cut_clients_aborts_and_refuses_a_members_clients_until_healed(cluster: StoreCluster, mesh: KernelMesh) -> None:
    leader = cluster.wait_leader()
    member = next(m for m in mesh.ids if m != leader)  # our clients write at the leader: cut a follower's
    url = [cluster.endpoint(member)]
    assert put(cluster, b"before-cut", url) is not None
    mesh.cut_clients(member)
    assert put(cluster, b"during-cut", url, timeout=1.0) is None  # it cannot even ask who leads
    assert put(cluster, b"elsewhere", [cluster.endpoint(m) for m in mesh.ids if m != member]) is not None
    mesh.heal_clients(member)
    assert put(cluster, b"after-cut", url) is not None


def test_reset_peer_connections_are_redialled(cluster: StoreCluster, mesh: KernelMesh) -> None:
    leader = cluster.wait_leader()
    mesh.cut_all(leader)
    mesh.cut(leader, next(m for m in mesh.ids if m != leader))
    rev = put(cluster, b"after-resets", timeout=5.0)
    assert rev is not None
    cluster.wait_applied(rev, mesh.ids, timeout=15)
    assert mesh.stats()[f"member-{leader}"]["resets"] == 2


def timed_put(tc: StoreCluster, key: bytes) -> float:
    """How long a put that succeeded took (a few tries: an election may come between)."""
    for _ in range(5):
        start = time.monotonic()
        if put(tc, key, timeout=5.0) is not None:
            return time.monotonic() - start
        tc.wait_leader()
    raise AssertionError(f"no put of {key!r} succeeded in 5 tries")


def test_delayed_links_slow_every_commit_until_healed(cluster: StoreCluster, mesh: KernelMesh) -> None:
    """No netem here: each member's links go through a delay proxy in its namespace (TLS
    unread); a commit needs the leader's append to reach a follower and its answer to come back,
    so each put takes twice the delay at least, whoever leads (50 ms: the round trip stays under
    the test profile's 200 ms election timeout); healed, the proxies are gone and puts are
    quick again."""
    for m in mesh.ids:
        mesh.delay(m, 0.05)
    try:
        cluster.wait_leader()
        slow = [timed_put(cluster, f"slow-{i}".encode()) for i in range(3)]
        assert min(slow) >= 0.09, slow
        proxies = mesh.delay_proxies()
        assert sorted(proxies) == sorted(mesh.ids)
    finally:
        mesh.heal()
    assert mesh.delay_proxies() == {}
    for pid in proxies.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    cluster.wait_leader()
    fast = min(timed_put(cluster, f"fast-{i}".encode()) for i in range(3))
    assert fast < 0.07, fast


def test_a_delay_out_of_bounds_is_refused(mesh: KernelMesh) -> None:
    with pytest.raises(ValueError, match="jitter <= mean"):
        mesh.delay(mesh.ids[0], 0.05, 0.1)


def test_a_mesh_needs_members_on_hosts_of_their_own(tmp_path: Path) -> None:
    with running_cluster(tmp_path, members=1) as tc, pytest.raises(ValueError, match="hosts of their own"):
        KernelMesh(tc.local)
