"""Every put carries a unique value, so the replay says exactly which requests were applied.

* failed-write-applied: a request refused with an error ("fail") must never be applied;
* duplicate-apply: a value written at two revisions means one request was applied twice
  (a retried proposal, a replayed log); an unknown-outcome request may apply at most once;
* phantom-write: a value no client ever sent was applied (corruption, or a bug that invents
  writes).
"""

from __future__ import annotations

from store.chaos.check.common import describe, put_values, short
from store.chaos.check.replay import Replay
from store.chaos.history import FAIL, Operation, Violation


def check_unique_values(ops: list[Operation], replay: Replay) -> list[Violation]:
    issued: dict[bytes, Operation] = {}
    for op in ops:
        for v in put_values(op.request):
            issued.setdefault(v, op)
    out: list[Violation] = []
    for op in ops:
        if op.outcome != FAIL:
            continue
        for v in put_values(op.request):
            if where := replay.revisions_of(v):
                out.append(
                    Violation(
                        "failed-write-applied",
                        f"{describe(op)} was refused, yet its value {short(v)} was applied at (revision, key) {where}",
                        [op],
                        op.ret,
                    )
                )
    for v, where in replay.value_at.items():
        source = issued.get(v)
        if source is None:
            out.append(
                Violation("phantom-write", f"value {short(v)} applied at (revision, key) {where} was never sent")
            )
        elif len(where) > 1:
            out.append(
                Violation(
                    "duplicate-apply",
                    f"{describe(source)}: its value {short(v)} was applied {len(where)} times, at (revision, key) "
                    f"{where}",
                    [source],
                    source.call,
                )
            )
    return out
