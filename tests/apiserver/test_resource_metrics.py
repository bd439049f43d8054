"""metrics.k8s.io from the kubelets' usage: the exposition parsed (and any text survived), two
readings make a rate, a container gone from its kubelet is forgotten, a counter that went back
is not a negative rate, and the API answers get/list (with selectors and Tables) and no watch."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.http.app import build_app
from apiserver.resource_metrics import MAX_SERIES, ResourceMetrics, parse_exposition, parse_resolution
from tests.apiserver.admin import Admin
from tests.apiserver.memstorage import MemStorage

WANTED = frozenset({"node_cpu_usage_seconds_total", "container_cpu_usage_seconds_total"})


def kubelet_text(
    node_cpu: float, node_mem: int, containers: dict[tuple[str, str, str], tuple[float, int]], ms: int
) -> str:
    lines = [f"node_cpu_usage_seconds_total {node_cpu} {ms}", f"node_memory_working_set_bytes {node_mem} {ms}"]
    for (ns, pod, c), (cpu, mem) in containers.items():
        labels = f'container="{c}",namespace="{ns}",pod="{pod}"'
        lines += [
            f"container_cpu_usage_seconds_total{{{labels}}} {cpu} {ms}",
            f"container_memory_working_set_bytes{{{labels}}} {mem} {ms}",
        ]
    return "# HELP whatever\n" + "\n".join(lines) + "\n"


def test_the_exposition_is_parsed_with_escapes_and_bad_lines_skipped() -> None:
    text = (
        '# TYPE x counter\ncontainer_cpu_usage_seconds_total{container="a\\"b",namespace="n",pod="p"} 1.5 1000\n'
        "node_cpu_usage_seconds_total NaN 5\nnode_cpu_usage_seconds_total -3\nnode_cpu_usage_seconds_total 2\n"
        "container_cpu_usage_seconds_total{broken 1\nother_metric 9\n\t\n   \n"
    )
    samples = parse_exposition(text, WANTED)
    assert [(s.name, dict(s.labels), s.value, s.ms) for s in samples] == [
        ("container_cpu_usage_seconds_total", {"container": 'a"b', "namespace": "n", "pod": "p"}, 1.5, 1000),
        ("node_cpu_usage_seconds_total", {}, 2.0, None),
    ]


def test_a_kubelet_answering_too_many_series_is_read_only_up_to_the_cap() -> None:
    line = 'container_cpu_usage_seconds_total{{container="c",namespace="n",pod="p{i}"}} 1 5'
    text = "\n".join(line.format(i=i) for i in range(MAX_SERIES + 5000))
    samples = parse_exposition(text, WANTED)
    assert len(samples) == MAX_SERIES and dict(samples[-1].labels)["pod"] == f"p{MAX_SERIES - 1}"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_whatever_a_kubelet_answers_parsing_survives(text: str) -> None:
    for sample in parse_exposition(text, WANTED):
        assert sample.name in WANTED and sample.value >= 0


NODE = {"metadata": {"name": "n1", "labels": {"zone": "a"}}}
POD = {
    "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}},
    "spec": {"containers": [{"name": "c"}, {"name": "side"}]},
}


def test_two_readings_make_a_rate_and_gone_containers_are_forgotten() -> None:
    now = [1000.0]
    m = ResourceMetrics(lambda node: asyncio.sleep(0, ""), clock=lambda: now[0])
    key, side = ("ns", "web", "c"), ("ns", "web", "side")
    m.record("n1", kubelet_text(100.0, 1 << 30, {key: (10.0, 2 << 20), side: (1.0, 1 << 20)}, 1_000_000))
    assert m.node_metrics(NODE) is None and m.pod_metrics(POD) is None  # one reading: no rate yet
    now[0] = 1010.0
    m.record("n1", kubelet_text(105.0, 1 << 30, {key: (12.5, 4 << 20), side: (1.1, 1 << 20)}, 1_010_000))
    node = m.node_metrics(NODE)
    assert node is not None
    assert node["usage"] == {"cpu": "500000000n", "memory": "1048576Ki"} and node["window"] == "10s"
    assert node["metadata"]["labels"] == {"zone": "a"} and node["kind"] == "NodeMetrics"
    pod = m.pod_metrics(POD)
    assert pod is not None
    assert pod["containers"] == [
        {"name": "c", "usage": {"cpu": "250000000n", "memory": "4096Ki"}},
        {"name": "side", "usage": {"cpu": "10000000n", "memory": "1024Ki"}},
    ]
    now[0] = 1020.0  # the side container restarted (its counter went back), c is gone
    m.record("n1", kubelet_text(110.0, 1 << 30, {side: (0.2, 1 << 20)}, 1_020_000))
    assert m.pod_metrics(POD) is None


def test_the_resolution_takes_go_durations_or_seconds_within_its_bounds() -> None:
    assert parse_resolution("15s") == parse_resolution("15") == 15.0
    assert parse_resolution("1m30s") == 90.0 and parse_resolution("1.5") == 1.5
    for bad in ("0", "0.5s", "2h", "-5s", "ten", "", "nan", "1e3"):
        with pytest.raises(ValueError):
            parse_resolution(bad)


def test_the_kubelets_are_read_every_resolution() -> None:
    """The scrape loop sleeps the instance's interval (--metric-resolution), not the default's
    10 s: at 50 ms, a second brings many readings."""
    reads: list[float] = []

    async def fetch(node: Any) -> str:
        reads.append(time.monotonic())
        return ""

    async def go() -> None:
        m = ResourceMetrics(fetch, interval=0.05)
        task = asyncio.create_task(m.scrape_forever(lambda: [NODE]))
        try:
            deadline = time.monotonic() + 5
            while len(reads) < 4 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        finally:
            task.cancel()
        assert len(reads) >= 4 and reads[3] - reads[0] < 2.0, reads

    asyncio.run(go())


def test_the_api_serves_get_and_list_with_selectors_and_tables_and_refuses_watch() -> None:
    app = build_app(MemStorage(progress=True), Admin(), compaction_interval=0)
    api = app.api

    async def go() -> None:
        async with app.running():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="https://apiserver") as client:
                node = {"metadata": {"name": "n1", "labels": {"zone": "a"}}}
                assert (await client.post("/api/v1/nodes", json=node)).status_code == 201
                pod = {
                    "metadata": {"name": "web", "labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "x"}]},
                }
                assert (await client.post("/api/v1/namespaces/default/pods", json=pod)).status_code == 201
                base = "/apis/metrics.k8s.io/v1beta1"
                assert (await client.get(f"{base}/nodes/n1")).status_code == 404  # nothing read yet
                for at, cpu in ((1_000_000, 1.0), (1_015_000, 4.0)):
                    api.resource_metrics.record(
                        "n1", kubelet_text(cpu * 10, 1 << 20, {("default", "web", "c"): (cpu, 1 << 20)}, at)
                    )
                for _ in range(100):  # the caches have the node and the pod
                    if (await client.get(f"{base}/nodes/n1")).status_code == 200:
                        break
                    await asyncio.sleep(0.05)
                got = (await client.get(f"{base}/nodes/n1")).json()
                assert got["usage"]["cpu"] == "2000000000n" and got["window"] == "15s"
                listed = (await client.get(f"{base}/namespaces/default/pods?labelSelector=app%3Dweb")).json()
                assert listed["kind"] == "PodMetricsList"
                assert [p["containers"][0]["usage"]["cpu"] for p in listed["items"]] == ["200000000n"]
                none = (await client.get(f"{base}/namespaces/default/pods?labelSelector=app%3Dother")).json()
                assert none["items"] == []
                table = await client.get(
                    f"{base}/nodes", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
                )
                assert [c["name"] for c in table.json()["columnDefinitions"]][:4] == ["Name", "CPU", "Memory", "Window"]
                assert (await client.get(f"{base}/nodes?watch=1")).status_code == 405
                assert (await client.post(f"{base}/nodes", json={})).status_code == 405
                groups = (await client.get("/apis")).json()["groups"]
                assert any(g["name"] == "metrics.k8s.io" for g in groups)

    asyncio.run(asyncio.wait_for(go(), 30))
