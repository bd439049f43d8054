"""`raftkube proxy` as a process against a real cluster (`raftkube up`): Services and slices
made through the API become rules in a private namespace (`--netns`), /healthz answers, and
SIGTERM takes the table away and exits 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from components.proxy import nft, rules
from machinery.process.launch import free_ports
from tests.apiserver.support import ApiserverUnderTest
from tests.components.proxy.support import in_ns, netns, sh


@pytest.fixture
def ns() -> Iterator[str]:
    with netns("e") as name:
        yield name


def eventually(what: Callable[[], bool], timeout: float = 15.0) -> float:
    """Seconds until `what` held (the test fails when it did not within `timeout`)."""
    start = time.monotonic()
    while not what():
        assert time.monotonic() - start < timeout, "not within the time allowed"
        time.sleep(0.05)
    return time.monotonic() - start


def test_the_proxy_follows_the_api_and_cleans_up(
    cluster: ApiserverUnderTest, processes: list[subprocess.Popen[bytes]], ns: str
) -> None:
    (health,) = free_ports(1)
    node = "proxy-e2e-node"
    table = rules.table_name(node)
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "components.cli", "proxy", "--kubeconfig", str(cluster.kubeconfig)),
            *("--node-name", node, "--node-ip", "10.244.1.1", "--cluster-cidr", "10.244.0.0/16"),
            *("--netns", ns, "--no-sysctls", "--health-port", str(health)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    processes.append(proc)

    def live() -> str:
        return sh(*in_ns(ns), "nft", "list", "table", "ip", table, check=False)

    with cluster.http() as api:
        svc = api.post(
            "/api/v1/namespaces/default/services",
            json={
                "metadata": {"name": "proxied"},
                "spec": {"clusterIP": "10.96.0.77", "ports": [{"name": "http", "port": 80}]},
            },
        )
        assert svc.status_code == 201, svc.text
        ip = svc.json()["spec"]["clusterIP"]
        eventually(lambda: f"{ip} . tcp . 80 : goto reject-chain" in live())
        slice_ = {
            "metadata": {"name": "proxied-1", "labels": {"kubernetes.io/service-name": "proxied"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["10.244.1.7"], "conditions": {"ready": True}}],
        }
        made = api.post("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices", json=slice_)
        assert made.status_code == 201, made.text
        took = eventually(lambda: "dnat to 10.244.1.7:8080" in live())
        assert took < 2.0
        assert httpx.get(f"http://127.0.0.1:{health}/healthz", timeout=5).text == "ok"
        metrics = httpx.get(f"http://127.0.0.1:{health}/metrics", timeout=5).text
        assert "raftkube_proxy_sync_latency_seconds_count" in metrics
        api.delete("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/proxied-1").raise_for_status()
        eventually(lambda: "dnat to 10.244.1.7" not in live() and f"{ip} . tcp . 80 : goto reject-chain" in live())
        api.delete("/api/v1/namespaces/default/services/proxied").raise_for_status()
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err.decode()
    assert nft.tables(prefix=in_ns(ns)) == []
