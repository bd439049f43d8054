"""Differential test of the whole system: the same random operations on a running raftkube
cluster (three member processes, through the client and the wire protocol, Raft and the
WAL) and on a real etcd 3.4, with identical answers required.

The operation generator, the etcd side and the comparison are those of the MVCC-level
differential test (tests/store/mvcc/test_etcd_differential.py); here the raftkube side is a
cluster shared by all examples, so its revisions are shifted like etcd's: every example
sees revision 1 as "just before it started".
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.api.kv import (
    Compare,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    KeyValue,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    RequestOp,
    ResponseOp,
    TxnRequest,
    TxnResponse,
    prefix_end,
)
from store.client.client import Client
from tests.store.mvcc.etcd import Canon, Etcd, event_canon, running_etcd
from tests.store.mvcc.test_etcd_differential import Drawer, Pair
from tests.support.cluster import StoreCluster, running_cluster

T = TypeVar("T")


def _up(rev: int, off: int) -> int:
    return rev + off if rev > 0 else rev


def shift_request(op: RequestOp, off: int) -> RequestOp:
    """Revisions an example names (relative to its start) as absolute cluster revisions."""
    if isinstance(op, RangeRequest):
        return dataclasses.replace(
            op,
            revision=_up(op.revision, off),
            min_mod_revision=_up(op.min_mod_revision, off),
            max_mod_revision=_up(op.max_mod_revision, off),
            min_create_revision=_up(op.min_create_revision, off),
            max_create_revision=_up(op.max_create_revision, off),
        )
    if isinstance(op, TxnRequest):
        return TxnRequest(
            [_shift_compare(c, off) for c in op.compare],
            [shift_request(o, off) for o in op.success],
            [shift_request(o, off) for o in op.failure],
        )
    return op


def _shift_compare(c: Compare, off: int) -> Compare:
    if c.target in (CompareTarget.CREATE, CompareTarget.MOD) and isinstance(c.value, int):
        return dataclasses.replace(c, value=_up(c.value, off))
    return c


def _kv(kv: KeyValue, off: int) -> KeyValue:
    return dataclasses.replace(
        kv, create_revision=_up(kv.create_revision, -off), mod_revision=_up(kv.mod_revision, -off)
    )


def shift_response(resp: ResponseOp, off: int) -> ResponseOp:
    """Absolute cluster revisions back to the example's relative ones."""
    if isinstance(resp, RangeResponse):
        return RangeResponse(_up(resp.revision, -off), [_kv(kv, off) for kv in resp.kvs], resp.more, resp.count)
    if isinstance(resp, PutResponse):
        return PutResponse(_up(resp.revision, -off), _kv(resp.prev_kv, off) if resp.prev_kv else None)
    if isinstance(resp, DeleteRangeResponse):
        return DeleteRangeResponse(_up(resp.revision, -off), resp.deleted, [_kv(kv, off) for kv in resp.prev_kvs])
    assert isinstance(resp, TxnResponse)
    return TxnResponse(_up(resp.revision, -off), resp.succeeded, [shift_response(r, off) for r in resp.responses])


class ClusterSubject:
    """The raftkube side: a running cluster, seen from one example's relative revisions."""

    def __init__(self, loop: asyncio.AbstractEventLoop, client: Client) -> None:
        self.loop = loop
        self.client = client
        marker = self._run(client.put(b"\x01marker", b""))
        self.off = marker.revision - 1
        self._compact = 0

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    @property
    def current_revision(self) -> int:
        return self._run(self.client.get(b"\x01marker")).revision - self.off

    @property
    def compact_revision(self) -> int:
        return self._compact

    def range(self, r: RangeRequest) -> RangeResponse:
        resp = self._run(self.client.range(shift_request(r, self.off)))  # type: ignore[arg-type]
        return shift_response(resp, self.off)  # type: ignore[return-value]

    def put(self, r: PutRequest) -> PutResponse:
        flags = {"lease": r.lease, "prev_kv": r.prev_kv, "ignore_value": r.ignore_value, "ignore_lease": r.ignore_lease}
        resp = self._run(self.client.put(r.key, r.value, **flags))
        return shift_response(resp, self.off)  # type: ignore[return-value]

    def delete(self, r: DeleteRangeRequest) -> DeleteRangeResponse:
        resp = self._run(self.client.delete(r.key, r.range_end, prev_kv=r.prev_kv))
        return shift_response(resp, self.off)  # type: ignore[return-value]

    def txn(self, r: TxnRequest) -> TxnResponse:
        resp = self._run(self.client.txn(shift_request(r, self.off)))  # type: ignore[arg-type]
        return shift_response(resp, self.off)  # type: ignore[return-value]

    def compact(self, rev: int) -> int:
        resp = self._run(self.client.compact(_up(rev, self.off), physical=True))
        self._compact = max(self._compact, rev)
        return _up(resp.revision, -self.off)

    def grant(self, lease_id: int, ttl: int) -> tuple[int, int]:
        resp = self._run(self.client.lease_grant(ttl, lease_id))
        return resp.id, resp.ttl

    def revoke(self, lease_id: int) -> int:
        return _up(self._run(self.client.lease_revoke(lease_id)), -self.off)


def compare_watch(pair: Pair, subject: ClusterSubject) -> None:
    """A watch replaying the example's whole prefix (prev_kv on) gives the same event
    sequence on both systems: types, keys, values, revisions, versions, leases, prev_kvs."""
    end = subject.current_revision
    start = max(subject.compact_revision + 1, 2)  # relative revision 1 is the marker write
    if end < start:
        return
    key, range_end = pair.prefix, prefix_end(pair.prefix)

    async def ours() -> list[Canon]:
        out: list[Canon] = []
        w = subject.client.watch(key, range_end, start_revision=start + subject.off, prev_kv=True)
        async for resp in w:
            out += [event_canon(e) for e in resp.events]
            if out and resp.events[-1].kv.mod_revision >= end + subject.off:
                break
            if resp.canceled:
                raise AssertionError(f"raftkube canceled the watch: {resp}")
        await w.cancel()
        return [
            (t, k, _shift_canon(kv, subject.off), _shift_canon(prev, subject.off) if prev else None)
            for t, k, kv, prev in out
        ]

    mine = subject._run(asyncio.wait_for(ours(), 10))
    theirs_ = pair.etcd.watch(key, range_end, start + pair.off, end + pair.off, off=pair.off)
    assert mine == theirs_, "\n".join(["watch replay differs:", *pair.log, f"raftkube: {mine}", f"etcd:     {theirs_}"])


def _shift_canon(kv: Canon, off: int) -> Canon:
    key, create, mod, version, value, lease = kv
    return (key, _up(create, -off), _up(mod, -off), version, value, lease)


@pytest.fixture(scope="module")
def systems(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Etcd, StoreCluster]]:
    base = Path(tmp_path_factory.mktemp("differential"))
    (base / "etcd").mkdir()
    with running_etcd(base / "etcd") as etcd, running_cluster(base / "raftkube") as cluster:
        yield etcd, cluster


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_cluster_gives_the_same_answers_as_etcd(systems: tuple[Etcd, StoreCluster], data: st.DataObject) -> None:
    """Random sequences of puts, deletes, ranges, txns, compactions and lease grants/revokes:
    a 3-member raftkube cluster and etcd 3.4 answer identically (values, revisions, errors)."""
    etcd, cluster = systems
    loop = asyncio.new_event_loop()
    client = cluster.client()
    try:
        subject = ClusterSubject(loop, client)
        pair = Pair(etcd, subject=subject)
        drawer = Drawer(data, pair)
        for _ in range(data.draw(st.integers(1, 25))):
            drawer.step()
        pair.check_history()
        compare_watch(pair, subject)
    finally:
        loop.run_until_complete(client.close())
        loop.close()
