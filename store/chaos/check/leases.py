"""Lease timing and revocation, from the applied revokes and the clients' keepalives.

* lease-early-expiry: a lease revoked because it expired (a leader proposal, origin seq 0)
  must have lived its TTL since it was granted or since the client *sent* its last
  successful keepalive: a key must never vanish before the client's lease could run out.
* lease-late-expiry: a lease nobody revoked must expire within TTL + failover time: two
  election timeouts, one second, and the duration of faults overlapping that interval.
  Checked only when that deadline falls inside the recorded history.
* lease-revoke: a revoke deletes every key attached to the lease, in one revision.
"""

from __future__ import annotations

import math

from store.api.kv import RangeRequest
from store.chaos.check.common import describe
from store.chaos.check.replay import LeaseRevoke, Replay
from store.chaos.history import OK, History, Operation, Violation

ALL = RangeRequest(b"\0", b"\0")


def check_leases(history: History, replay: Replay) -> list[Violation]:
    keepalives = _keepalives(history.operations)
    ttls = _granted_ttls(history.operations, replay)
    out = _early(replay, keepalives, ttls) + _late(history, replay, keepalives, ttls)
    for rv in replay.lease_revokes:
        out.extend(_revoke_atomic(replay, rv))
    return out


def _keepalives(ops: list[Operation]) -> dict[int, list[Operation]]:
    """Successful renewals by lease id (a TTL of 0 in the answer means the lease was gone)."""
    out: dict[int, list[Operation]] = {}
    for op in ops:
        if op.kind == "lease_keepalive" and op.outcome == OK and getattr(op.response, "ttl", 1) > 0:
            out.setdefault(int(op.request["id"]), []).append(op)
    return out


def _granted_ttls(ops: list[Operation], replay: Replay) -> dict[int, int]:
    ttls = {lease: int(entry.request[1]) for lease, entry in replay.lease_grants.items()}
    for op in ops:
        if op.kind == "lease_grant" and op.outcome == OK and op.response is not None:
            lease = int(getattr(op.response, "id", op.request["id"]))
            ttls[lease] = max(ttls.get(lease, 0), int(getattr(op.response, "ttl", 0)))
    return ttls


def _early(replay: Replay, keepalives: dict[int, list[Operation]], ttls: dict[int, int]) -> list[Violation]:
    out = []
    for rv in replay.lease_revokes:
        grant = replay.lease_grants.get(rv.lease)
        if not rv.expired or grant is None:
            continue
        t = rv.entry.at
        renewals = [op for op in keepalives.get(rv.lease, []) if op.ret < t]
        last = max(renewals, key=lambda op: op.call, default=None)
        start = max(grant.at, last.call if last is not None else -math.inf)
        ttl = ttls.get(rv.lease, 0)
        if t < start + ttl:
            since = f"keepalive {describe(last)} sent at {last.call:.3f}" if last else f"its grant at {grant.at:.3f}"
            out.append(
                Violation(
                    "lease-early-expiry",
                    f"lease {rv.lease} (TTL {ttl} s) expired at {t:.3f} (index {rv.entry.index}, revision "
                    f"{rv.entry.revision}), only {t - start:.3f} s after {since}",
                    [last] if last else [],
                    t,
                )
            )
    return out


def _late(
    history: History, replay: Replay, keepalives: dict[int, list[Operation]], ttls: dict[int, int]
) -> list[Violation]:
    end = max((op.ret for op in history.operations if not math.isinf(op.ret)), default=0.0)
    by_client = {rv.lease for rv in replay.lease_revokes if not rv.expired}
    expired = {rv.lease: rv for rv in replay.lease_revokes if rv.expired}
    out = []
    for lease, grant in replay.lease_grants.items():
        if lease in by_client:
            continue
        rv = expired.get(lease)
        t = rv.entry.at if rv is not None else math.inf
        renewals = [op for op in keepalives.get(lease, []) if op.ret < t]
        base = max([grant.at] + [op.ret for op in renewals])
        deadline = base + ttls.get(lease, 0) + 2 * history.election_timeout + 1.0
        deadline += sum(e - s for s, e, _ in history.faults if s < deadline and e > base)
        if rv is None and deadline < end:
            out.append(
                Violation(
                    "lease-late-expiry",
                    f"lease {lease} (TTL {ttls.get(lease, 0)} s, last renewed or granted at {base:.3f}) should have "
                    f"expired by {deadline:.3f}, but was never revoked (history ends at {end:.3f})",
                    at=deadline,
                )
            )
        elif rv is not None and t > deadline:
            out.append(
                Violation(
                    "lease-late-expiry",
                    f"lease {lease} (TTL {ttls.get(lease, 0)} s, last renewed or granted at {base:.3f}) expired at "
                    f"{t:.3f}, after its deadline {deadline:.3f}",
                    at=t,
                )
            )
    return out


def _revoke_atomic(replay: Replay, rv: LeaseRevoke) -> list[Violation]:
    rev = rv.entry.revision
    before = replay.range(ALL, rev - 1) if rv.deleted else None
    attached = sorted(kv.key for kv in before.kvs if kv.lease == rv.lease) if before is not None else []
    after = replay.range(ALL, rev)
    left = sorted(kv.key for kv in after.kvs if kv.lease == rv.lease) if after is not None else []
    if attached == sorted(rv.deleted) and not left:
        return []
    return [
        Violation(
            "lease-revoke",
            f"revoke of lease {rv.lease} (index {rv.entry.index}, revision {rev}) deleted {rv.deleted}; "
            f"attached before: {attached}; still attached after: {left}",
            at=rv.entry.at,
        )
    ]
