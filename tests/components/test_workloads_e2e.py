"""The kinds issue's own end-to-end path, as a user walks it: `raftkube up` with two of our
kubelets (real processes, real mounts), kubectl 1.33 and 1.31.

A StatefulSet of 3 whose volumeClaimTemplates get the default StorageClass: each member writes
to its own claim, the set is scaled down to 1 and up to 3 again, and the members that came back
find what they wrote (the claims outlive their pods, as kube's default retention keeps them).
A DaemonSet runs a pod on each node, and on a third node started afterwards (a kubelet started
by hand, as `raftkube kubelet`).  Every wait is bounded; `raftkube down` stops the kubelets and
their containers, the one started here included (it lives in the data dir as `up`'s do)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from components.cli.launcher import LocalComponent
from tests.apiserver.support import ApiserverUnderTest
from tests.support.detached import detached_cluster
from tests.support.paths import HOST_NETWORK

WAIT_S = 120.0
NS = "default"


def until(what: str, check: Callable[[], Any], wait: float = WAIT_S) -> Any:
    deadline = time.monotonic() + wait
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {wait:.0f}s waiting for {what}")
        time.sleep(0.5)


def _stop_kubelets(data_dir: Path) -> None:
    for name in ("kubelet-node-1", "kubelet-node-2", "kubelet-node-3"):
        LocalComponent(data_dir, name).stop(timeout=5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiserverUnderTest]:
    # autoscalers pass every 3 s, not kube's 15, and the kubelets' usage is read every 2 s, not
    # every 10: the HPA and `kubectl top` specs wait on a pass and two readings, not on the periods
    hpa = '[controller_manager]\nargs = ["--horizontal-pod-autoscaler-sync-period", "3"]\n'
    apiserver = '[apiserver]\nstartup_timeout = 60.0\nmetric_resolution = "2s"\n'
    config = "[store]\nmembers = 1\n" + apiserver + HOST_NETWORK + hpa
    tmp = tmp_path_factory.mktemp("workloads")
    with detached_cluster(tmp, config, "--kubelets", "2", "--hollow-nodes", "0", also_stop=_stop_kubelets) as up:
        yield up


def get(cluster: ApiserverUnderTest, *what: str, minor: int = 33) -> Any:
    return json.loads(cluster.ok("get", "-n", NS, *what, "-o", "json", minor=minor))


def running_pods(cluster: ApiserverUnderTest, selector: str, minor: int = 33) -> list[dict[str, Any]]:
    pods = get(cluster, "pods", "-l", selector, minor=minor)["items"]
    return [
        p
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and p.get("status", {}).get("phase") == "Running"
        and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
    ]


STATEFUL_SET = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {"name": "db"},
    "spec": {
        "serviceName": "db",
        "replicas": 3,
        "selector": {"matchLabels": {"app": "db"}},
        "template": {
            "metadata": {"labels": {"app": "db"}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "db",
                        "image": "busybox",
                        # the first run of a member writes who it is; a later one keeps it
                        "command": ["sh", "-c", "test -f /data/id || hostname > /data/id; exec sleep 3600"],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }
                ],
            },
        },
        "volumeClaimTemplates": [
            {
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}},
            }
        ],
    },
}


def test_a_stateful_set_scaled_down_and_up_keeps_each_members_data(cluster: ApiserverUnderTest) -> None:
    cluster.ok("apply", "-n", NS, "-f", "-", stdin=json.dumps(STATEFUL_SET))
    until("3 ready members", lambda: len(running_pods(cluster, "app=db")) == 3)
    for i in range(3):
        assert cluster.ok("exec", "-n", NS, f"db-{i}", "--", "cat", "/data/id").strip() == f"db-{i}"
    cluster.ok("exec", "-n", NS, "db-2", "--", "sh", "-c", "echo kept > /data/marker")
    claims = {c["metadata"]["name"]: c for c in get(cluster, "pvc")["items"]}
    assert set(claims) == {"data-db-0", "data-db-1", "data-db-2"}
    assert all(c["spec"]["storageClassName"] == "standard" and c["status"]["phase"] == "Bound" for c in claims.values())

    cluster.ok("scale", "-n", NS, "statefulset/db", "--replicas=1")
    until(
        "one member left",
        lambda: [p["metadata"]["name"] for p in get(cluster, "pods", "-l", "app=db")["items"]] == ["db-0"],
    )
    assert len(get(cluster, "pvc")["items"]) == 3  # the claims stay (whenScaled: Retain)

    cluster.ok("scale", "-n", NS, "statefulset/db", "--replicas=3", minor=31)
    until("3 ready members again", lambda: len(running_pods(cluster, "app=db")) == 3)
    assert cluster.ok("exec", "-n", NS, "db-2", "--", "cat", "/data/id", "/data/marker").split() == ["db-2", "kept"]
    status = cluster.ok("rollout", "status", "-n", NS, "statefulset/db", "--timeout=60s")
    assert "roll out complete" in status or "partitioned roll out complete" in status, status


def test_a_claim_grows_in_place_and_its_directory_goes_with_it(cluster: ApiserverUnderTest) -> None:
    """allowVolumeExpansion on the user's path: `kubectl patch` asks a bound claim for more, the
    claim's capacity follows with the data kept; deleting the claim deletes its volume (Delete)
    and the node's kubelet removes the volume's directory."""
    elastic = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "elastic"},
        "provisioner": "raftkube.io/local-path",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
    }
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "grows"},
        "spec": {
            "storageClassName": "elastic",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "64Mi"}},
        },
    }
    writer = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "writer", "labels": {"app": "writer"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "w",
                    "image": "busybox",
                    "command": ["sh", "-c", "echo written > /data/f; exec sleep 3600"],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "grows"}}],
        },
    }
    for body in (elastic, claim, writer):
        cluster.ok("apply", "-n", NS, "-f", "-", stdin=json.dumps(body))
    until("the writer running", lambda: running_pods(cluster, "app=writer"))
    cluster.ok("patch", "-n", NS, "pvc", "grows", "-p", '{"spec":{"resources":{"requests":{"storage":"128Mi"}}}}')
    until("the claim grown", lambda: get(cluster, "pvc", "grows")["status"].get("capacity") == {"storage": "128Mi"})
    volume = get(cluster, "pv", get(cluster, "pvc", "grows")["spec"]["volumeName"])
    assert volume["spec"]["capacity"] == {"storage": "128Mi"}
    directory = Path(volume["spec"]["hostPath"]["path"])
    assert (directory / "f").read_text() == "written\n"
    assert cluster.ok("exec", "-n", NS, "writer", "--", "cat", "/data/f").strip() == "written"

    cluster.ok("delete", "-n", NS, "pod", "writer")
    cluster.ok("delete", "-n", NS, "pvc", "grows")
    until("the volume's directory removed", lambda: not directory.exists(), wait=60)
    assert cluster.kubectl("get", "pv", volume["metadata"]["name"]).returncode != 0  # the volume is gone too


DAEMON_SET = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "agent"},
    "spec": {
        "selector": {"matchLabels": {"app": "agent"}},
        "template": {
            "metadata": {"labels": {"app": "agent"}},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{"name": "agent", "image": "busybox", "command": ["sleep", "3600"]}],
            },
        },
    },
}


def test_a_daemon_set_lands_on_a_node_that_joins_later(cluster: ApiserverUnderTest) -> None:
    cluster.ok("apply", "-n", NS, "-f", "-", stdin=json.dumps(DAEMON_SET), minor=31)

    def nodes_running() -> set[str]:
        return {p["spec"]["nodeName"] for p in running_pods(cluster, "app=agent", minor=31)}

    until("an agent on each node", lambda: nodes_running() == {"node-1", "node-2"})
    third = LocalComponent(cluster.data_dir, "kubelet-node-3")
    third.start()  # `up` wrote node-3's kubeconfig; the kubelet registers the node
    until("node-3 ready", lambda: _ready(cluster, "node-3"))
    until("an agent on node-3", lambda: nodes_running() == {"node-1", "node-2", "node-3"})
    ds = get(cluster, "daemonset", "agent", minor=31)
    assert ds["status"]["desiredNumberScheduled"] == 3


def _ready(cluster: ApiserverUnderTest, node: str) -> bool:
    found = cluster.kubectl("get", "node", node, "-o", "json")
    if found.returncode != 0:
        return False
    conditions = json.loads(found.stdout).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_kubectl_top_shows_the_nodes_and_pods_usage(cluster: ApiserverUnderTest) -> None:
    """metrics.k8s.io from the kubelets' measured usage: `kubectl top` (1.33 and 1.31) shows
    each node and a busy pod's CPU, once two scrapes have made a rate."""
    busy = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "spin", "labels": {"app": "spin"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "spin", "image": "busybox", "command": ["sh", "-c", "while :; do :; done"]}],
        },
    }
    cluster.ok("apply", "-n", NS, "-f", "-", stdin=json.dumps(busy))
    until("the busy pod running", lambda: running_pods(cluster, "app=spin"))

    def top(*what: str, minor: int) -> str | None:
        found = cluster.kubectl("top", *what, "--no-headers", minor=minor)
        return found.stdout if found.returncode == 0 and found.stdout.strip() else None

    nodes = until("node metrics", lambda: top("nodes", minor=33), wait=90)
    assert {line.split()[0] for line in nodes.splitlines()} >= {"node-1", "node-2"}
    pods = until("the busy pod's metrics", lambda: top("pods", "-n", NS, "-l", "app=spin", minor=31), wait=90)
    name, cpu, memory = pods.split()[:3]
    assert name == "spin" and cpu.endswith("m") and int(cpu[:-1]) > 200, pods  # a spinning shell: most of a core
    assert memory.endswith("Mi")
    cluster.ok("delete", "-n", NS, "pod", "spin", "--wait=false")


def test_kubectl_lists_what_the_apiserver_serves_as_local_apiservices(cluster: ApiserverUnderTest) -> None:
    def rows() -> dict[str, list[str]] | None:
        found = cluster.kubectl("get", "apiservices", "--no-headers", minor=32)
        table = {line.split()[0]: line.split()[1:] for line in found.stdout.splitlines() if line.strip()}
        return table if found.returncode == 0 and "v1beta1.metrics.k8s.io" in table else None

    table = until("the local APIServices", rows, wait=30)
    for name in ("v1.", "v1.apps", "v2.autoscaling", "v1beta1.metrics.k8s.io"):
        assert table[name][:2] == ["Local", "True"], (name, table[name])


def test_an_autoscaler_on_cpu_scales_a_busy_deployment(cluster: ApiserverUnderTest) -> None:
    """`kubectl autoscale` (1.33: autoscaling/v2) on a Deployment whose pod spins far above its
    CPU request: the controller-manager's autoscaler reads metrics.k8s.io and scales it to its
    maximum, saying why in the HPA's status and a SuccessfulRescale event."""
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "burn"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "burn"}},
            "template": {
                "metadata": {"labels": {"app": "burn"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "burn",
                            "image": "busybox",
                            "command": ["sh", "-c", "while :; do :; done"],
                            "resources": {"requests": {"cpu": "100m"}},
                        }
                    ],
                },
            },
        },
    }
    cluster.ok("apply", "-n", NS, "-f", "-", stdin=json.dumps(deployment))
    try:
        until("the busy pod running", lambda: running_pods(cluster, "app=burn"))
        cluster.ok("autoscale", "-n", NS, "deployment/burn", "--cpu-percent=50", "--min=1", "--max=2")
        until("scaled to 2", lambda: get(cluster, "deployment", "burn")["spec"]["replicas"] == 2, wait=120)
        hpa = get(cluster, "hpa", "burn")
        assert hpa["status"]["desiredReplicas"] == 2
        current = hpa["status"]["currentMetrics"][0]["resource"]
        assert current["name"] == "cpu" and current["current"]["averageUtilization"] > 100, current
        conditions = {c["type"]: c for c in hpa["status"]["conditions"]}
        assert conditions["ScalingActive"]["reason"] == "ValidMetricFound"
        events = get(cluster, "events", "--field-selector", "involvedObject.name=burn,reason=SuccessfulRescale")
        assert any("New size: 2" in e["message"] for e in events["items"]), events
    finally:
        cluster.kubectl("delete", "-n", NS, "hpa", "burn", "--wait=false")
        cluster.kubectl("delete", "-n", NS, "deployment", "burn", "--wait=false")
