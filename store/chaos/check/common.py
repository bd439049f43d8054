"""Shared helpers of the checks: describing operations and capping floods of violations.

A violation is read by a person after a chaos run, so every message names the operations
(client, sequence, kind, key, value, times, member, revision) it is about.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from store.api.kv import (
    CompactionRequest,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    RangeResponse,
    RequestOp,
    TxnRequest,
    TxnResponse,
)
from store.chaos.history import OK, Operation, Violation

MAX_PER_CHECK = 50
"""Violations kept per check name; one stale member can otherwise produce thousands."""


def short(b: bytes | None, limit: int = 40) -> str:
    """A bytes value as a short readable literal."""
    if b is None:
        return "absent"
    r = repr(b)
    return r if len(r) <= limit else r[: limit - 3] + "..."


def describe_request(req: object) -> str:
    if isinstance(req, PutRequest):
        lease = f" lease={req.lease}" if req.lease else ""
        return f"put {short(req.key)}={short(req.value)}{lease}"
    if isinstance(req, DeleteRangeRequest):
        end = f"..{short(req.range_end)}" if req.range_end else ""
        return f"delete {short(req.key)}{end}"
    if isinstance(req, RangeRequest):
        end = f"..{short(req.range_end)}" if req.range_end else ""
        extra = []
        if req.revision:
            extra.append(f"rev={req.revision}")
        if req.serializable:
            extra.append("serializable")
        if req.limit:
            extra.append(f"limit={req.limit}")
        opts = f" ({', '.join(extra)})" if extra else ""
        return f"range {short(req.key)}{end}{opts}"
    if isinstance(req, TxnRequest):
        return f"txn[{len(req.compare)} cmp; then {_ops(req.success)}; else {_ops(req.failure)}]"
    if isinstance(req, CompactionRequest):
        return f"compact {req.revision}"
    return repr(req)


def _ops(ops: list[RequestOp]) -> str:
    return ", ".join(describe_request(o) for o in ops) or "-"


def describe(op: Operation) -> str:
    """One line naming an operation: who, what, when, outcome, where, revision."""
    ret = "inf" if math.isinf(op.ret) else f"{op.ret:.3f}"
    outcome = op.outcome if op.outcome == OK else f"{op.outcome} {op.error}".rstrip()
    where = f" @m{op.member}" if op.member else ""
    rev = f" rev {op.revision}" if op.revision else ""
    return (
        f"client {op.client} #{op.seq} {describe_request(op.request)} "
        f"[{op.call:.3f}..{ret}] {outcome}{rev}{where}{_answer(op.response)}"
    )


def _answer(resp: object) -> str:
    """What a read saw, in brief: the part of an answer a person needs to follow a violation."""
    if isinstance(resp, RangeResponse):
        kvs = ", ".join(f"{short(kv.key, 20)}={short(kv.value, 20)}" for kv in resp.kvs[:4])
        more = ", ..." if len(resp.kvs) > 4 else ""
        return f" -> [{kvs}{more}] count {resp.count}"
    if isinstance(resp, TxnResponse):
        return f" -> {'succeeded' if resp.succeeded else 'failed'}"
    return ""


def cap(violations: Iterable[Violation], limit: int = MAX_PER_CHECK) -> list[Violation]:
    """At most `limit` violations per check name, plus one summary of what was left out."""
    kept: list[Violation] = []
    dropped: dict[str, int] = {}
    seen: dict[str, int] = {}
    for v in violations:
        n = seen.get(v.check, 0)
        seen[v.check] = n + 1
        if n < limit:
            kept.append(v)
        else:
            dropped[v.check] = dropped.get(v.check, 0) + 1
    for check, n in dropped.items():
        kept.append(Violation(check, f"{n} more {check} violations not shown"))
    return kept


def put_values(req: object) -> list[bytes]:
    """Every value a request may write (both branches of a txn): its unique write ids."""
    if isinstance(req, PutRequest):
        return [req.value] if req.value and not req.ignore_value else []
    if isinstance(req, TxnRequest):
        return [v for o in (*req.success, *req.failure) for v in put_values(o)]
    return []
