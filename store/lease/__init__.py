"""The lessor: leases (id, granted TTL, attached keys) and their expiry, as a pure state machine.

Time is passed in by the caller (seconds on the leader's monotonic clock), so the same code
runs in the replicated apply loop.  Only the leader's lessor is primary: it tracks expiry
and reports expired leases, which the leader then revokes through Raft like any write.
"""

from store.lease.lease import FOREVER, Lease
from store.lease.lessor import DEFAULT_MIN_TTL, EXPIRED_RETRY_INTERVAL, Lessor, min_lease_ttl

__all__ = ["DEFAULT_MIN_TTL", "EXPIRED_RETRY_INTERVAL", "FOREVER", "Lease", "Lessor", "min_lease_ttl"]
