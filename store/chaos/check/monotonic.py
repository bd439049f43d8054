"""revision-monotonic: a client, and a member, never goes back in revisions.

Per client: clients are sequential, so each ok answer's revision is at least the previous
one's, across members and restarts (a client on every endpoint may read serializably from a
lagging member, so those reads are skipped for it).  Per member: over ok linearizable
operations it answered, one that returned before another was called has the smaller or equal
revision, across the member's restarts; this localises a realtime violation to the member
that served the old state.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

from store.chaos.check.common import describe
from store.chaos.check.realtime import ordered_ops
from store.chaos.history import KV_KINDS, OK, Operation, Violation

CHECK = "revision-monotonic"


def check_monotonic(ops: list[Operation]) -> list[Violation]:
    return _per_client(ops) + _per_member(ops)


def _per_client(ops: list[Operation]) -> list[Violation]:
    by_client: dict[int, list[Operation]] = defaultdict(list)
    for op in ops:
        if op.outcome == OK and op.kind in KV_KINDS and op.revision > 0:
            if op.serializable:
                # A serializable read is as fresh as the member that served it: it may lag
                # the leader that answered this client's last write, but never that member's
                # own earlier answers to this client (across its restarts too).
                by_client[-(op.client * 1000 + op.member)].append(op)
            else:
                by_client[op.client].append(op)
    out = []
    for client_ops in by_client.values():
        client_ops.sort(key=lambda o: o.seq)
        for a, b in pairwise(client_ops):
            if b.revision < a.revision:
                out.append(
                    Violation(
                        CHECK,
                        f"client {a.client} went back from revision {a.revision} to {b.revision}: "
                        f"{describe(a)}, then {describe(b)}",
                        [a, b],
                        b.ret,
                    )
                )
    return out


def _per_member(ops: list[Operation]) -> list[Violation]:
    by_member: dict[int, list[Operation]] = defaultdict(list)
    for op in ordered_ops(ops):
        if op.member:
            by_member[op.member].append(op)
    out = []
    for member, member_ops in sorted(by_member.items()):
        by_ret = sorted(member_ops, key=lambda o: o.ret)
        best: Operation | None = None
        i = 0
        for b in sorted(member_ops, key=lambda o: o.call):
            while i < len(by_ret) and by_ret[i].ret < b.call:
                if best is None or by_ret[i].revision > best.revision:
                    best = by_ret[i]
                i += 1
            if best is not None and b.revision < best.revision:
                out.append(
                    Violation(
                        CHECK,
                        f"member {member} went back from revision {best.revision} to {b.revision}: "
                        f"{describe(best)} returned before {describe(b)} was called",
                        [best, b],
                        b.call,
                    )
                )
    return out
