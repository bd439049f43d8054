"""lost-write: every acknowledged write is in the applied history, at the revision it reported.

An "ok" put, delete or txn that changed the store owns its response revision: the entry the
replay applied to make that revision must be this very request, and replaying it must give
the same response (prev_kv, deleted count, txn branch and sub-responses).  A write that
changed nothing (delete of a missing key, txn whose branch only read) must match the replay's
state at the revision it reported.
"""

from __future__ import annotations

from store.api.kv import (
    DeleteRangeRequest,
    DeleteRangeResponse,
    PutRequest,
    RangeRequest,
    TxnRequest,
    TxnResponse,
)
from store.chaos.check.common import describe, put_values, short
from store.chaos.check.replay import Replay
from store.chaos.check.txn_eval import evaluate_read_only, txn_wrote
from store.chaos.history import OK, Operation, Violation

CHECK = "lost-write"


def check_acked_writes(ops: list[Operation], replay: Replay) -> list[Violation]:
    out: list[Violation] = []
    for op in ops:
        if op.outcome == OK and op.is_write and op.response is not None:
            problem = _problem(op, replay)
            if problem:
                out.append(Violation(CHECK, f"{describe(op)}: {problem}", [op], op.ret))
    return out


def changed_store(op: Operation) -> bool:
    """Whether an ok write took a revision of its own, judging by its response."""
    req, resp = op.request, op.response
    if isinstance(req, PutRequest):
        return True
    if isinstance(resp, DeleteRangeResponse):
        return resp.deleted > 0
    if isinstance(req, TxnRequest) and isinstance(resp, TxnResponse):
        return txn_wrote(req, resp)
    return False


def _problem(op: Operation, replay: Replay) -> str:
    rev = op.response.revision
    if not changed_store(op):
        return _unchanged_problem(op, replay, rev)
    entry = replay.by_revision.get(rev)
    if entry is None or entry.kind != op.kind or entry.request != op.request:
        return f"acknowledged at revision {rev}, but {_where(op, replay, rev)}"
    if entry.result != op.response:
        return (
            f"applied at revision {rev} (index {entry.index}), but the response differs from the replay's: "
            f"got {op.response!r}, replay gives {entry.result!r}"
        )
    return ""


def _where(op: Operation, replay: Replay, rev: int) -> str:
    entry = replay.by_revision.get(rev)
    there = (
        f"revision {rev} was never made (last revision {replay.final_revision})"
        if entry is None
        else f"revision {rev} was made by index {entry.index} ({entry.kind}, origin m{entry.origin})"
    )
    placed = [f"{short(v)} at {replay.revisions_of(v)}" for v in put_values(op.request) if replay.revisions_of(v)]
    return there + ("; its values were applied: " + ", ".join(placed) if placed else "; its values were never applied")


def _unchanged_problem(op: Operation, replay: Replay, rev: int) -> str:
    req, resp = op.request, op.response
    if rev > replay.final_revision:
        return f"reports revision {rev}, beyond the last applied revision {replay.final_revision}"
    if isinstance(req, DeleteRangeRequest):
        found = replay.range(RangeRequest(req.key, req.range_end, count_only=True), rev)
        if found is not None and found.count:
            return f"deleted nothing at revision {rev}, but the replay holds {found.count} keys in its range there"
        return ""
    if isinstance(req, TxnRequest):
        expected = evaluate_read_only(replay, req, rev)
        if expected is None:
            return f"wrote nothing at revision {rev}, but at that revision its txn would have written"
        if expected != resp:
            return f"read-only txn answer differs from the replay at revision {rev}: got {resp!r}, want {expected!r}"
    return ""
