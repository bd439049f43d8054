"""The user's path through a whole control plane started by `raftkube up`: store, apiserver,
controller-manager and scheduler, each its own process with its own identity.  Nodes are
registered by the test (no kubelets yet); `kubectl create deployment` becomes ReplicaSet and
pods, the scheduler binds them, `kubectl rollout status` finishes once the test (as kubelet)
marks them running, and deleting the deployment removes its pods through the GC."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.apiserver.support import ApiserverUnderTest, running_apiserver

NODES = ("node-1", "node-2", "node-3")


@pytest.fixture(scope="module")
def whole_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiserverUnderTest]:
    with running_apiserver(tmp_path_factory.mktemp("whole"), "raftkube", components=True) as server:
        yield server


def wait_for(check: Callable[[], Any], timeout: float = 45.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.2)


def register_node(admin: httpx.Client, name: str) -> None:
    node = {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        },
    }
    admin.post("/api/v1/nodes", json=node).raise_for_status()  # a create ignores status: patched below
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test kubelet"}
    addresses = [{"type": "InternalIP", "address": "127.0.0.1"}]
    status = {"status": {**node["status"], "conditions": [ready], "addresses": addresses}}
    admin.patch(
        f"/api/v1/nodes/{name}/status", json=status, headers={"Content-Type": "application/merge-patch+json"}
    ).raise_for_status()
    lease = {"metadata": {"name": name}, "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}}
    made = admin.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", json=lease)
    assert made.status_code == 201, made.text


def run_bound_pods(admin: httpx.Client, ns: str) -> list[dict[str, Any]]:
    """What a kubelet does for its pods: report them running and ready; confirm the deletion of
    those being deleted (a bound pod is deleted gracefully, then by its kubelet)."""
    pods = admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
    for p in pods:
        if p["metadata"].get("deletionTimestamp"):
            admin.delete(f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}", params={"gracePeriodSeconds": "0"})
            continue
        if p["spec"].get("nodeName") and p.get("status", {}).get("phase") != "Running":
            status = {
                "status": {
                    "phase": "Running",
                    "podIP": "10.0.0.1",
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [
                        {
                            "name": "nginx",
                            "ready": True,
                            "restartCount": 0,
                            "image": "nginx",
                            "imageID": "",
                            "state": {"running": {}},
                        }
                    ],
                }
            }
            admin.patch(
                f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}/status",
                json=status,
                headers={"Content-Type": "application/merge-patch+json"},
            )
    return list(pods)


def test_a_deployment_runs_on_the_nodes(whole_cluster: ApiserverUnderTest) -> None:
    c = whole_cluster
    with c.http() as admin:
        assert admin.post("/api/v1/namespaces", json={"metadata": {"name": "kube-node-lease"}}).status_code in (
            201,
            409,
        )
        for name in NODES:
            register_node(admin, name)
        c.ok("create", "namespace", "web")
        c.ok("create", "deployment", "web", "--image=nginx", "--replicas=3", "-n", "web")

        def bound() -> list[dict[str, Any]]:
            pods = run_bound_pods(admin, "web")
            return pods if len(pods) == 3 and all(p["spec"].get("nodeName") in NODES for p in pods) else []

        pods = wait_for(bound, what="3 pods bound to the nodes")
        assert {p["metadata"]["ownerReferences"][0]["kind"] for p in pods} == {"ReplicaSet"}
        assert len({p["spec"]["nodeName"] for p in pods}) == 3  # spread over the nodes
        events = admin.get("/api/v1/namespaces/web/events").json()["items"]
        assert any(e["reason"] == "Scheduled" for e in events)

        def rolled_out() -> bool:
            run_bound_pods(admin, "web")
            return c.kubectl("rollout", "status", "deployment/web", "-n", "web", "--timeout=2s").returncode == 0

        wait_for(rolled_out, what="kubectl rollout status to succeed")
        assert "default" in c.ok("get", "serviceaccounts", "-n", "web")  # the serviceaccount controller
        c.ok("delete", "deployment", "web", "-n", "web")

        def emptied() -> bool:
            run_bound_pods(admin, "web")
            return (
                admin.get("/api/v1/namespaces/web/pods").json()["items"] == []
                and not admin.get("/apis/apps/v1/namespaces/web/replicasets").json()["items"]
            )

        wait_for(emptied, what="the deployment's replicasets and pods collected")
