"""Static request checks, run before anything changes (etcd's v3rpc checks, in etcd's order).

These need no store state: empty keys, inverted ranges, flags that contradict each other,
the per-txn operation limit, and writes in one txn that touch the same key.  Checks that
need state (leases, keys for ignore_value, revisions) live in the store.
"""

from __future__ import annotations

from store.api.errors import DuplicateKeyError, InvalidArgumentError, KeyEmptyError, TooManyOpsError
from store.api.kv import (
    Compare,
    CompareTarget,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    RequestOp,
    TxnRequest,
)
from store.mvcc.keyrange import ALL, check_range

MAX_TXN_OPS = 128
"""etcd's default --max-txn-ops."""

_EMPTY_KEY = "etcdserver: key is not provided"


def check_range_request(r: RangeRequest) -> None:
    if not r.key:
        raise KeyEmptyError(_EMPTY_KEY)
    check_range(r.key, r.range_end)


def check_put(r: PutRequest) -> None:
    if not r.key:
        raise KeyEmptyError(_EMPTY_KEY)
    if r.ignore_value and r.value:
        raise InvalidArgumentError("etcdserver: value is provided")
    if r.ignore_lease and r.lease:
        raise InvalidArgumentError("etcdserver: lease is provided")


def check_delete(r: DeleteRangeRequest) -> None:
    if not r.key:
        raise KeyEmptyError(_EMPTY_KEY)
    check_range(r.key, r.range_end)


def check_compare(c: Compare) -> None:
    if not c.key:
        raise KeyEmptyError(_EMPTY_KEY)
    check_range(c.key, c.range_end)
    if c.target is CompareTarget.VALUE:
        if not isinstance(c.value, bytes):
            raise InvalidArgumentError("raftkube: a VALUE compare needs a bytes value")
    elif not isinstance(c.value, int) or isinstance(c.value, bool):
        raise InvalidArgumentError(f"raftkube: a {c.target.name} compare needs an integer value")


def check_txn(r: TxnRequest, max_ops: int = MAX_TXN_OPS) -> None:
    """Everything etcd checks before proposing a txn, then the duplicate-write check."""
    _check_txn_ops(r, max_ops)
    _writes(r.success)
    _writes(r.failure)


def _check_txn_ops(r: TxnRequest, max_ops: int) -> None:
    # etcd counts the longest of compare/success/failure; a nested txn gets what is left.
    opc = max(len(r.compare), len(r.success), len(r.failure))
    if opc > max_ops:
        raise TooManyOpsError("etcdserver: too many operations in txn request")
    for c in r.compare:
        check_compare(c)
    for ops in (r.success, r.failure):
        for op in ops:
            _check_op(op, max_ops - opc)


def _check_op(op: RequestOp, max_ops: int) -> None:
    if isinstance(op, RangeRequest):
        check_range_request(op)
    elif isinstance(op, PutRequest):
        check_put(op)
    elif isinstance(op, DeleteRangeRequest):
        check_delete(op)
    else:
        _check_txn_ops(op, max_ops)


# -- duplicate writes -------------------------------------------------------------------
# Writes of one txn that may both execute must not touch the same key: two puts of a key, or
# a put inside a deleted range.  Two deletes may overlap (the second finds the key gone).
# The success and failure branches of a nested txn exclude each other, so they may overlap.
# etcd 3.4 misses two cases that this check refuses: a put in one nested txn and a delete of
# that key in a later sibling txn, and a delete with range_end "\0" (it treats that range as
# empty).  Refusing them keeps "a key changes at most once per revision" true.
_Interval = tuple[bytes, bytes | None, bool]  # (key, exclusive end or None for unbounded, single)


def _in(k: bytes, iv: _Interval) -> bool:
    lo, hi, single = iv
    if single:
        return k == lo
    return lo <= k and (hi is None or k < hi)


def _writes(ops: list[RequestOp]) -> tuple[set[bytes], list[_Interval]]:
    """The keys put and ranges deleted by `ops` (any branch), refusing conflicting writes."""
    puts: set[bytes] = set()
    dels: list[_Interval] = []
    for op in ops:
        if isinstance(op, PutRequest):
            k = op.key
            if k in puts or any(_in(k, iv) for iv in dels):
                raise DuplicateKeyError("etcdserver: duplicate key given in txn request")
            puts.add(k)
        elif isinstance(op, DeleteRangeRequest):
            end = op.range_end
            iv: _Interval = (op.key, None if end == ALL else end, not end)
            if any(_in(k, iv) for k in puts):
                raise DuplicateKeyError("etcdserver: duplicate key given in txn request")
            dels.append(iv)
        elif isinstance(op, TxnRequest):
            then_puts, then_dels = _writes(op.success)
            else_puts, else_dels = _writes(op.failure)
            sub_puts = then_puts | else_puts
            sub_dels = then_dels + else_dels
            if (
                not puts.isdisjoint(sub_puts)
                or any(_in(k, iv) for k in sub_puts for iv in dels)
                or any(_in(k, iv) for k in puts for iv in sub_dels)
            ):
                raise DuplicateKeyError("etcdserver: duplicate key given in txn request")
            puts |= sub_puts
            dels += sub_dels
    return puts, dels
