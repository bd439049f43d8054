"""The history checker of the chaos suite: every invariant a run must keep, as violations.

`check_history` replays the members' applied entries into a reference MVCC store
(`replay.Replay`) and runs each check against the recorded operations and watches:

    applied-agreement   members applied the same entries; no evidence gap      (agreement)
    lost-write          every ok write at its revision, with the right answer (acked)
    failed-write-applied, duplicate-apply, phantom-write                       (unique_values)
    realtime            revision order respects real time; reads not stale    (realtime)
    serializable-read   reads at a revision equal the replay there            (reads)
    revision-monotonic  per client and per member                             (monotonic)
    wgl, checker-timeout  revision-free linearizability search per key        (wgl, register)
    watch-*             ordered, unique, atomic, bookmarkable, reliable, ...  (watches)
    lease-*             early and late expiry, revoke deletes every key       (leases)
    member-hashes       members agree on the final state                      (hashes)
"""

from __future__ import annotations

from store.chaos.check.acked import check_acked_writes
from store.chaos.check.agreement import check_agreement
from store.chaos.check.common import cap
from store.chaos.check.hashes import check_hashes
from store.chaos.check.leases import check_leases
from store.chaos.check.merge import merge_apply_logs
from store.chaos.check.monotonic import check_monotonic
from store.chaos.check.reads import check_serializable_reads
from store.chaos.check.realtime import check_realtime
from store.chaos.check.replay import Replay
from store.chaos.check.unique_values import check_unique_values
from store.chaos.check.watches import check_history_agree, check_watch
from store.chaos.check.wgl import check_wgl
from store.chaos.history import History, Violation


def check_history(history: History, wgl_budget_s: float = 30.0) -> list[Violation]:
    """Every violation of every check, in check order (at most a few dozen per check)."""
    replay = Replay(history.applied)
    ops = history.operations
    found: list[Violation] = []
    found += check_agreement(history.applied, replay)
    found += check_acked_writes(ops, replay)
    found += check_unique_values(ops, replay)
    found += check_realtime(ops, replay)
    found += check_serializable_reads(ops, replay)
    found += check_monotonic(ops)
    found += check_wgl(ops, replay, wgl_budget_s)
    for w in history.watches:
        found += check_watch(w, replay)
    found += check_history_agree(history.watches)
    found += check_leases(history, replay)
    found += check_hashes(history.final_hashes)
    return cap(found)


__all__ = ["Replay", "check_history", "merge_apply_logs"]
