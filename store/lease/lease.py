"""One lease: the replicated part (id, granted TTL, attached keys) and the leader-local expiry."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

FOREVER = math.inf
"""Expiry of every lease on a member that is not primary: only the leader's clock counts."""


@dataclass(slots=True, eq=False)
class Lease:
    id: int
    ttl: int
    """Granted TTL in seconds, after the lessor's minimum was applied (replicated)."""
    keys: set[bytes] = field(default_factory=set)
    """Keys attached to the lease: rebuilt from the KV store's live keys on restore."""
    expiry: float = FOREVER
    """Leader-local: when the lease runs out on the primary's clock (never replicated)."""
    check_at: float = FOREVER
    """Leader-local: the time of this lease's live entry in the lessor's expiry heap."""

    def remaining(self, now: float) -> float:
        return self.expiry - now
