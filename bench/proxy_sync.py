"""How long the service proxy takes to render and apply a big table: N Services (every fifth
a NodePort) with E endpoints each, in a private network namespace (never the host's).

    python -m bench.proxy_sync [--services 1000] [--endpoints 2] [--rounds 5]

Prints one JSON line: the first render and whole replace, then, for rounds in which one
Service's endpoints change (a typical event), render and in-place apply times in seconds
(median and max), and the size of the table's text.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import secrets
import statistics
import subprocess
import time
from typing import Any

from components.proxy import nft, rules

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


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--services", type=int, default=1000)
    p.add_argument("--endpoints", type=int, default=2)
    p.add_argument("--rounds", type=int, default=20)
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
                }
            )
        )
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False, timeout=10)


if __name__ == "__main__":
    main()
