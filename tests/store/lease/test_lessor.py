"""Lessor: grant/revoke/renew/time-to-live, expiry on the primary, leadership changes."""

from __future__ import annotations

import math

import pytest

from store.api.errors import (
    InvalidArgumentError,
    LeaseExistsError,
    LeaseNotFoundError,
    LeaseTTLTooLargeError,
    NotLeaderError,
)
from store.api.lease import MAX_LEASE_TTL, LeaseTimeToLiveResponse
from store.lease import DEFAULT_MIN_TTL, EXPIRED_RETRY_INTERVAL, FOREVER, Lessor, min_lease_ttl


def primary(now: float = 0.0) -> Lessor:
    le = Lessor()
    le.promote(now)
    return le


def test_min_lease_ttl_follows_etcd() -> None:
    assert min_lease_ttl(10, 100) == 2  # ceil(1.5 s), the default
    assert min_lease_ttl(10, 10) == 1  # etcd with --heartbeat-interval=10 --election-timeout=100
    assert min_lease_ttl(20, 100) == 3
    assert min_lease_ttl(10, 100) == DEFAULT_MIN_TTL


def test_grant_applies_the_minimum_ttl() -> None:
    le = Lessor(min_ttl=5)
    assert le.grant(1, 2, 0.0).ttl == 5
    assert le.grant(2, 0, 0.0).ttl == 5
    assert le.grant(3, 60, 0.0).ttl == 60
    assert le.leases() == [1, 2, 3]


def test_refused_grants_change_nothing() -> None:
    le = Lessor()
    le.grant(1, 10, 0.0)
    before = le.entries()
    with pytest.raises(LeaseExistsError):
        le.grant(1, 10, 0.0)
    with pytest.raises(LeaseTTLTooLargeError):
        le.grant(2, MAX_LEASE_TTL + 1, 0.0)
    with pytest.raises(LeaseTTLTooLargeError):
        le.grant(1, MAX_LEASE_TTL + 1, 0.0)  # etcd checks the TTL before the id
    with pytest.raises(InvalidArgumentError):
        le.grant(1 << 63, 10, 0.0)
    assert le.entries() == before
    assert le.grant(2, MAX_LEASE_TTL, 0.0).ttl == MAX_LEASE_TTL


def test_id_zero_picks_deterministically_from_the_callers_value() -> None:
    a, b = Lessor(), Lessor()
    for le in (a, b):
        le.grant(100, 10, 0.0)
    assert a.grant(0, 10, 0.0, pick=100).id == b.grant(0, 10, 0.0, pick=100).id == 101
    assert a.grant(0, 10, 0.0, pick=0).id == 1  # never 0
    assert a.grant(0, 10, 0.0, pick=-1).id == (1 << 63) - 1  # masked to a positive int63
    assert a.grant(0, 10, 0.0, pick=(1 << 63) - 1).id == 2  # wraps around past the taken ones


def test_revoke_returns_sorted_keys_and_removes_the_lease() -> None:
    le = Lessor()
    le.grant(1, 10, 0.0)
    for k in (b"c", b"a", b"b"):
        le.attach(1, k)
    le.detach(1, b"b")
    assert le.keys_of(1) == [b"a", b"c"]
    assert le.revoke(1) == [b"a", b"c"]
    assert not le.exists(1) and 1 not in le and len(le) == 0
    with pytest.raises(LeaseNotFoundError):
        le.revoke(1)
    le.attach(1, b"x")  # tolerated: a revoke detaches before the deletes run
    le.detach(1, b"x")
    assert le.keys_of(1) == []


def test_followers_never_expire_leases_and_cannot_renew() -> None:
    le = Lessor()
    le.grant(1, 5, 0.0)
    assert le.lookup(1).expiry == FOREVER  # type: ignore[union-attr]
    assert le.expired(1e9) == []
    with pytest.raises(NotLeaderError):
        le.renew(1, 0.0)
    assert le.time_to_live(1, 100.0) == LeaseTimeToLiveResponse(0, 1, 5, 5)  # the granted TTL


def test_expiry_on_the_primary() -> None:
    le = primary(0.0)
    le.grant(1, 10, 0.0)
    le.grant(2, 5, 1.0)
    assert le.expired(5.9) == []
    assert le.expired(6.0) == [2]
    assert le.expired(6.5) == []  # reported once ...
    assert le.expired(6.0 + EXPIRED_RETRY_INTERVAL) == [2]  # ... then again while not revoked
    assert le.expired(100.0, limit=1) == [1]
    le.revoke(2)
    assert le.expired(1000.0) == [1]


def test_renew_restarts_the_ttl() -> None:
    le = primary(0.0)
    le.grant(1, 10, 0.0)
    assert le.renew(1, 8.0) == 10
    assert le.expired(17.9) == []
    assert le.expired(18.0) == [1]
    with pytest.raises(LeaseNotFoundError):
        le.renew(1, 18.0)  # expired: its revoke is on the way
    with pytest.raises(LeaseNotFoundError):
        le.renew(99, 0.0)


def test_time_to_live() -> None:
    le = primary(0.0)
    le.grant(1, 10, 0.0)
    le.attach(1, b"k")
    assert le.time_to_live(1, 2.5, keys=True, revision=7) == LeaseTimeToLiveResponse(7, 1, 7, 10, [b"k"])
    assert le.time_to_live(1, 2.5).keys == []
    assert le.time_to_live(1, 50.0).ttl == 0  # expired, not yet revoked: 0, never negative
    assert le.time_to_live(9, 0.0) == LeaseTimeToLiveResponse(0, 9, -1, 0)


def test_promote_renews_every_lease_and_demote_stops_expiry() -> None:
    le = Lessor()
    le.grant(1, 10, 0.0)
    le.grant(2, 20, 0.0)
    le.promote(100.0)
    assert le.expired(109.9) == []
    assert le.expired(110.0) == [1]
    le.demote()
    assert le.expired(1e9) == []
    assert all(le.lookup(i).expiry == FOREVER for i in (1, 2))  # type: ignore[union-attr]
    le.promote(200.0, extend=1.0)
    assert le.expired(210.9) == []
    assert le.expired(211.0) == [1]


def test_entries_and_load_round_trip() -> None:
    le = Lessor()
    le.grant(5, 30, 0.0)
    le.grant(3, 40, 0.0)
    le.attach(5, b"k")
    other = Lessor()
    other.load(le.entries())
    assert other.entries() == [(3, 40), (5, 30)]
    assert other.keys_of(5) == []  # attachments come from the KV store
    p = primary(0.0)
    p.load(le.entries(), now=10.0)
    assert p.expired(39.9) == []
    assert p.expired(40.0) == [5]


def test_many_renewals_keep_the_heap_small() -> None:
    le = primary(0.0)
    for i in range(1, 11):
        le.grant(i, 10, 0.0)
    for t in range(1, 10_000):
        le.renew(1 + t % 10, float(t) * 0.001)
    assert len(le._heap) <= 2 * len(le) + 64 + 1
    assert math.isfinite(le.lookup(1).expiry)  # type: ignore[union-attr]
