"""Service traffic through the proxy's rules against pod-to-pod direct, in a private network.

Two server pods and a client pod on a bridge in a "host" namespace of our own (netns.py); the
proxy's table for one Service (ClusterIP 10.251.0.10:80 -> both servers' :8080), rendered by
components.proxy.rules and applied by components.proxy.nft in that host namespace.  From the
client pod, `bench.network.tcp load` (a connection per request, see tcp.py): (a) direct, the two
pod IPs taken in turn; (b) the ClusterIP.  In `cycles` rounds of direct, service, service,
direct (each run a 2*cycles-th of the duration), so that neither always runs on a warmer or
quieter machine; a leg's figures are over all its runs.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from bench.network.netns import CLUSTER_CIDR, GATEWAY, Network, in_ns, sh
from components.proxy import nft, rules
from machinery.process.launch import child_env

CLUSTER_IP = "10.251.0.10"
SERVICE_PORT = 80
TARGET_PORT = 8080
NODE = rules.Node("bench-datapath", (ipaddress.IPv4Address(GATEWAY),), ipaddress.IPv4Network(CLUSTER_CIDR))
START_TIMEOUT_S = 15.0


def objects(pod_ips: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    svc = {
        "metadata": {"namespace": "bench", "name": "web"},
        "spec": {"clusterIP": CLUSTER_IP, "ports": [{"name": "http", "port": SERVICE_PORT, "protocol": "TCP"}]},
    }
    eps = {
        "metadata": {"namespace": "bench", "name": "web-1", "labels": {rules.SERVICE_NAME_LABEL: "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": TARGET_PORT, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in pod_ips],
    }
    return [svc], [eps]


def _python(ns: str, *args: str) -> list[str]:
    return in_ns(ns, sys.executable, "-m", "bench.network.tcp", *args)


def _start_server(ns: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        _python(ns, "serve", str(TARGET_PORT)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "listening", or EOF when it failed
    if line.strip() != "listening":
        proc.kill()
        raise RuntimeError(f"a server pod did not start: {proc.communicate(timeout=5)[1][-500:]}")
    return proc


def _load(ns: str, targets: list[str], duration: float, workers: int, concurrency: int) -> dict[str, Any]:
    argv = _python(ns, "load", "--targets", ",".join(targets), "--duration", str(duration), "--workers", str(workers))
    argv += ["--concurrency", str(concurrency), "--raw"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=duration + 60, check=False, env=child_env())
    if done.returncode != 0:
        raise RuntimeError(f"the load client failed: {done.stderr[-800:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    lat = sorted(x for r in runs for x in r.pop("latencies_us"))
    n, duration = len(lat), sum(r["duration_s"] for r in runs)

    def pct(p: float) -> float | None:
        return round(lat[min(n - 1, int(n * p))] / 1e3, 3) if n else None

    return {
        "requests": n,
        "errors": sum(r["errors"] for r in runs),
        "duration_s": duration,
        "rate_per_s": round(n / duration, 1),
        "p50_ms": pct(0.5),
        "p90_ms": pct(0.9),
        "p99_ms": pct(0.99),
        "max_ms": round(lat[-1] / 1e3, 3) if n else None,
        "runs": runs,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def run(duration: float, workers: int, concurrency: int, say: Callable[[str], None], cycles: int = 1) -> dict[str, Any]:
    servers: list[subprocess.Popen[str]] = []
    with Network() as net:
        try:
            net.make_host()
            for k in (1, 2):
                net.add_pod(f"s{k}", 10 + k)
            client = net.add_pod("c", 20)
            pod_ips = [net.pods["s1"], net.pods["s2"]]
            svcs, slices = objects(pod_ips)
            ruleset = rules.render(svcs, slices, NODE)
            nft.apply(ruleset, prefix=in_ns(net.host))
            servers = [_start_server(net.name(f"s{k}")) for k in (1, 2)]
            direct = [f"{ip}:{TARGET_PORT}" for ip in pod_ips]
            service = [f"{CLUSTER_IP}:{SERVICE_PORT}"]
            for targets in (direct, service):  # both paths work before anything is timed
                probe = _load(client, targets, 0.3, 1, 1)
                if probe["requests"] == 0:
                    raise RuntimeError(f"no request to {targets} succeeded ({probe['errors']} errors)")
            legs: dict[str, list[dict[str, Any]]] = {"direct": [], "service": []}
            piece = duration / (2 * cycles)
            for leg in ("direct", "service", "service", "direct") * cycles:
                say(f"network: datapath, {leg} for {piece:g} s")
                targets = direct if leg == "direct" else service
                legs[leg].append(_load(client, targets, piece, workers, concurrency))
            out = {k: _merge(v) for k, v in legs.items()}
            d, s = out["direct"], out["service"]
            conntrack = sh(in_ns(net.host, "cat", "/proc/sys/net/netfilter/nf_conntrack_count"), check=False).strip()
            return {
                "what": (
                    "HTTP/1.1 GET, a new TCP connection per request (the server closes), from a client pod to two "
                    f"server pods on one bridge; {workers} client processes x {concurrency} connections in flight "
                    "(asyncio); direct = the two pod IPs in turn, service = the ClusterIP through the proxy's table"
                ),
                "cluster_ip": CLUSTER_IP,
                "pods": pod_ips,
                "table_bytes": len(ruleset.text),
                "workers": workers,
                "concurrency": concurrency,
                "cycles": cycles,
                "direct": d,
                "service": s,
                "rate_ratio_service_to_direct": round(s["rate_per_s"] / d["rate_per_s"], 3)
                if d["rate_per_s"]
                else None,
                "p50_ratio_service_to_direct": round(s["p50_ms"] / d["p50_ms"], 3)
                if d["p50_ms"] and s["p50_ms"]
                else None,
                "p99_ratio_service_to_direct": round(s["p99_ms"] / d["p99_ms"], 3)
                if d["p99_ms"] and s["p99_ms"]
                else None,
                "conntrack_entries_at_end": int(conntrack) if conntrack.isdigit() else None,
            }
        finally:
            for p in servers:
                p.terminate()
            for p in servers:
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
