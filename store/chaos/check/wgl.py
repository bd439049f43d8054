"""wgl: a Wing-Gong/Lowe search for a linearization of each key's register history.

This cross-checks the revision-based checks with a method that trusts no revision: the
order must be found from call and return times and the values observed alone.  It is the
classic depth-first search over "minimal" ops (those called before every unlinearized op
returned), pruned by a cache of (linearized set as a bitmask, register state).

A key's history is cut into windows at quiescent points (no answered op in flight).  Each
window is searched exhaustively from every configuration the previous one could end in:
(register state, unknown-outcome ops still pending).  Unknown ops never return, so they can
be linearized in any later window or never.  The whole search shares one time budget;
exceeding it is a `checker-timeout` violation, never a pass.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from store.chaos.check.register import INITIAL, Projector, RegOp, State, step
from store.chaos.check.replay import Replay
from store.chaos.history import Operation, Violation

CHECK = "wgl"
TIMEOUT = "checker-timeout"
Config = tuple[State, frozenset[int]]


class BudgetExceeded(Exception):
    """The search used its time budget."""


@dataclass(slots=True)
class Budget:
    deadline: float
    nodes: int = 0

    def tick(self) -> None:
        self.nodes += 1
        if self.nodes & 1023 == 0 and time.monotonic() > self.deadline:
            raise BudgetExceeded


def check_wgl(ops: list[Operation], replay: Replay, budget_s: float = 30.0) -> list[Violation]:
    budget = Budget(time.monotonic() + budget_s)
    out: list[Violation] = []
    histories = Projector(ops, replay).by_key()
    for key, reg_ops in histories.items():
        try:
            problem = check_register(reg_ops, budget)
        except BudgetExceeded:
            out.append(
                Violation(
                    TIMEOUT,
                    f"the linearizability search used its {budget_s:.1f} s budget on key {key!r} "
                    f"({len(reg_ops)} ops, {budget.nodes} states explored); keys after it were not checked",
                )
            )
            break
        if problem is not None:
            msg, window = problem  # the failing window, after the one before it for context
            out.append(
                Violation(
                    CHECK,
                    f"key {key!r}: {msg}:\n  " + "\n  ".join(r.label for r in window[:30]),
                    [r.source for r in window if r.source is not None],
                    window[0].call if window else 0.0,
                )
            )
    return out


def windows(ops: list[RegOp]) -> list[list[RegOp]]:
    """Cut `ops` (sorted by call) where no answered op is in flight."""
    out: list[list[RegOp]] = []
    cur: list[RegOp] = []
    horizon = -math.inf
    for r in ops:
        if cur and r.call > horizon and any(not math.isinf(x.ret) for x in cur):
            out.append(cur)
            cur = []
        cur.append(r)
        if not math.isinf(r.ret):
            horizon = max(horizon, r.ret)
    if cur:
        out.append(cur)
    return out


def check_register(ops: list[RegOp], budget: Budget) -> tuple[str, list[RegOp]] | None:
    """None if the register history is linearizable, else (why, the window that failed)."""
    configs: set[Config] = {(INITIAL, frozenset())}
    pending: dict[int, RegOp] = {}
    last_lease_use = _last_lease_use(ops)
    before: list[RegOp] = []
    for n, window in enumerate(windows(ops)):
        carried = set(pending)
        for r in window:
            pending[id(r)] = r
        ends = _search(configs, carried, pending, budget)
        if not ends:
            end = max((r.ret for r in window if not math.isinf(r.ret)), default=math.inf)
            why = f"no linearization of window {n} ({window[0].call:.3f}..{end:.3f}, {len(window)} ops)"
            context = before[-10:]
            if context:
                why += f", after the {len(context)} ops before it"
            return why, context + window
        still = set().union(*(p for _, p in ends))
        pending = {k: r for k, r in pending.items() if k in still}
        horizon = window[-1].call
        before = window
        configs = {(s, frozenset(p for p in ps if _relevant(pending[p], s, horizon, last_lease_use))) for s, ps in ends}
    return None


def _search(configs: set[Config], carried: set[int], ops_by_id: dict[int, RegOp], budget: Budget) -> set[Config]:
    """Every (state, unknown ops left) reachable once all answered ops are linearized.
    `carried`: unknown ops from earlier windows; a config's set says which are still pending."""
    ids = sorted(ops_by_id, key=lambda k: ops_by_id[k].call)
    ops = [ops_by_id[k] for k in ids]
    bit = {k: 1 << i for i, k in enumerate(ids)}
    finite = [(r.ret, 1 << i) for i, r in enumerate(ops) if not math.isinf(r.ret)]
    finite.sort()
    all_finite = sum(b for _, b in finite)
    calls = [r.call for r in ops]
    ends: set[Config] = set()
    seen: set[tuple[int, State]] = set()
    stack: list[tuple[int, State]] = []
    for state, left in configs:
        stack.append((sum(bit[k] for k in carried if k not in left), state))
    while stack:
        mask, state = stack.pop()
        if (mask, state) in seen:
            continue
        seen.add((mask, state))
        budget.tick()
        if mask & all_finite == all_finite:
            ends.add((state, frozenset(k for k in ids if not mask & bit[k])))
            continue
        min_ret = next(ret for ret, b in finite if not mask & b)
        for i, r in enumerate(ops):
            if calls[i] > min_ret:
                break
            b = 1 << i
            if mask & b:
                continue
            for s in step(r, state):
                if (mask | b, s) not in seen:
                    stack.append((mask | b, s))
    return ends


def _last_lease_use(ops: list[RegOp]) -> dict[int, float]:
    out: dict[int, float] = {}
    for r in ops:
        for alt in r.alternatives:
            for a in alt:
                if a[0] == "set" and a[2]:
                    out[a[2]] = max(out.get(a[2], -math.inf), r.call)
    return out


def _relevant(r: RegOp, state: State, horizon: float, last_lease_use: dict[int, float]) -> bool:
    """A pending revoke of a lease the key no longer has, and never will again, can be forgotten."""
    for alt in r.alternatives:
        for a in alt:
            if a[0] != "revoke" or a[1] == state[1] or last_lease_use.get(a[1], -math.inf) > horizon:
                return True
    return False
