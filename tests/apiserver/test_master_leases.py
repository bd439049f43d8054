"""apiserver/master_leases.py, kube's lease endpoint reconciler: each apiserver holds a key
under /registry/masterleases/ until its time runs out; a round names the live ones, sorted,
and deletes what ran out; a value not ours is left; the one stopping takes out only its own;
and default/kubernetes's Endpoints and slice name every live apiserver (over real registries
and the in-memory storage, a clock of our own)."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apiserver.kubernetes_service import KubernetesService, keep_forever
from apiserver.master_leases import PREFIX, TTL_S, MasterLeases, parse
from tests.apiserver.kinds_support import find, registry, run
from tests.apiserver.memstorage import MemStorage


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_each_apiserver_is_listed_until_its_time_runs_out() -> None:
    storage, clock = MemStorage(), Clock()
    a = MasterLeases(storage, "10.77.0.32", 6443, clock=clock)
    b = MasterLeases(storage, "10.77.0.31", 6443, clock=clock)

    async def go() -> None:
        await a.renew()
        await b.renew()
        assert await a.live() == ["10.77.0.31", "10.77.0.32"]  # kube's order: sorted
        clock.now += TTL_S / 2
        await a.renew()  # b died
        clock.now += TTL_S / 2 + 1
        assert await a.live() == ["10.77.0.32"]
        assert await storage.get(PREFIX + "10.77.0.31") is None  # the one that ran out is deleted
        await b.renew()  # back
        assert await a.live() == ["10.77.0.31", "10.77.0.32"]

    run(go())


def test_two_apiservers_of_one_address_share_its_key_and_neither_removes_it_alone() -> None:
    storage, clock = MemStorage(), Clock()
    one = MasterLeases(storage, "127.0.0.1", 6443, clock=clock)
    two = MasterLeases(storage, "127.0.0.1", 6443, clock=clock)

    async def go() -> None:
        await asyncio.gather(one.renew(), two.renew(), one.renew())
        assert await two.live() == ["127.0.0.1"]
        page = await storage.list(PREFIX)
        assert len(page.items) == 1

    run(go())


def test_release_takes_out_its_own_key_only() -> None:
    storage, clock = MemStorage(), Clock()
    mine = MasterLeases(storage, "10.77.0.31", 6443, clock=clock)
    other = MasterLeases(storage, "10.77.0.32", 6443, clock=clock)

    async def go() -> None:
        await mine.renew()
        await other.renew()
        await storage.create(PREFIX + "10.77.0.99", b"\x6b\x38\x73\x00 a kube-apiserver's Endpoints")
        await mine.release()
        assert await other.live() == ["10.77.0.32"]
        assert await storage.get(PREFIX + "10.77.0.99") is not None  # not ours: left alone

    run(go())


@given(st.one_of(st.binary(max_size=80), st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=8))))
def test_any_value_is_read_or_skipped_never_crashes(raw: bytes | dict[str, object]) -> None:
    value = raw if isinstance(raw, bytes) else json.dumps(raw).encode()
    held = parse(value)
    assert held is None or 0 < held.port < 65536


def test_default_kubernetes_names_every_live_apiserver() -> None:
    services = registry(find("", "services"))
    endpoints = registry(find("", "endpoints"))
    slices = registry(find("discovery.k8s.io", "endpointslices"))
    storage, clock = MemStorage(), Clock()
    target = KubernetesService.of("10.96.0.0/16", "10.77.0.32", 6443)
    leases = MasterLeases(storage, target.address, target.port, clock=clock)
    rounds = 0

    async def sleep(_: float) -> None:
        nonlocal rounds
        rounds += 1
        if rounds == 1:
            await MasterLeases(storage, "10.77.0.31", 6443, clock=clock).renew()
        if rounds == 2:
            raise asyncio.CancelledError

    async def go() -> None:
        with pytest.raises(asyncio.CancelledError):
            await keep_forever(target, services, endpoints, slices, sleep=sleep, leases=leases)
        ep = await endpoints.get("default", "kubernetes")
        assert ep["subsets"][0]["addresses"] == [{"ip": "10.77.0.31"}, {"ip": "10.77.0.32"}]
        sl = await slices.get("default", "kubernetes")
        assert [e["addresses"] for e in sl["endpoints"]] == [["10.77.0.31"], ["10.77.0.32"]]

    run(go())
