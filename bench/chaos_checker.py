"""How long the chaos history checker takes on a large synthetic history.

Generates a linearizable history of N operations (default 100k) by 8 sequential clients
over 10 keys: each op takes effect at its own instant inside an overlapping [call, ret]
interval, as in a real run, with a few unknown outcomes.  Prints the time of the replay,
of the revision-based checks (realtime, lost-write, ...) and of the WGL search.

    python -m bench.chaos_checker [--ops N] [--wgl-budget S]
"""

from __future__ import annotations

import argparse
import math
import random
import time

import msgpack

from store.api.kv import DeleteRangeRequest, PutRequest, RangeRequest
from store.chaos.check.acked import check_acked_writes
from store.chaos.check.monotonic import check_monotonic
from store.chaos.check.reads import check_serializable_reads
from store.chaos.check.realtime import check_realtime
from store.chaos.check.replay import Replay
from store.chaos.check.unique_values import check_unique_values
from store.chaos.check.wgl import check_wgl
from store.chaos.history import OK, UNKNOWN, AppliedEntry, History, Operation
from store.lease.lessor import Lessor
from store.mvcc.kvstore import KVStore

CLIENTS = 8
KEYS = [b"key-%d" % i for i in range(10)]
DT = 0.001


def generate(n: int, seed: int = 1) -> History:
    rng = random.Random(seed)
    kv = KVStore(Lessor())
    h = History()
    index = 1
    for i in range(n):
        client = i % CLIENTS
        at = i * DT
        call, ret = at - rng.uniform(0, 3 * DT), at + rng.uniform(0, 3 * DT)
        key = rng.choice(KEYS)
        roll = rng.random()
        if roll < 0.5:
            resp = kv.range(RangeRequest(key))
            h.operations.append(
                Operation(client, i, "range", RangeRequest(key), call, ret, OK, resp, "", 1, resp.revision)
            )
            continue
        req = PutRequest(key, b"v%d" % i) if roll < 0.95 else DeleteRangeRequest(key)
        result = kv.put(req)[0] if isinstance(req, PutRequest) else kv.delete_range(req)[0]
        index += 1
        data = msgpack.packb([1, i, req.kind, req.to_wire()], use_bin_type=True)
        h.applied.entries[index] = AppliedEntry(index, 1, 0, data, kv.current_revision, at, [1, 2, 3])
        if rng.random() < 0.001:
            h.operations.append(Operation(client, i, req.kind, req, call, math.inf, UNKNOWN, None, "Timeout"))
        else:
            h.operations.append(Operation(client, i, req.kind, req, call, ret, OK, result, "", 1, result.revision))
    return h


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--wgl-budget", type=float, default=60.0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    h = generate(args.ops)
    t1 = time.perf_counter()
    replay = Replay(h.applied)
    t2 = time.perf_counter()
    ops = h.operations
    found = check_acked_writes(ops, replay) + check_unique_values(ops, replay) + check_realtime(ops, replay)
    found += check_serializable_reads(ops, replay) + check_monotonic(ops)
    t3 = time.perf_counter()
    wgl = check_wgl(ops, replay, args.wgl_budget)
    t4 = time.perf_counter()
    print(f"history: {len(ops)} ops, {len(h.applied.entries)} applied entries (generated in {t1 - t0:.2f} s)")
    print(f"replay:                       {t2 - t1:6.2f} s")
    print(f"revision checks (realtime...): {t3 - t2:6.2f} s  -> {len(found)} violations")
    print(f"replay + revision checks:     {t3 - t1:6.2f} s  ({(t3 - t1) * 100_000 / len(ops):.2f} s per 100k ops)")
    print(f"wgl search:                   {t4 - t3:6.2f} s  -> {[v.check for v in wgl][:5]}")


if __name__ == "__main__":
    main()
