"""The lessor: grant, revoke, renew, time-to-live, expiry, and leadership changes.

Replicated state (changed only from the apply loop, identical on every member): the lease
ids, their granted TTLs and the keys attached to them.  Leader-local state: each lease's
expiry, kept only while this member is primary.  A follower's leases never expire; when a
member becomes leader, `promote(now)` restarts every lease's full TTL from `now`, so a
leader change renews TTLs instead of expiring leases whose keepalives went to the old
leader (etcd does the same).

Minimum TTL: etcd clamps a granted TTL up to `ceil(1.5 x election timeout)`
(`(3 * electionTicks / 2) * heartbeat`), so that a lease cannot expire during the election
that follows a leader failure; `min_lease_ttl` computes the same from the Raft settings.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable

from store.api.errors import (
    InvalidArgumentError,
    LeaseExistsError,
    LeaseNotFoundError,
    LeaseTTLTooLargeError,
    NotLeaderError,
)
from store.api.lease import MAX_LEASE_TTL, LeaseTimeToLiveResponse
from store.lease.lease import FOREVER, Lease

DEFAULT_MIN_TTL = 2
"""min_lease_ttl(10 election ticks, 100 ms ticks) = ceil(1.5 s): the default Raft settings."""

EXPIRED_RETRY_INTERVAL = 3.0
"""An expired lease is reported again after this many seconds if its revoke has not been applied
(the revoke proposal may have been lost with a leader change); etcd uses 3 s as well."""

_ID_MASK = (1 << 63) - 1
_INT64_MIN = -(1 << 63)


def min_lease_ttl(election_ticks: int, tick_ms: int) -> int:
    """etcd's minimum lease TTL for the given Raft timing: ceil((3 * election_ticks // 2) ticks)."""
    return max(1, math.ceil((3 * election_ticks // 2) * tick_ms / 1000))


class Lessor:
    """Leases by id.  Not thread-safe, no clock: every time is an argument."""

    __slots__ = ("_heap", "_leases", "_primary", "min_ttl")

    def __init__(self, min_ttl: int = DEFAULT_MIN_TTL) -> None:
        self.min_ttl = min_ttl
        self._leases: dict[int, Lease] = {}
        self._primary = False
        # (check_at, id) for every lease while primary; entries whose time no longer matches the
        # lease's `check_at` are stale (the lease was renewed or revoked) and skipped on pop.
        self._heap: list[tuple[float, int]] = []

    # -- queries -----------------------------------------------------------------------
    @property
    def is_primary(self) -> bool:
        return self._primary

    def __contains__(self, lease_id: object) -> bool:
        return lease_id in self._leases

    def __len__(self) -> int:
        return len(self._leases)

    def exists(self, lease_id: int) -> bool:
        return lease_id in self._leases

    def lookup(self, lease_id: int) -> Lease | None:
        return self._leases.get(lease_id)

    def leases(self) -> list[int]:
        """Every lease id, ascending."""
        return sorted(self._leases)

    def keys_of(self, lease_id: int) -> list[bytes]:
        """Keys attached to the lease, sorted (empty if the lease does not exist)."""
        lease = self._leases.get(lease_id)
        return sorted(lease.keys) if lease is not None else []

    # -- replicated changes (apply loop) -----------------------------------------------
    def grant(self, lease_id: int, ttl: int, now: float, *, pick: int = 0) -> Lease:
        """Create a lease.  `lease_id` 0 asks the lessor to choose: it starts from `pick` (a value
        the leader put in the proposal, so every member picks the same id) and takes the next
        free positive id.  TTLs below `min_ttl` are raised to it."""
        self.check_grant(lease_id, ttl)
        if lease_id == 0:
            lease_id = self._pick(pick)
        lease = Lease(lease_id, max(ttl, self.min_ttl))
        self._leases[lease_id] = lease
        if self._primary:
            self._schedule(lease, now + lease.ttl)
        return lease

    def check_grant(self, lease_id: int, ttl: int) -> None:
        """The checks `grant` makes, without granting: lets a server refuse before proposing."""
        if ttl > MAX_LEASE_TTL:
            raise LeaseTTLTooLargeError("etcdserver: too large lease TTL")
        if not _INT64_MIN <= lease_id <= _ID_MASK:
            raise InvalidArgumentError(f"lease id {lease_id} does not fit in an int64")
        if lease_id != 0 and lease_id in self._leases:
            raise LeaseExistsError("etcdserver: lease already exists")

    def revoke(self, lease_id: int) -> list[bytes]:
        """Remove the lease; returns its keys, sorted, for the caller to delete in one revision."""
        lease = self._leases.pop(lease_id, None)
        if lease is None:
            raise LeaseNotFoundError(lease_id)
        lease.check_at = FOREVER  # its heap entry is now stale
        keys = sorted(lease.keys)
        lease.keys.clear()
        return keys

    def attach(self, lease_id: int, key: bytes) -> None:
        lease = self._leases.get(lease_id)
        if lease is not None:
            lease.keys.add(key)

    def detach(self, lease_id: int, key: bytes) -> None:
        """Tolerates a missing lease: a revoke detaches every key before the deletes run."""
        lease = self._leases.get(lease_id)
        if lease is not None:
            lease.keys.discard(key)

    def entries(self) -> list[tuple[int, int]]:
        """The replicated lease table as (id, ttl), ascending by id: what a snapshot stores."""
        return [(i, self._leases[i].ttl) for i in sorted(self._leases)]

    def load(self, entries: Iterable[tuple[int, int]], now: float = 0.0) -> None:
        """Replace the table with a snapshot's (id, ttl) pairs; attachments start empty (the KV
        store re-attaches its live keys).  A primary lessor starts every TTL afresh at `now`."""
        self._leases = {i: Lease(i, ttl) for i, ttl in entries}
        self._heap = []
        if self._primary:
            for lease in self._leases.values():
                self._schedule(lease, now + lease.ttl)

    # -- leader-local ------------------------------------------------------------------
    def renew(self, lease_id: int, now: float) -> int:
        """Keepalive: restart the lease's TTL from `now`; returns the TTL.

        A lease that already expired is reported as not found: its revoke is on the way
        (etcd blocks until that revoke is applied, which a pure state machine cannot)."""
        if not self._primary:
            raise NotLeaderError("lessor is not primary: renew on the leader")
        lease = self._leases.get(lease_id)
        if lease is None or lease.expiry <= now:
            raise LeaseNotFoundError(lease_id)
        self._schedule(lease, now + lease.ttl)
        return lease.ttl

    def time_to_live(
        self, lease_id: int, now: float, *, keys: bool = False, revision: int = 0
    ) -> LeaseTimeToLiveResponse:
        """Seconds left (truncated, never below 0), the granted TTL and optionally the keys.

        A missing lease answers ttl -1.  A lessor that is not primary does not know expiries
        and answers the granted TTL: ask the leader for the real remaining time."""
        lease = self._leases.get(lease_id)
        if lease is None:
            return LeaseTimeToLiveResponse(revision, lease_id, -1, 0)
        left = lease.ttl if not self._primary else max(0, int(lease.remaining(now)))
        return LeaseTimeToLiveResponse(revision, lease_id, left, lease.ttl, sorted(lease.keys) if keys else [])

    def expired(self, now: float, limit: int | None = None) -> list[int]:
        """Leases whose TTL ran out by `now`, soonest first, at most `limit`: the leader proposes a
        revoke for each.  A reported lease is reported again after EXPIRED_RETRY_INTERVAL if it
        still exists (its revoke was lost)."""
        out: list[int] = []
        heap = self._heap
        if not self._primary:
            return out
        while heap and heap[0][0] <= now and (limit is None or len(out) < limit):
            at, lease_id = heapq.heappop(heap)
            lease = self._leases.get(lease_id)
            if lease is None or lease.check_at != at:
                continue  # stale: renewed or revoked since this entry was pushed
            out.append(lease_id)
            lease.check_at = now + EXPIRED_RETRY_INTERVAL
            heapq.heappush(heap, (lease.check_at, lease_id))
        return out

    def promote(self, now: float, extend: float = 0.0) -> None:
        """Become primary: every lease gets its full TTL again, counted from `now + extend`."""
        self._primary = True
        self._heap = []
        for lease in self._leases.values():
            lease.expiry = lease.check_at = now + extend + lease.ttl
            self._heap.append((lease.check_at, lease.id))
        heapq.heapify(self._heap)

    def demote(self) -> None:
        """Stop tracking expiry: a follower's leases never expire."""
        self._primary = False
        self._heap = []
        for lease in self._leases.values():
            lease.expiry = lease.check_at = FOREVER

    # -- internals ---------------------------------------------------------------------
    def _schedule(self, lease: Lease, expiry: float) -> None:
        lease.expiry = lease.check_at = expiry
        heapq.heappush(self._heap, (expiry, lease.id))
        if len(self._heap) > 2 * len(self._leases) + 64:  # drop stale entries now and then
            self._heap = [(le.check_at, le.id) for le in self._leases.values() if le.check_at != FOREVER]
            heapq.heapify(self._heap)

    def _pick(self, start: int) -> int:
        lease_id = start & _ID_MASK or 1
        while lease_id in self._leases:
            lease_id = (lease_id + 1) & _ID_MASK or 1
        return lease_id
