"""The scheduler as a process against a real cluster: binding, events, taints, spreading,
FailedScheduling wording, preemption (of cpu and of an extended resource), and leader election
between two schedulers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.pki import ApiserverPKI
from machinery.process.launch import free_ports
from tests.apiserver.support import ApiserverUnderTest
from tests.support.paths import ROOT

WAIT_S = 30.0


def until(what: str, check: Callable[[], Any], limit: float = WAIT_S) -> Any:
    deadline = time.monotonic() + limit
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit}s waiting for {what}")
        time.sleep(0.1)


@contextmanager
def scheduler(cluster: ApiserverUnderTest, *extra: str, log: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    kubeconfig = ApiserverPKI.of(cluster.data_dir).kubeconfig_of("scheduler")
    out = open(log or os.devnull, "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "components.scheduler", "--kubeconfig", str(kubeconfig), *extra],
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        out.close()
        if log is not None and log.exists():
            print(f"--- {log.name} ---\n" + log.read_text()[-4000:])


@pytest.fixture(scope="module")
def http(cluster: ApiserverUnderTest) -> Iterator[httpx.Client]:
    with cluster.http() as client:
        yield client


def ok(resp: httpx.Response) -> Any:
    assert resp.status_code < 300, resp.text
    return resp.json()


def make_node(http: httpx.Client, name: str, cpu: str = "4", memory: str = "8Gi", pods: int = 110, **spec: Any) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "test": "sched"}},
        "spec": spec,
    }
    ok(http.post("/api/v1/nodes", json=body))
    status = {
        "status": {
            "capacity": {"cpu": cpu, "memory": memory, "pods": str(pods)},
            "allocatable": {"cpu": cpu, "memory": memory, "pods": str(pods)},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}],
        }
    }
    ok(
        http.patch(
            f"/api/v1/nodes/{name}/status", json=status, headers={"Content-Type": "application/merge-patch+json"}
        )
    )
    # admission taints a new node not-ready; the node lifecycle controller (absent here) would lift it
    lift = {"spec": {"taints": spec.get("taints") or None}}
    ok(http.patch(f"/api/v1/nodes/{name}", json=lift, headers={"Content-Type": "application/merge-patch+json"}))


def make_pod(http: httpx.Client, ns: str, name: str, cpu: str = "100m", **spec: Any) -> None:
    pod_spec = {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}], **spec}
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}}, "spec": pod_spec}
    ok(http.post(f"/api/v1/namespaces/{ns}/pods", json=body))


def node_of(http: httpx.Client, ns: str, name: str) -> str:
    return str(ok(http.get(f"/api/v1/namespaces/{ns}/pods/{name}")).get("spec", {}).get("nodeName") or "")


def events(http: httpx.Client, ns: str, reason: str) -> list[dict[str, Any]]:
    items = ok(http.get(f"/api/v1/namespaces/{ns}/events")).get("items") or []
    return [e for e in items if e.get("reason") == reason]


def namespace(http: httpx.Client) -> str:
    ns = f"s-{uuid.uuid4().hex[:8]}"
    ok(http.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    return ns


def delete_test_nodes(http: httpx.Client) -> None:
    """Remove what earlier tests left: their nodes, and every pod (pending ones would take new nodes)."""
    for p in ok(http.get("/api/v1/pods")).get("items") or []:
        meta = p["metadata"]
        if meta["namespace"].startswith("s-"):
            http.delete(f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", params={"gracePeriodSeconds": 0})
    for n in ok(http.get("/api/v1/nodes", params={"labelSelector": "test=sched"})).get("items") or []:
        http.delete(f"/api/v1/nodes/{n['metadata']['name']}")


def test_binds_pods_reports_events_and_failed_scheduling(
    cluster: ApiserverUnderTest, http: httpx.Client, tmp_path: Path
) -> None:
    delete_test_nodes(http)
    ns = namespace(http)
    make_node(http, "n1", cpu="1")
    make_node(http, "n2", cpu="2")
    make_node(http, "n3", cpu="4", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    (port,) = free_ports(1)
    with scheduler(cluster, "--no-leader-elect", "--health-port", str(port), log=tmp_path / "s.log") as proc:
        for i in range(4):
            make_pod(http, ns, f"p{i}", cpu="500m")
        for i in range(4):
            until(f"p{i} bound", lambda i=i: node_of(http, ns, f"p{i}"))
        placed = [node_of(http, ns, f"p{i}") for i in range(4)]
        assert "n3" not in placed
        assert placed.count("n1") <= 2
        until("Scheduled events", lambda: len(events(http, ns, "Scheduled")) == 4)
        ev = events(http, ns, "Scheduled")[0]
        assert ev["source"]["component"] == "default-scheduler"
        assert ev["reportingComponent"] == "default-scheduler"
        assert ev["message"].startswith(f"Successfully assigned {ns}/p")

        make_pod(http, ns, "big", cpu="3")
        failed = until("FailedScheduling", lambda: events(http, ns, "FailedScheduling"))
        assert failed[0]["message"] == (
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. "
            "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
            "2 No preemption victims found for incoming pod."
        ), failed[0]["message"]
        assert not node_of(http, ns, "big")

        # a toleration lets it onto the tainted node
        make_pod(
            http,
            ns,
            "tolerant",
            cpu="3",
            tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
        )
        assert until("tolerant bound", lambda: node_of(http, ns, "tolerant")) == "n3"

        # a new node lets the big pod in (the unschedulable queue is flushed by the node event)
        make_node(http, "n4", cpu="8")
        assert until("big bound", lambda: node_of(http, ns, "big")) == "n4"

        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"}' in metrics
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").text == "ok"
        assert proc.poll() is None
    assert proc.returncode == 0
    delete_test_nodes(http)


def test_spreads_pods_of_one_owner(cluster: ApiserverUnderTest, http: httpx.Client) -> None:
    delete_test_nodes(http)
    ns = namespace(http)
    for n in ("a1", "a2", "a3"):
        make_node(http, n)
    with scheduler(cluster, "--no-leader-elect"):
        spread = {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"group": "g"}},
                }
            ]
        }
        for i in range(6):
            pod_spec = {
                "containers": [{"name": "c", "image": "busybox"}],
                **spread,
            }
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"g{i}", "labels": {"group": "g"}},
                "spec": pod_spec,
            }
            ok(http.post(f"/api/v1/namespaces/{ns}/pods", json=body))
        nodes = [until(f"g{i} bound", lambda i=i: node_of(http, ns, f"g{i}")) for i in range(6)]
        assert sorted(nodes.count(n) for n in ("a1", "a2", "a3")) == [2, 2, 2]
    delete_test_nodes(http)


def test_two_schedulers_one_leader_and_takeover(
    cluster: ApiserverUnderTest, http: httpx.Client, tmp_path: Path
) -> None:
    delete_test_nodes(http)
    ns = namespace(http)
    make_node(http, "l1")
    flags = ("--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.2")
    with (
        scheduler(cluster, *flags, "--identity", "first", log=tmp_path / "a.log") as first,
        scheduler(cluster, *flags, "--identity", "second", log=tmp_path / "b.log") as second,
    ):
        lease = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"
        leader = until(
            "a leader",
            lambda: ok(http.get(lease))["spec"].get("holderIdentity") if http.get(lease).status_code == 200 else "",
        )
        make_pod(http, ns, "x0")
        until("x0 bound", lambda: node_of(http, ns, "x0"))
        procs = {"first": first, "second": second}
        procs[leader].kill()  # no release: the other waits out the lease
        procs[leader].wait(5)
        other = "second" if leader == "first" else "first"
        until("take-over", lambda: ok(http.get(lease))["spec"].get("holderIdentity") == other)
        make_pod(http, ns, "x1")
        until("x1 bound", lambda: node_of(http, ns, "x1"))
        # the standby started scheduling only once it led: one sync, after the take-over
        other_log = (tmp_path / ("a.log" if other == "first" else "b.log")).read_text()
        assert other_log.count("informers synced") == 1
        assert other_log.index(f"the leader is now {other}") < other_log.index("informers synced")
    delete_test_nodes(http)


def test_concurrent_pods_never_overcommit_a_node(cluster: ApiserverUnderTest, http: httpx.Client) -> None:
    import random
    from concurrent.futures import ThreadPoolExecutor

    delete_test_nodes(http)
    ns = namespace(http)
    rng = random.Random(7)
    sizes = {f"c{i}": rng.choice([500, 1000, 1500]) for i in range(4)}
    for name, cpu in sizes.items():
        make_node(http, name, cpu=f"{cpu}m")
    wants = [rng.choice([100, 200, 300, 400]) for _ in range(24)]
    with scheduler(cluster, "--no-leader-elect"):
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda j: make_pod(http, ns, f"c{j}", cpu=f"{wants[j]}m"), range(len(wants))))

        def settled() -> bool:
            pods = ok(http.get(f"/api/v1/namespaces/{ns}/pods"))["items"]
            pending = [p for p in pods if not p["spec"].get("nodeName")]
            failed = {e["involvedObject"]["name"] for e in events(http, ns, "FailedScheduling")}
            return all(p["metadata"]["name"] in failed for p in pending)

        until("every pod bound or reported unschedulable", settled)
        pods = ok(http.get(f"/api/v1/namespaces/{ns}/pods"))["items"]
        used: dict[str, int] = {}
        for p in pods:
            if p["spec"].get("nodeName"):
                used[p["spec"]["nodeName"]] = used.get(p["spec"]["nodeName"], 0) + wants[int(p["metadata"]["name"][1:])]
        assert used, "nothing was bound"
        for name, total in used.items():
            assert total <= sizes[name], (name, total, sizes[name])
        assert sum(used.values()) >= min(sum(wants), sum(sizes.values())) - 400  # no room left unused for long
    delete_test_nodes(http)


def test_preemption_evicts_lower_priority_pods(cluster: ApiserverUnderTest, http: httpx.Client) -> None:
    delete_test_nodes(http)
    ns = namespace(http)
    make_node(http, "pr1", cpu="1")
    with scheduler(cluster, "--no-leader-elect"):
        make_pod(http, ns, "victim", cpu="800m")
        until("victim bound", lambda: node_of(http, ns, "victim"))
        pc = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": f"high-{ns}"},
            "value": 1000,
        }
        ok(http.post("/apis/scheduling.k8s.io/v1/priorityclasses", json=pc))
        make_pod(http, ns, "vip", cpu="800m", priorityClassName=f"high-{ns}")
        until(
            "nominatedNodeName",
            lambda: (
                ok(http.get(f"/api/v1/namespaces/{ns}/pods/vip")).get("status", {}).get("nominatedNodeName") == "pr1"
            ),
        )
        victim = http.get(f"/api/v1/namespaces/{ns}/pods/victim")
        assert victim.status_code == 404 or victim.json()["metadata"].get("deletionTimestamp")
        # no kubelet here to finish the graceful deletion: finish it as the kubelet would
        http.delete(f"/api/v1/namespaces/{ns}/pods/victim", params={"gracePeriodSeconds": 0})
        assert until("vip bound", lambda: node_of(http, ns, "vip")) == "pr1"
        http.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/high-{ns}")
    delete_test_nodes(http)


def test_preemption_frees_an_extended_resource(cluster: ApiserverUnderTest, http: httpx.Client) -> None:
    """The node gets `example.com/fakecpu` as kube's e2e framework adds it (a strategic merge
    patch of status); a pod using most of it leaves no room for a higher-priority one, which
    marks it a DisruptionTarget, evicts it and is bound once it is gone."""
    delete_test_nodes(http)
    ns = namespace(http)
    fake = "example.com/fakecpu"
    make_node(http, "ext1")
    extended = {"status": {"capacity": {fake: "1k"}, "allocatable": {fake: "1k"}}}
    strategic = {"Content-Type": "application/strategic-merge-patch+json"}
    ok(http.patch("/api/v1/nodes/ext1/status", json=extended, headers=strategic))
    limits = {"resources": {"limits": {fake: "600"}}}  # requests default to the limits

    def fake_pod(name: str, **spec: Any) -> None:
        container = {"name": "c", "image": "busybox", **limits}
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"containers": [container], **spec},
        }
        ok(http.post(f"/api/v1/namespaces/{ns}/pods", json=body))

    pc = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": f"ext-{ns}"},
        "value": 1000,
    }
    ok(http.post("/apis/scheduling.k8s.io/v1/priorityclasses", json=pc))
    with scheduler(cluster, "--no-leader-elect"):
        fake_pod("low")
        assert until("low bound", lambda: node_of(http, ns, "low")) == "ext1"
        fake_pod("high", priorityClassName=f"ext-{ns}")
        until(
            "high nominated",
            lambda: ok(http.get(f"/api/v1/namespaces/{ns}/pods/high")).get("status", {}).get("nominatedNodeName"),
        )
        assert node_of(http, ns, "high") == ""  # 600 + 600 of 1000: not both
        low = ok(http.get(f"/api/v1/namespaces/{ns}/pods/low"))  # bound: deleted gracefully, so still here
        assert low["metadata"].get("deletionTimestamp")
        cond = next(c for c in low["status"]["conditions"] if c["type"] == "DisruptionTarget")
        assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
        assert cond["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
        http.delete(f"/api/v1/namespaces/{ns}/pods/low", params={"gracePeriodSeconds": 0})  # as a kubelet would
        assert until("high bound", lambda: node_of(http, ns, "high")) == "ext1"
    http.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/ext-{ns}")
    delete_test_nodes(http)


def test_pod_affinity_selects_namespaces_by_their_labels(cluster: ApiserverUnderTest, http: httpx.Client) -> None:
    """The scheduler watches namespaces: a term's namespaceSelector finds the db in another
    namespace by that namespace's labels (without them the pod could go nowhere)."""
    delete_test_nodes(http)
    data, web_ns = namespace(http), namespace(http)
    tag = uuid.uuid4().hex[:8]
    patch = {"metadata": {"labels": {"team": tag}}}
    ok(http.patch(f"/api/v1/namespaces/{data}", json=patch, headers={"Content-Type": "application/merge-patch+json"}))
    for n in ("c1", "c2"):
        make_node(http, n)
    make_pod(http, data, "db", nodeName="c2")
    term = {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "namespaceSelector": {"matchLabels": {"team": tag}},
        "topologyKey": "kubernetes.io/hostname",
    }
    with scheduler(cluster, "--no-leader-elect"):
        make_pod(
            http, web_ns, "web", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        )
        assert until("web bound", lambda: node_of(http, web_ns, "web")) == "c2"
    delete_test_nodes(http)
