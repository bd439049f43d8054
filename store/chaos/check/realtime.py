"""realtime: revisions are a linearization order that respects real time, checked in O(n log n).

Every ok KV operation is a point at its response revision.  If A returned before B was
called, B must have been served at a revision no older than A's (and strictly newer when B
changed the store: its revision did not exist yet).  An unknown-outcome write whose value was
applied at R could not have been applied before it was sent, so nothing that returned before
its call may report a revision >= R.  And a linearizable read must hold exactly what the
replay holds at its revision: this is the check that catches stale reads.

Serializable reads and reads at an explicit revision are exempt from the ordering (they may
lag); their content is the serializable-read check's.  Lease operations carry the answering
member's revision, which is not linearized with KV writes, so they are left out too.
"""

from __future__ import annotations

from dataclasses import dataclass

from store.api.kv import RangeRequest, RangeResponse
from store.chaos.check.acked import changed_store
from store.chaos.check.common import describe, put_values
from store.chaos.check.reads import is_stale_read, read_problem
from store.chaos.check.replay import Replay
from store.chaos.history import KV_KINDS, OK, UNKNOWN, Operation, Violation

CHECK = "realtime"


@dataclass(slots=True)
class _Point:
    op: Operation
    revision: int
    strict: bool
    """The op wrote: its revision must exceed every revision returned before its call."""
    applied_unknown: bool = False


def ordered_ops(ops: list[Operation]) -> list[Operation]:
    """The ok operations whose revision takes part in the real-time order."""
    return [op for op in ops if op.outcome == OK and op.kind in KV_KINDS and op.revision > 0 and not is_stale_read(op)]


def check_realtime(ops: list[Operation], replay: Replay) -> list[Violation]:
    points = [_Point(op, op.revision, op.is_write and changed_store(op)) for op in ordered_ops(ops)]
    by_ret = sorted(points, key=lambda p: p.op.ret)
    queries = points + _applied_unknowns(ops, replay)
    queries.sort(key=lambda p: p.op.call)
    out: list[Violation] = []
    best: _Point | None = None
    i = 0
    for q in queries:
        while i < len(by_ret) and by_ret[i].op.ret < q.op.call:
            if best is None or by_ret[i].revision > best.revision:
                best = by_ret[i]
            i += 1
        if best is None:
            continue
        if q.applied_unknown:
            if best.revision >= q.revision:
                out.append(_violation(best, q, f"was applied at revision {q.revision}, yet before it was sent"))
        elif q.revision < best.revision or (q.strict and q.revision == best.revision):
            relation = "a newer" if q.strict else "at least"
            out.append(_violation(best, q, f"reports revision {q.revision}; expected {relation} revision"))
    out.extend(_read_contents(ops, replay))
    return out


def _applied_unknowns(ops: list[Operation], replay: Replay) -> list[_Point]:
    points = []
    for op in ops:
        if op.outcome == UNKNOWN and op.is_write:
            revs = [rev for v in put_values(op.request) for rev, _ in replay.revisions_of(v)]
            if revs:
                points.append(_Point(op, min(revs), True, applied_unknown=True))
    return points


def _violation(a: _Point, b: _Point, what: str) -> Violation:
    return Violation(
        CHECK,
        f"{describe(b.op)} {what}: {describe(a.op)} returned at {a.op.ret:.3f} with revision {a.revision}, "
        f"before it was called at {b.op.call:.3f}",
        [a.op, b.op],
        b.op.call,
    )


def _read_contents(ops: list[Operation], replay: Replay) -> list[Violation]:
    out = []
    for op in ops:
        req, resp = op.request, op.response
        if op.outcome != OK or not isinstance(req, RangeRequest) or not isinstance(resp, RangeResponse):
            continue
        if is_stale_read(op):
            continue
        if problem := read_problem(replay, req, resp, resp.revision):
            out.append(Violation(CHECK, f"stale or wrong read: {describe(op)}: {problem}", [op], op.ret))
    return out
