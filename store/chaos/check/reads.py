"""Range answers compared with the replay: the content half of linearizable and stale reads.

`read_problem` says how a range response differs from the replay's state at a revision,
honouring every option the request carried (range_end, limit, sort, keys_only, count_only,
revision filters), because the replay serves the same request through the same MVCC code.

serializable-read: a range at an explicit revision R > 0, or a serializable one, must equal
the replay at R (or at its header revision when R is 0); "compacted" and "future revision"
refusals are allowed outcomes and have outcome "fail".
"""

from __future__ import annotations

from store.api.kv import RangeRequest, RangeResponse
from store.chaos.check.common import describe
from store.chaos.check.replay import Replay
from store.chaos.history import OK, Operation, Violation

CHECK = "serializable-read"


def read_problem(replay: Replay, req: RangeRequest, resp: RangeResponse, revision: int) -> str:
    """ "" when `resp` is what `req` returns at `revision`, else what differs."""
    expected = replay.range(req, revision)
    if expected is None:
        return f"revision {revision} was never reached (last applied revision {replay.final_revision})"
    if expected.kvs != resp.kvs or expected.count != resp.count or expected.more != resp.more:
        return (
            f"answer differs from the replay at revision {revision}: got {_summary(resp)}, "
            f"expected {_summary(expected)}"
        )
    return ""


def _summary(resp: RangeResponse) -> str:
    kvs = ", ".join(f"{kv.key!r}={kv.value!r}@{kv.mod_revision}" for kv in resp.kvs[:8])
    if len(resp.kvs) > 8:
        kvs += f", ... ({len(resp.kvs)} kvs)"
    return f"[{kvs}] count={resp.count} more={resp.more}"


def is_stale_read(op: Operation) -> bool:
    """Reads that may legitimately lag: serializable, or at an explicit past revision."""
    req = op.request
    return isinstance(req, RangeRequest) and (req.serializable or req.revision > 0)


def check_serializable_reads(ops: list[Operation], replay: Replay) -> list[Violation]:
    out: list[Violation] = []
    for op in ops:
        if op.outcome != OK or op.kind != "range" or not is_stale_read(op):
            continue
        req, resp = op.request, op.response
        if not isinstance(resp, RangeResponse):
            continue
        at = req.revision or resp.revision
        if problem := read_problem(replay, req, resp, at):
            out.append(Violation(CHECK, f"{describe(op)}: {problem}", [op], op.ret))
    return out
