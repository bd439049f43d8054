"""Leases end to end through the pure layers: expiry on the primary, revoke through the store,
the deletes seen by a watcher as one revision, and the lease table in the store's snapshot."""

from __future__ import annotations

from store.api.kv import PutRequest, RangeRequest
from store.api.watch import WatchCreateRequest
from store.lease import Lessor
from store.mvcc import KVStore
from store.watch import WatchHub


def test_expired_lease_keys_are_deleted_in_one_revision_and_watched_atomically() -> None:
    lessor = Lessor()
    lessor.promote(0.0)
    kv = KVStore(lessor)
    kv.lessor.grant(7, 10, 0.0)
    for k in (b"/pods/b", b"/pods/a", b"/pods/c"):
        kv.put(PutRequest(k, b"x", lease=7))
    kv.put(PutRequest(b"/pods/d", b"no lease"))
    hub = WatchHub(kv)  # starts at the store's revision (these puts were not watched)
    wid = hub.create(WatchCreateRequest(b"/pods/", b"/pods0"))
    assert kv.lessor.expired(9.0) == []
    (expired,) = kv.lessor.expired(10.0)  # the leader would now propose a revoke
    revision, events = kv.revoke_lease_keys(expired)  # ... which every member applies
    hub.notify(revision, events)
    out = [r for r in hub.drain() if r.watch_id == wid and r.events]
    assert len(out) == 1
    assert [(e.kv.key, e.kv.mod_revision) for e in out[0].events] == [
        (b"/pods/a", 6),
        (b"/pods/b", 6),
        (b"/pods/c", 6),
    ]
    assert [kv_.key for kv_ in kv.range(RangeRequest(b"/pods/", b"/pods0")).kvs] == [b"/pods/d"]
    assert kv.lessor.leases() == []


def test_one_snapshot_restores_leases_and_their_keys() -> None:
    kv = KVStore()
    kv.lessor.grant(1, 30, 0.0)
    kv.lessor.grant(2, 60, 0.0)
    kv.put(PutRequest(b"a", lease=1))
    kv.put(PutRequest(b"b", lease=2))
    kv.put(PutRequest(b"b", lease=1))
    follower = Lessor()
    restored = KVStore.restore(kv.snapshot(), lessor=follower)
    assert restored.lessor is follower
    assert follower.entries() == [(1, 30), (2, 60)]
    assert restored.keys_of_lease(1) == [b"a", b"b"]
    assert restored.keys_of_lease(2) == []
    # the restored table works: revoking lease 1 deletes both keys in one revision
    rev, events = restored.revoke_lease_keys(1)
    assert rev == 5 and len(events) == 2
