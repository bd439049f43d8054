"""Tables as `kubectl get` shows them: kube's columns, cells and row objects."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.errors import StatusError
from apiserver.resources import catalog
from apiserver.resources.base import ResourceDef
from apiserver.table import table
from machinery.objects import Obj
from machinery.timestamps import format_time

NOW = 1_700_000_000.0


def find(group: str, plural: str) -> ResourceDef:
    return next(r for r in catalog() if r.group == group and r.plural == plural)


def ago(seconds: float) -> str:
    return format_time(NOW - seconds)


def meta(name: str, age: float = 300, **more: Any) -> Obj:
    return {"name": name, "namespace": "default", "creationTimestamp": ago(age), **more}


def headers(resource: ResourceDef) -> list[tuple[str, int]]:
    return [(c["name"], c["priority"]) for c in table(resource, [], now=NOW)["columnDefinitions"]]


def cells(resource: ResourceDef, obj: Obj) -> list[Any]:
    return list(table(resource, [obj], now=NOW)["rows"][0]["cells"])


PODS = find("", "pods")


def pod(name: str, status: Obj, *, spec: Obj | None = None, **meta_more: Any) -> Obj:
    return {
        "metadata": meta(name, **meta_more),
        "spec": spec or {"containers": [{"name": "web", "image": "nginx"}], "nodeName": "n1"},
        "status": status,
    }


def running(ready: bool = True, restarts: int = 0, **more: Any) -> Obj:
    return {
        "ready": ready,
        "restartCount": restarts,
        "state": {"running": {"startedAt": ago(200)}},
        "name": "web",
        **more,
    }


def test_pod_columns() -> None:
    assert headers(PODS) == [
        ("Name", 0),
        ("Ready", 0),
        ("Status", 0),
        ("Restarts", 0),
        ("Age", 0),
        ("IP", 1),
        ("Node", 1),
        ("Nominated Node", 1),
        ("Readiness Gates", 1),
    ]
    assert table(PODS, [], now=NOW)["columnDefinitions"][0]["format"] == "name"


def test_running_pod() -> None:
    p = pod(
        "web",
        {
            "phase": "Running",
            "podIP": "10.244.0.13",
            "containerStatuses": [running()],
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    )
    assert cells(PODS, p) == ["web", "1/1", "Running", "0", "5m", "10.244.0.13", "n1", "<none>", "<none>"]


def test_pending_pod() -> None:
    p = pod(
        "wait",
        {"phase": "Pending"},
        spec={"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
        age=42,
    )
    assert cells(PODS, p) == ["wait", "0/2", "Pending", "0", "42s", "<none>", "<none>", "<none>", "<none>"]
    creating = pod(
        "c",
        {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "web",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
            ],
        },
    )
    assert cells(PODS, creating)[2] == "ContainerCreating"


def test_completed_pod() -> None:
    done = {
        "name": "web",
        "ready": False,
        "restartCount": 0,
        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
    }
    p = pod("job-x", {"phase": "Succeeded", "containerStatuses": [done]})
    row = table(PODS, [p], now=NOW)["rows"][0]
    assert row["cells"][1:4] == ["0/1", "Completed", "0"]
    assert row["conditions"] == [
        {"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}
    ]


def test_crashloop_pod_shows_restarts_with_when() -> None:
    status = {
        "name": "web",
        "ready": False,
        "restartCount": 5,
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(75)}},
    }
    p = pod("crash", {"phase": "Running", "containerStatuses": [status]})
    assert cells(PODS, p)[1:4] == ["0/1", "CrashLoopBackOff", "5 (75s ago)"]


def test_terminating_and_failed_pods() -> None:
    p = pod("bye", {"phase": "Running", "containerStatuses": [running()]}, deletionTimestamp=ago(1))
    assert cells(PODS, p)[2] == "Terminating"
    lost = pod("lost", {"phase": "Running", "reason": "NodeLost"}, deletionTimestamp=ago(1))
    assert cells(PODS, lost)[2] == "Unknown"
    failed = {"name": "web", "ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 137}}}
    assert cells(PODS, pod("oom", {"phase": "Failed", "containerStatuses": [failed]}))[2] == "ExitCode:137"


def test_init_containers() -> None:
    spec = {"initContainers": [{"name": "init", "image": "x"}], "containers": [{"name": "web", "image": "y"}]}
    waiting = {"name": "init", "restartCount": 0, "state": {"running": {}}}
    assert cells(PODS, pod("i", {"phase": "Pending", "initContainerStatuses": [waiting]}, spec=spec))[2] == "Init:0/1"
    failed = {"name": "init", "restartCount": 2, "state": {"terminated": {"exitCode": 3}}}
    assert cells(PODS, pod("i", {"phase": "Pending", "initContainerStatuses": [failed]}, spec=spec))[2:4] == [
        "Init:ExitCode:3",
        "2",
    ]


def test_readiness_gates() -> None:
    spec = {
        "containers": [{"name": "web", "image": "y"}],
        "readinessGates": [{"conditionType": "a"}, {"conditionType": "b"}],
    }
    status = {"phase": "Running", "conditions": [{"type": "a", "status": "True"}]}
    assert cells(PODS, pod("g", status, spec=spec))[-1] == "1/2"


NODES = find("", "nodes")


def node(name: str, ready: str | None, **spec: Any) -> Obj:
    conditions = [{"type": "Ready", "status": ready}] if ready else []
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": ago(3 * 86400),
            "labels": {"node-role.kubernetes.io/control-plane": ""},
        },
        "spec": spec,
        "status": {
            "conditions": conditions,
            "nodeInfo": {
                "kubeletVersion": "v1.32.0",
                "osImage": "Debian",
                "kernelVersion": "6.1",
                "containerRuntimeVersion": "raftkube://1",
            },
            "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
        },
    }


def test_cordoned_node() -> None:
    assert headers(NODES)[:5] == [("Name", 0), ("Status", 0), ("Roles", 0), ("Age", 0), ("Version", 0)]
    assert cells(NODES, node("n1", "True", unschedulable=True)) == [
        "n1",
        "Ready,SchedulingDisabled",
        "control-plane",
        "3d",
        "v1.32.0",
        "10.0.0.5",
        "<none>",
        "Debian",
        "6.1",
        "raftkube://1",
    ]
    assert cells(NODES, node("n2", "False"))[1] == "NotReady"
    bare = node("n3", None)
    bare["metadata"]["labels"] = {}
    assert cells(NODES, bare)[1:3] == ["Unknown", "<none>"]


def test_deployment() -> None:
    dep = find("apps", "deployments")
    assert headers(dep) == [
        ("Name", 0),
        ("Ready", 0),
        ("Up-to-date", 0),
        ("Available", 0),
        ("Age", 0),
        ("Containers", 1),
        ("Images", 1),
        ("Selector", 1),
    ]
    d = {
        "metadata": meta("web", age=10 * 3600),
        "spec": {
            "replicas": 3,
            "selector": {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}],
            },
            "template": {
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]}
            },
        },
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    }
    assert cells(dep, d) == ["web", "2/3", 3, 2, "10h", "web,log", "nginx:1.27,busybox", "app=web,tier in (a,b)"]


def test_other_kinds() -> None:
    svc = {
        "metadata": meta("web"),
        "spec": {
            "type": "NodePort",
            "clusterIP": "10.96.0.10",
            "clusterIPs": ["10.96.0.10"],
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
            "selector": {"app": "web"},
        },
    }
    assert cells(find("", "services"), svc) == [
        "web",
        "NodePort",
        "10.96.0.10",
        "<none>",
        "80:30080/TCP,53/UDP",
        "5m",
        "app=web",
    ]
    lb = {"metadata": meta("lb"), "spec": {"type": "LoadBalancer", "ports": [{"port": 443, "protocol": "TCP"}]}}
    assert cells(find("", "services"), lb)[2:4] == ["<none>", "<pending>"]
    assert cells(find("", "namespaces"), {"metadata": meta("n"), "status": {"phase": "Active"}}) == [
        "n",
        "Active",
        "5m",
    ]
    assert cells(find("", "configmaps"), {"metadata": meta("c"), "data": {"a": "1"}, "binaryData": {"b": ""}}) == [
        "c",
        2,
        "5m",
    ]
    assert cells(find("", "secrets"), {"metadata": meta("s"), "type": "Opaque", "data": {"a": "eA=="}}) == [
        "s",
        "Opaque",
        1,
        "5m",
    ]
    assert cells(find("", "serviceaccounts"), {"metadata": meta("default")}) == ["default", 0, "5m"]
    ep = {
        "metadata": meta("e"),
        "subsets": [{"addresses": [{"ip": f"10.0.0.{i}"} for i in range(1, 6)], "ports": [{"port": 80}]}],
    }
    assert cells(find("", "endpoints"), ep)[1] == "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 2 more..."
    assert cells(find("", "endpoints"), {"metadata": meta("e")})[1] == "<none>"
    job = {
        "metadata": meta("pi"),
        "spec": {"completions": 1, "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}},
        "status": {
            "succeeded": 1,
            "startTime": ago(100),
            "completionTime": ago(40),
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }
    assert cells(find("batch", "jobs"), job)[:5] == ["pi", "Complete", "1/1", "60s", "5m"]
    lease = {"metadata": meta("n1"), "spec": {"holderIdentity": "n1"}}
    assert cells(find("coordination.k8s.io", "leases"), lease) == ["n1", "n1", "5m"]
    es = {
        "metadata": meta("web-x"),
        "addressType": "IPv4",
        "ports": [{"port": 80}, {"name": "x"}],
        "endpoints": [{"addresses": ["10.0.0.1"]}],
    }
    assert cells(find("discovery.k8s.io", "endpointslices"), es) == ["web-x", "IPv4", "80,x", "10.0.0.1", "5m"]
    role = find("rbac.authorization.k8s.io", "roles")
    assert headers(role) == [("Name", 0), ("Created At", 0)]
    assert cells(role, {"metadata": meta("r")}) == ["r", ago(300)]
    rb = {
        "metadata": meta("rb"),
        "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [
            {"kind": "User", "name": "jane"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "ci", "namespace": "tools"},
        ],
    }
    assert cells(find("rbac.authorization.k8s.io", "rolebindings"), rb) == [
        "rb",
        "ClusterRole/view",
        "5m",
        "jane",
        "devs",
        "tools/ci",
    ]


def test_event_layout_has_name_last() -> None:
    events = find("", "events")
    assert headers(events) == [
        ("Last Seen", 0),
        ("Type", 0),
        ("Reason", 0),
        ("Object", 0),
        ("Subobject", 1),
        ("Source", 1),
        ("Message", 0),
        ("First Seen", 1),
        ("Count", 1),
        ("Name", 1),
    ]
    e = {
        "metadata": meta("p.17"),
        "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "Scheduled",
        "type": "Normal",
        "message": "Successfully assigned default/p to n1\n",
        "firstTimestamp": ago(600),
        "lastTimestamp": ago(30),
        "count": 3,
        "source": {"component": "default-scheduler"},
    }
    assert cells(events, e) == [
        "30s",
        "Normal",
        "Scheduled",
        "pod/p",
        "",
        "default-scheduler",
        "Successfully assigned default/p to n1",
        "10m",
        3,
        "p.17",
    ]
    new = {
        "metadata": meta("p.18"),
        "regarding": {"kind": "Pod", "name": "p"},
        "reason": "Pulled",
        "type": "Normal",
        "note": "ok",
        "eventTime": ago(5),
        "reportingController": "kubelet",
        "reportingInstance": "n1",
    }
    assert cells(find("events.k8s.io", "events"), new) == [
        "5s",
        "Normal",
        "Pulled",
        "pod/p",
        "",
        "kubelet, n1",
        "ok",
        "5s",
        1,
        "p.18",
    ]


def test_row_objects_and_list_metadata() -> None:
    p = pod("web", {"phase": "Running"}, labels={"app": "web"})
    t = table(PODS, [p], now=NOW, resource_version="113", continue_token="c1", remaining=4)
    assert t["kind"] == "Table" and t["apiVersion"] == "meta.k8s.io/v1"
    assert t["metadata"] == {"resourceVersion": "113", "continue": "c1", "remainingItemCount": 4}
    assert t["rows"][0]["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": p["metadata"],
    }
    assert table(PODS, [p], now=NOW, include_object="Object")["rows"][0]["object"] is p
    assert "object" not in table(PODS, [p], now=NOW, include_object="None")["rows"][0]
    assert table(PODS, [], now=NOW)["metadata"] == {}
    with pytest.raises(StatusError) as err:
        table(PODS, [p], now=NOW, include_object="Everything")
    assert err.value.code == 400


def test_unknown_age_and_unreadable_objects() -> None:
    assert cells(find("", "namespaces"), {"metadata": {"name": "n"}}) == ["n", "", "<unknown>"]
    weird = {"metadata": {"name": "x"}, "spec": "not an object", "status": ["nor", "this"]}
    assert cells(PODS, weird)[:5] == ["x", "0/0", "", "0", "<unknown>"]
