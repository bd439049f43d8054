"""How long the service proxy takes to render and apply a big table: N Services (every fifth
a NodePort) with E endpoints each, in a private network namespace (never the host's).

    python -m bench.network.inproc [--services 1000] [--endpoints 2] [--rounds 20] [--events 200]

Prints one JSON line: the first render and whole replace, then, for rounds in which one
Service's endpoints change (a typical event), render and in-place apply times in seconds
(median and max), and the size of the table's text.  Then the sync loop itself (informers fed
directly, as by a watch): `--events` slice changes, one every 50 ms, and the p50/p99/max of the
time from each informer event to its rules being live.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import secrets
import statistics
import subprocess
import time
from collections.abc import AsyncIterator
from typing import Any

from components.client.informer import SharedInformer
from components.client.listwatch import ListResult
from components.client.rest import WatchEvent
from components.proxy import nft, rules
from components.proxy.proxier import Proxier

NODE = rules.Node("bench-node", (ipaddress.IPv4Address("10.244.1.1"),), ipaddress.IPv4Network("10.244.0.0/16"))


def objects(n: int, e: int, salt: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    services, slices = [], []
    for i in range(n):
        name = f"svc-{i}"
        port: dict[str, Any] = {"name": "http", "port": 80, "protocol": "TCP"}
        spec: dict[str, Any] = {"clusterIP": str(ipaddress.IPv4Address("10.96.0.10") + i), "ports": [port]}
        if i % 5 == 0:
            spec["type"] = "NodePort"
            port["nodePort"] = 30000 + i % 2768
        services.append({"metadata": {"namespace": "bench", "name": name}, "spec": spec})
        eps = [
            {"addresses": [str(ipaddress.IPv4Address("10.244.0.2") + (i * e + j + salt) % 60000)], "nodeName": "n"}
            for j in range(e)
        ]
        slices.append(
            {
                "metadata": {"namespace": "bench", "name": f"{name}-x", "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                "endpoints": eps,
            }
        )
    return services, slices


class _Listed:
    """A list-watch source that lists `items` and whose watch stays silent (events are fed to
    the informer directly)."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    async def list(self, resource_version: str) -> ListResult:
        return ListResult(self.items, "1")

    def watch(
        self, resource_version: str, *, timeout_s: int, send_initial_events: bool = False
    ) -> AsyncIterator[WatchEvent]:
        return self._silent()

    async def _silent(self) -> AsyncIterator[WatchEvent]:
        await asyncio.Event().wait()
        yield WatchEvent("BOOKMARK", {})


async def through_the_loop(n: int, e: int, events: int, prefix: tuple[str, ...]) -> dict[str, float]:
    svcs, slices = objects(n, e)
    for i, obj in enumerate(svcs + slices):
        obj["metadata"]["resourceVersion"] = str(i + 1)
    services = SharedInformer("services", _Listed(svcs), use_watch_list=False)
    informer = SharedInformer("slices", _Listed(slices), use_watch_list=False)
    proxier = Proxier(
        services,
        informer,
        NODE,
        apply=lambda rs, previous: nft.apply(rs, previous, prefix=prefix),
        remove=lambda table: nft.remove(table, prefix=prefix),
        tables=lambda: nft.tables(prefix=prefix),
    )
    task = asyncio.create_task(proxier.run())
    try:
        while proxier.applied is None:
            await asyncio.sleep(0.05)
        proxier.latencies.clear()
        rv = 10 * (n + len(slices))
        for k in range(events):
            changed = {**slices[k * 37 % n]}
            eps = list(changed["endpoints"])
            eps[0] = {**eps[0], "addresses": [str(ipaddress.IPv4Address("10.244.200.1") + k)]}
            rv += 1
            changed["endpoints"] = eps
            changed["metadata"] = {**changed["metadata"], "resourceVersion": str(rv)}
            informer.apply("MODIFIED", changed)
            await asyncio.sleep(0.05)
        deadline = time.monotonic() + 10
        while proxier._pending_since is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    lat = sorted(proxier.latencies)
    return {
        "syncs": len(lat),
        "p50": round(lat[len(lat) // 2], 4),
        "p99": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 4),
        "max": round(lat[-1], 4),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--services", type=int, default=1000)
    p.add_argument("--endpoints", type=int, default=2)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--events", type=int, default=200)
    args = p.parse_args()
    ns = f"rkpx-bench{secrets.token_hex(4)}"
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=10)
    prefix = ("ip", "netns", "exec", ns)
    try:
        svcs, slices = objects(args.services, args.endpoints)
        start = time.perf_counter()
        live = rules.render(svcs, slices, NODE)
        first_render = time.perf_counter() - start
        start = time.perf_counter()
        nft.apply(live, prefix=prefix)
        replace = time.perf_counter() - start
        render, update, total = [], [], []
        for r in range(args.rounds):  # one Service's endpoints move: a typical event
            i = r * 37 % args.services
            eps = slices[i]["endpoints"]
            eps[0] = {**eps[0], "addresses": [str(ipaddress.IPv4Address("10.244.200.1") + r)]}
            start = time.perf_counter()
            ruleset = rules.render(svcs, slices, NODE)
            rendered = time.perf_counter()
            nft.apply(ruleset, live, prefix=prefix)
            done = time.perf_counter()
            render.append(rendered - start)
            update.append(done - rendered)
            total.append(done - start)
            live = ruleset

        def stats(v: list[float]) -> dict[str, float]:
            return {"median": round(statistics.median(v), 4), "max": round(max(v), 4)}

        print(
            json.dumps(
                {
                    "services": args.services,
                    "endpoints": args.endpoints,
                    "script_bytes": len(live.text),
                    "first_render_s": round(first_render, 4),
                    "full_replace_s": round(replace, 4),
                    "one_change_render_s": stats(render),
                    "one_change_apply_in_place_s": stats(update),
                    "one_change_render_and_apply_s": stats(total),
                    "event_to_live_s": asyncio.run(
                        through_the_loop(args.services, args.endpoints, args.events, prefix)
                    ),
                }
            )
        )
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False, timeout=10)


if __name__ == "__main__":
    main()
