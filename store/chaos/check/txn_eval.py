"""What a txn answered or did, read from its request and response, and a read-only txn re-evaluated.

A txn that wrote nothing takes no revision of its own, so the replay cannot point at it:
instead its compares and reads are evaluated against the replay's state at the revision
it reported, which is what the store must have seen.
"""

from __future__ import annotations

from dataclasses import replace

from store.api.kv import (
    DeleteRangeRequest,
    DeleteRangeResponse,
    KeyValue,
    PutRequest,
    RangeRequest,
    RequestOp,
    ResponseOp,
    TxnRequest,
    TxnResponse,
)
from store.chaos.check.replay import Replay
from store.mvcc.compare import compare_all


def txn_wrote(req: TxnRequest, resp: TxnResponse) -> bool:
    """Whether the executed branch changed the store (so the txn took a revision)."""
    branch = req.success if resp.succeeded else req.failure
    for op, r in zip(branch, resp.responses, strict=False):
        if isinstance(op, PutRequest):
            return True
        if isinstance(r, DeleteRangeResponse) and r.deleted > 0:
            return True
        if isinstance(op, TxnRequest) and isinstance(r, TxnResponse) and txn_wrote(op, r):
            return True
    return False


def evaluate_read_only(replay: Replay, req: TxnRequest, revision: int, outer: bool = True) -> TxnResponse | None:
    """The response a txn that wrote nothing must have given at `revision`; None when, at that
    revision, it would have written (a put on its branch, or a delete that finds keys)."""
    if revision > replay.final_revision:
        return None
    ok = all(compare_all(c, _kvs(replay, c.key, c.range_end, revision)) for c in req.compare)
    responses: list[ResponseOp] = []
    for op in req.success if ok else req.failure:
        r = _evaluate_op(replay, op, revision)
        if r is None:
            return None
        responses.append(r)
    return TxnResponse(revision if outer else 0, ok, responses)


def _evaluate_op(replay: Replay, op: RequestOp, revision: int) -> ResponseOp | None:
    if isinstance(op, RangeRequest):
        resp = replay.range(op, op.revision or revision)
        return None if resp is None else replace(resp, revision=revision)
    if isinstance(op, DeleteRangeRequest):
        if _kvs(replay, op.key, op.range_end, revision):
            return None
        return DeleteRangeResponse(revision, 0, [])
    if isinstance(op, TxnRequest):
        return evaluate_read_only(replay, op, revision, outer=False)
    return None


def _kvs(replay: Replay, key: bytes, range_end: bytes, revision: int) -> list[KeyValue]:
    resp = replay.range(RangeRequest(key, range_end), revision)
    return list(resp.kvs) if resp is not None else []
