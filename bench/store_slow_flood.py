"""Issue 22's store attack, measured: many watch connections that never read, on one follower.

    python -m bench.store_slow_flood [--conns 101] [--watches 2000] [--writes 1500] [--value 4096]
                                     [--set watch_output_limit=67108864 ...]

Starts a real 3-member TLS cluster in a temp dir (tests/support/cluster.py), opens `--conns`
raw client connections to a follower holding `--watches` watches on one prefix between them,
none of which ever reads, writes `--writes` values of `--value` bytes under that prefix, then
closes the slow connections.  Prints the follower's RSS (from /proc) at the start, at its peak
while the writes go on, and 10 s after the connections closed, with how many connections the
member aborted, as one JSON object.  `--set key=value` changes a member setting (an int, a float
or true/false) for this run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from store.api.watch import WatchCreateRequest
from tests.support.cluster import StoreCluster, running_cluster
from tests.support.raw import RawConn


def rss_mib(pid: int) -> float:
    m = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert m is not None
    return int(m.group(1)) / 1024


def metric(tc: StoreCluster, member: int, name: str) -> float | None:
    info = next(m for m in tc.local.members() if m.id == member)
    with urllib.request.urlopen(info.http_url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def _value(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return float(text)


async def attack(tc: StoreCluster, follower: int, args: argparse.Namespace) -> dict[str, Any]:
    pid = tc.local.pid(follower)
    assert pid is not None
    url = tc.endpoint(follower)
    out: dict[str, Any] = {"follower": follower, "rss_start_mib": round(rss_mib(pid), 1)}
    conns = [await RawConn.open(url, tc.tls) for _ in range(args.conns)]
    for i in range(args.watches):
        conns[i % len(conns)].send([1000 + i, "watch", WatchCreateRequest(b"flood/", b"flood0", 0).to_wire()])
    for c in conns:
        await c.writer.drain()
    await asyncio.sleep(1)
    out["rss_with_watches_mib"] = round(rss_mib(pid), 1)
    peak = 0.0
    value = b"v" * args.value
    t0 = time.monotonic()
    async with tc.client() as client:
        sem = asyncio.Semaphore(16)

        async def put(i: int) -> None:
            async with sem:
                await client.put(b"flood/%06d" % (i % 1000), value)

        tasks = [asyncio.create_task(put(i)) for i in range(args.writes)]
        while not all(t.done() for t in tasks):
            peak = max(peak, rss_mib(pid))
            await asyncio.sleep(0.2)
        await asyncio.gather(*tasks)
        for _ in range(25):  # the member goes on sending for a while after the last write
            peak = max(peak, rss_mib(pid))
            await asyncio.sleep(0.2)
    out["write_seconds"] = round(time.monotonic() - t0, 1)
    out["rss_peak_mib"] = round(peak, 1)
    out["aborted_connections"] = metric(tc, follower, "raftkube_watch_slow_connections_total")
    for c in conns:
        c.close()
    await asyncio.sleep(10)
    out["rss_after_close_mib"] = round(rss_mib(pid), 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--conns", type=int, default=101)
    p.add_argument("--watches", type=int, default=2000)
    p.add_argument("--writes", type=int, default=1500)
    p.add_argument("--value", type=int, default=4096)
    p.add_argument("--set", action="append", default=[], help="a member setting, key=value")
    args = p.parse_args()
    changes = {k: _value(v) for k, v in (s.split("=", 1) for s in args.set)}
    with tempfile.TemporaryDirectory() as d, running_cluster(Path(d), **changes) as tc:
        leader = tc.wait_leader()
        follower = next(m.id for m in tc.local.members() if m.id != leader)
        print(json.dumps({"settings": changes, **asyncio.run(attack(tc, follower, args))}))


if __name__ == "__main__":
    main()
