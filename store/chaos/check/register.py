"""Projecting a history onto one key: a register (value, lease) and the steps each op takes on it.

Linearizability of single-key operations is compositional, so each key is searched alone.
A multi-key op (a range, a txn, a lease revoke) projects onto every key it touches; that
loses cross-key atomicity, so the projected check is a necessary condition: sound (never a
false alarm), not complete.  An op becomes a list of alternative action sequences (several
when an unknown-outcome txn's branch is not known); each action asserts something about
the register or changes it:

    ("eq", v)              the value is v (None: absent)
    ("present", b)         the key exists (b) or not
    ("cmp", compare, b)    the txn compare evaluates to b
    ("notall", compares)   not every compare holds (a failed txn whose compares are all here)
    ("set", v, lease, ignore_value, ignore_lease)
    ("del",)
    ("revoke", lease)      delete the key if it is attached to that lease

Only "was it ever applied" is taken from the replay (to drop unknown-outcome writes that
never were, as etcd's checker does); no revision is ever read.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from store.api.kv import (
    Compare,
    CompareTarget,
    DeleteRangeRequest,
    DeleteRangeResponse,
    KeyValue,
    PutRequest,
    PutResponse,
    RangeRequest,
    RangeResponse,
    RequestOp,
    TxnRequest,
    TxnResponse,
)
from store.chaos.check.common import describe, put_values
from store.chaos.check.replay import Replay
from store.chaos.history import OK, UNKNOWN, Operation
from store.mvcc.compare import compare_all
from store.mvcc.keyrange import ALL

State = tuple[bytes | None, int]
"""(value or None when absent, lease id)."""
Action = tuple[Any, ...]
INITIAL: State = (None, 0)


@dataclass(slots=True)
class RegOp:
    call: float
    ret: float
    """math.inf for an unknown outcome: it may take effect at any time after its call, or never."""
    alternatives: tuple[tuple[Action, ...], ...]
    source: Operation | None
    label: str


def step(op: RegOp, state: State) -> list[State]:
    """Every state the op can leave the register in from `state` (none: it cannot happen there)."""
    out = []
    for actions in op.alternatives:
        s = _run(actions, state)
        if s is not None and s not in out:
            out.append(s)
    return out


def _run(actions: tuple[Action, ...], state: State | None) -> State | None:
    for a in actions:
        if state is None:
            return None
        value, lease = state
        kind = a[0]
        if kind == "eq":
            state = state if value == a[1] else None
        elif kind == "present":
            state = state if (value is not None) == a[1] else None
        elif kind == "cmp":
            state = state if _holds(a[1], state) == a[2] else None
        elif kind == "notall":
            state = None if all(_holds(c, state) for c in a[1]) else state
        elif kind == "set":
            _, v, new_lease, ignore_value, ignore_lease = a
            if (ignore_value or ignore_lease) and value is None:
                return None
            state = (value if ignore_value else v, lease if ignore_lease else new_lease)
        elif kind == "del":
            state = INITIAL
        elif kind == "revoke":
            state = INITIAL if lease == a[1] else state
    return state


def _holds(c: Compare, state: State) -> bool:
    value, lease = state
    # Revisions and versions are unknown to a register, but only compares against 0 are
    # evaluable (see `_evaluable`), and every existing key has them > 0.
    kvs = [] if value is None else [KeyValue(c.key, 1, 1, 1, value, lease)]
    return compare_all(c, kvs)


def _evaluable(c: Compare, key: bytes) -> bool:
    if c.key != key or c.range_end:
        return False
    return c.target in (CompareTarget.VALUE, CompareTarget.LEASE) or c.value == 0


class Projector:
    """Builds every key's register history from the operations."""

    def __init__(self, ops: list[Operation], replay: Replay) -> None:
        self.ops = [op for op in ops if op.outcome in (OK, UNKNOWN)]
        self.replay = replay
        self.keys = sorted(_keys(self.ops))
        self._applied_deletes = _count_deletes(replay, self.ops)
        self._revoked_by_client = {rv.lease for rv in replay.lease_revokes if not rv.expired}
        self._expired = {rv.lease for rv in replay.lease_revokes if rv.expired}

    def by_key(self) -> dict[bytes, list[RegOp]]:
        out: dict[bytes, list[RegOp]] = {k: [] for k in self.keys}
        grant_call: dict[int, float] = {}
        for op in self.ops:
            if op.kind == "lease_grant":
                lease = int(op.request["id"])
                grant_call[lease] = min(grant_call.get(lease, math.inf), op.call)
            for key, alts in self._project(op):
                ret = op.ret if op.outcome == OK else math.inf
                out[key].append(RegOp(op.call, ret, alts, op, describe(op)))
        # A lease may expire at any time after its grant: one pseudo op per lease that did.
        for reg_ops in out.values():
            leases = {a[2] for r in reg_ops for alt in r.alternatives for a in alt if a[0] == "set" and a[2]}
            for lease in sorted(leases & self._expired):
                call = grant_call.get(lease, -math.inf)
                reg_ops.append(RegOp(call, math.inf, ((("revoke", lease),),), None, f"expiry of lease {lease}"))
            reg_ops.sort(key=lambda r: r.call)
        return {k: v for k, v in out.items() if v}

    # ------------------------------------------------------------------ per operation
    def _project(self, op: Operation) -> Iterator[tuple[bytes, tuple[tuple[Action, ...], ...]]]:
        req, resp, ok = op.request, op.response, op.outcome == OK
        if op.kind == "lease_revoke":
            lease = int(req["id"])
            if ok or lease in self._revoked_by_client:
                for key in self.keys:
                    yield key, ((("revoke", lease),),)
            return
        if op.kind not in ("range", "put", "delete_range", "txn"):
            return
        if not ok and not self._maybe_applied(op):
            return
        if isinstance(req, TxnRequest):
            branches = self._txn_branches(req, resp if ok else None)
            for key in self._touched(req):
                alts = tuple(a for a in (self._txn_actions(req, key, b, resp if ok else None) for b in branches))
                if any(alts):
                    yield key, alts
            return
        for key in self._touched(req):
            actions = self._op_actions(req, resp if ok else None, key)
            if actions:
                yield key, (actions,)

    def _maybe_applied(self, op: Operation) -> bool:
        """An unknown-outcome write that the replay shows was never applied is dropped."""
        req = op.request
        if isinstance(req, PutRequest):
            return bool(self.replay.revisions_of(req.value)) or not req.value
        if isinstance(req, DeleteRangeRequest):
            return self._applied_deletes.get(_delete_id(req), 0) > 0
        if isinstance(req, TxnRequest):
            return bool(self._txn_branches(req, None))
        return False

    def _txn_branches(self, req: TxnRequest, resp: Any) -> list[bool]:
        """Branches the txn may have executed: known when answered, else from applied values."""
        if isinstance(resp, TxnResponse):
            return [resp.succeeded]
        out = []
        for branch in (True, False):
            values = [v for o in (req.success if branch else req.failure) for v in put_values(o)]
            if any(self.replay.revisions_of(v) for v in values):
                return [branch]
            if not values:
                out.append(branch)
        return out

    def _touched(self, req: RequestOp) -> list[bytes]:
        if isinstance(req, TxnRequest):
            keys: set[bytes] = set()
            for c in req.compare:
                keys.update(self._in_range(c.key, c.range_end))
            for o in (*req.success, *req.failure):
                keys.update(self._touched(o))
            return sorted(keys)
        return self._in_range(req.key, b"" if isinstance(req, PutRequest) else req.range_end)

    def _in_range(self, key: bytes, range_end: bytes) -> list[bytes]:
        if not range_end:
            return [key]
        lo = bisect_left(self.keys, key)
        hi = len(self.keys) if range_end == ALL else bisect_left(self.keys, range_end)
        return self.keys[lo:hi]

    def _txn_actions(self, req: TxnRequest, key: bytes, succeeded: bool, resp: Any) -> tuple[Action, ...]:
        actions: list[Action] = []
        mine = [c for c in req.compare if _evaluable(c, key)]
        if succeeded:
            actions.extend(("cmp", c, True) for c in mine)
        elif mine and len(mine) == len(req.compare):
            actions.append(("notall", tuple(mine)))
        branch = req.success if succeeded else req.failure
        responses = resp.responses if isinstance(resp, TxnResponse) else [None] * len(branch)
        for o, r in zip(branch, responses, strict=False):
            if isinstance(o, TxnRequest):
                inner = [r.succeeded] if isinstance(r, TxnResponse) else [True, False]
                # An unanswered nested txn: its writes may or may not happen; leave the key free.
                if len(inner) == 1:
                    actions.extend(self._txn_actions(o, key, inner[0], r))
                elif any(put_values(o)) or _deletes(o):
                    return ()
            elif key in self._touched(o):
                actions.extend(self._op_actions(o, r, key))
        return tuple(actions)

    def _op_actions(self, req: RequestOp, resp: Any, key: bytes) -> tuple[Action, ...]:
        if isinstance(req, PutRequest):
            pre: tuple[Action, ...] = ()
            if req.prev_kv and isinstance(resp, PutResponse):
                pre = (("eq", resp.prev_kv.value if resp.prev_kv else None),)
            return (*pre, ("set", req.value, req.lease, req.ignore_value, req.ignore_lease))
        if isinstance(req, DeleteRangeRequest):
            if isinstance(resp, DeleteRangeResponse):
                if req.prev_kv:
                    prev = next((kv.value for kv in resp.prev_kvs if kv.key == key), None)
                    return ("eq", prev), ("del",)
                if not req.range_end:
                    return ("present", resp.deleted == 1), ("del",)
            return (("del",),)
        if isinstance(req, RangeRequest) and isinstance(resp, RangeResponse):
            return _read_actions(req, resp, key)
        return ()


def _read_actions(req: RangeRequest, resp: RangeResponse, key: bytes) -> tuple[Action, ...]:
    if req.serializable or req.revision or req.min_mod_revision or req.max_mod_revision:
        return ()
    if req.min_create_revision or req.max_create_revision:
        return ()
    found = next((kv for kv in resp.kvs if kv.key == key), None)
    if req.count_only:
        return (("present", resp.count > 0),) if not req.range_end else ()
    if found is None and (resp.more or (req.limit and len(resp.kvs) >= req.limit)):
        return ()  # cut off by the limit: nothing known about this key
    if req.keys_only:
        return (("present", found is not None),)
    return (("eq", found.value if found else None),)


def _deletes(req: TxnRequest) -> bool:
    return any(isinstance(o, DeleteRangeRequest) for o in (*req.success, *req.failure))


def _delete_id(req: DeleteRangeRequest) -> tuple[bytes, bytes]:
    return (req.key, req.range_end)


def _count_deletes(replay: Replay, ops: list[Operation]) -> dict[tuple[bytes, bytes], int]:
    """Applied deletes of each (key, range_end) beyond those acknowledged: what unknown ones did."""
    counts: dict[tuple[bytes, bytes], int] = {}
    for e in replay.entries:
        if e.kind == "delete_range":
            counts[_delete_id(e.request)] = counts.get(_delete_id(e.request), 0) + 1
    for op in ops:
        if op.outcome == OK and isinstance(op.request, DeleteRangeRequest):
            k = _delete_id(op.request)
            counts[k] = counts.get(k, 0) - 1
    return counts


def _keys(ops: list[Operation]) -> set[bytes]:
    keys: set[bytes] = set()

    def add(req: Any) -> None:
        if isinstance(req, TxnRequest):
            keys.update(c.key for c in req.compare if not c.range_end)
            for o in (*req.success, *req.failure):
                add(o)
        elif isinstance(req, PutRequest) or (isinstance(req, DeleteRangeRequest | RangeRequest) and not req.range_end):
            keys.add(req.key)

    for op in ops:
        add(op.request)
        resp = op.response
        if isinstance(resp, RangeResponse):
            keys.update(kv.key for kv in resp.kvs)
        elif isinstance(resp, DeleteRangeResponse):
            keys.update(kv.key for kv in resp.prev_kvs)
        elif isinstance(resp, TxnResponse):
            for r in resp.responses:
                if isinstance(r, RangeResponse):
                    keys.update(kv.key for kv in r.kvs)
    return keys
