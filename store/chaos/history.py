"""What a chaos run observed, in the shape the checkers read and the report saves.

A run records three kinds of evidence:

* `Operation`: one client request, from the moment it was sent (`call`) to the moment its
  answer arrived (`ret`).  Every client is strictly sequential, so one client's operations
  never overlap.  Outcomes:
    - "ok": answered; `response` is the store.api response object (RangeResponse,
      PutResponse, DeleteRangeResponse, TxnResponse, CompactionResponse, or a lease
      response);
    - "fail": refused before it could take effect (validation, NotLeader, NoLeader,
      compacted or future revision): it must never appear in the applied history;
    - "unknown": timed out, connection lost, leader changed...: it may have been applied
      once, or never.  `ret` is `math.inf`.
* `WatchRecord`: one watch stream as the client saw it, response by response (the client
  resumes a broken stream on another member by itself; `member` tells where each
  response came from).
* `Applied`: what members really applied, read from their apply logs
  (store/server/apply_log.py) and merged by index.

Times are `time.monotonic()` seconds, which on Linux is one clock for every process on
the machine, so client times and members' apply times compare.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from store.api.kv import (
    CompactionRequest,
    DeleteRangeRequest,
    Event,
    KeyValue,
    PutRequest,
    RangeRequest,
    TxnRequest,
)

OK = "ok"
FAIL = "fail"
UNKNOWN = "unknown"

KV_KINDS = ("range", "put", "delete_range", "txn", "compact")
LEASE_KINDS = ("lease_grant", "lease_keepalive", "lease_revoke")


@dataclass(slots=True)
class Operation:
    client: int
    """Which sequential client issued it (ids are small ints, unique in the run)."""
    seq: int
    """Its position in that client's sequence."""
    kind: str
    """"range", "put", "delete_range", "txn", "compact", "lease_grant", "lease_keepalive" or "lease_revoke"."""
    request: Any
    """RangeRequest | PutRequest | DeleteRangeRequest | TxnRequest | CompactionRequest for KV kinds;
    for leases a dict: {"id": lease id, "ttl": seconds} (grant), {"id": ...} (keepalive, revoke)."""
    call: float
    ret: float = math.inf
    outcome: str = UNKNOWN
    response: Any = None
    error: str = ""
    """The StoreError code (or exception class name) when not ok."""
    member: int = 0
    """The member that answered (from the response header); 0 when none did."""
    revision: int = 0
    """The response header's revision; 0 when there was no response."""
    endpoint: str = ""
    """The endpoint the client was pinned to, or "" for a client on all endpoints."""

    @property
    def is_write(self) -> bool:
        return self.kind in ("put", "delete_range", "txn")

    @property
    def serializable(self) -> bool:
        return isinstance(self.request, RangeRequest) and self.request.serializable


@dataclass(slots=True)
class WatchResponseSeen:
    at: float
    member: int
    revision: int
    """Header revision: for a progress notification, everything up to it was delivered."""
    events: list[Event] = field(default_factory=list)
    created: bool = False
    canceled: bool = False
    compact_revision: int = 0
    progress: bool = False
    """True when this is a progress notification (no events, not created/canceled)."""


@dataclass(slots=True)
class WatchRecord:
    watcher: int
    key: bytes
    range_end: bytes
    start_revision: int
    """As requested: 0 means "from now"."""
    prev_kv: bool
    opened: float
    responses: list[WatchResponseSeen] = field(default_factory=list)
    error: str = ""
    """Why the stream ended early, if it did (other than a cancel with a compact revision)."""
    full_history_of: int = 0
    """Nonzero for the end-of-run watch pinned to this member id, from revision 1."""


@dataclass(slots=True)
class AppliedEntry:
    index: int
    term: int
    entry_type: int
    data: bytes
    revision: int
    """The store revision after applying it."""
    at: float
    """When the first member applied it (monotonic)."""
    members: list[int] = field(default_factory=list)
    """Which members' logs hold it."""


@dataclass(slots=True)
class Applied:
    """The merged apply logs: every index any member applied, with its data."""

    entries: dict[int, AppliedEntry] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)
    """Indexes where members (or one member across restarts) applied different data."""
    restores: list[tuple[int, int, int, float]] = field(default_factory=list)
    """(member, snapshot index, revision, time) for each state replaced by a snapshot."""
    revisions_by_member: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    """Each member's (time, revision after apply) sequence, across its restarts."""


@dataclass(slots=True)
class History:
    operations: list[Operation] = field(default_factory=list)
    watches: list[WatchRecord] = field(default_factory=list)
    applied: Applied = field(default_factory=Applied)
    final_hashes: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    """member -> (hash, revision it was taken at, compact revision), from the end of the run."""
    election_timeout: float = 1.0
    """Seconds; the lease check allows TTL + failover time for an expiry to happen."""
    faults: list[tuple[float, float, str]] = field(default_factory=list)
    """(start, end, description) of each fault injected, for reading a violation in context."""


@dataclass(slots=True)
class Violation:
    check: str
    """The check's name, e.g. "linearizable-read", "lost-write", "watch-reliable"."""
    message: str
    """A readable account: what was expected, what was seen, which operations."""
    operations: list[Operation] = field(default_factory=list)
    at: float = 0.0


KVRequest = RangeRequest | PutRequest | DeleteRangeRequest | TxnRequest | CompactionRequest

__all__ = [
    "FAIL",
    "KV_KINDS",
    "LEASE_KINDS",
    "OK",
    "UNKNOWN",
    "Applied",
    "AppliedEntry",
    "History",
    "KVRequest",
    "KeyValue",
    "Operation",
    "Violation",
    "WatchRecord",
    "WatchResponseSeen",
]
