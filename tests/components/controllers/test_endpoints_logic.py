"""What Endpoints subsets and EndpointSlices hold, computed without I/O."""

from __future__ import annotations

from typing import Any

from components.controllers._infra_endpoints import desired_slices, endpoints_subsets, find_port, managed_labels
from machinery.objects import Obj


def svc(**spec: Any) -> Obj:
    return {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"selector": {"app": "web"}, **spec}}


def pod(name: str, ip: str | None, ready: bool = True, ports: list[Obj] | None = None, **meta: Any) -> Obj:
    status: Obj = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if ip:
        status["podIP"] = ip
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "labels": {"app": "web"}, **meta},
        "spec": {"containers": [{"name": "c", "ports": ports or []}]},
        "status": status,
    }


HTTP = [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]


def test_ready_and_not_ready_addresses_with_ports_resolved() -> None:
    s = svc(ports=[{"name": "web", "port": 80, "targetPort": "http", "protocol": "TCP"}])
    subsets = endpoints_subsets(s, [pod("b", "10.0.0.2", ready=False, ports=HTTP), pod("a", "10.0.0.1", ports=HTTP)])
    assert subsets == [
        {
            "addresses": [
                {"ip": "10.0.0.1", "targetRef": {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "u-a"}}
            ],
            "notReadyAddresses": [
                {"ip": "10.0.0.2", "targetRef": {"kind": "Pod", "namespace": "ns", "name": "b", "uid": "u-b"}}
            ],
            "ports": [{"name": "web", "port": 8080, "protocol": "TCP"}],
        }
    ]


def test_pods_without_ip_or_named_port_or_terminating_are_left_out() -> None:
    s = svc(ports=[{"port": 80, "targetPort": "http"}])
    pods = [
        pod("noip", None, ports=HTTP),
        pod("noport", "10.0.0.3"),
        pod("gone", "10.0.0.4", ports=HTTP, deletionTimestamp="2024-01-01T00:00:00Z"),
        pod("ok", "10.0.0.5", ports=HTTP),
    ]
    (subset,) = endpoints_subsets(s, pods)
    assert [a["targetRef"]["name"] for a in subset["addresses"]] == ["ok"]
    assert "notReadyAddresses" not in subset


def test_different_named_ports_make_different_subsets_and_numbers_pass_through() -> None:
    s = svc(ports=[{"port": 80, "targetPort": "http"}])
    other = [{"name": "http", "containerPort": 9090}]
    assert len(endpoints_subsets(s, [pod("a", "10.0.0.1", ports=HTTP), pod("b", "10.0.0.2", ports=other)])) == 2
    assert find_port(pod("a", "1.1.1.1"), {"port": 80, "targetPort": 8443}) == 8443
    assert find_port(pod("a", "1.1.1.1"), {"port": 80}) == 80
    assert find_port(pod("a", "1.1.1.1", ports=HTTP), {"port": 80, "targetPort": "http", "protocol": "UDP"}) is None


def test_publish_not_ready_addresses_makes_every_pod_ready() -> None:
    s = svc(ports=[{"port": 80}], publishNotReadyAddresses=True)
    (subset,) = endpoints_subsets(s, [pod("a", "10.0.0.1", ready=False)])
    assert len(subset["addresses"]) == 1 and "notReadyAddresses" not in subset


def test_slices_carry_conditions_and_hold_at_most_100_endpoints() -> None:
    s = svc(ports=[{"port": 80}])
    pods = [pod(f"p{i:03}", f"10.0.{i // 250}.{i % 250 + 1}", ready=i % 2 == 0) for i in range(250)]
    pods.append(pod("t", "10.9.9.9", deletionTimestamp="2024-01-01T00:00:00Z"))
    slices = desired_slices(s, pods)
    assert [len(eps) for _, eps in slices] == [100, 100, 51]
    by_name = {e["targetRef"]["name"]: e for _, eps in slices for e in eps}
    assert by_name["p000"]["conditions"] == {"ready": True, "serving": True, "terminating": False}
    assert by_name["p001"]["conditions"] == {"ready": False, "serving": False, "terminating": False}
    assert by_name["t"]["conditions"] == {"ready": False, "serving": True, "terminating": True}
    assert slices[0][0] == [{"port": 80, "protocol": "TCP"}]


def test_a_service_without_pods_has_one_empty_slice_and_headless_is_labelled() -> None:
    assert desired_slices(svc(ports=[{"port": 80}]), []) == [([], [])]
    assert managed_labels({"metadata": {"labels": {"a": "b"}}, "spec": {"clusterIP": "None"}}) == {
        "a": "b",
        "service.kubernetes.io/headless": "",
    }


def test_a_slice_port_always_has_a_name_as_kube_writes_it() -> None:
    """kube's EndpointSlice port name is "" for an unnamed service port, never absent: kubectl
    describe service dereferences it (conformance "Kubectl describe ... rc and pods" panicked)."""
    from components.controllers.endpointslice import EndpointSliceController

    s = svc(ports=[{"port": 80, "targetPort": 8080}])
    s["metadata"]["uid"] = "u-web"
    [(ports, endpoints)] = desired_slices(s, [pod("a", "10.0.0.1")])
    body = EndpointSliceController._slice(s, ports, endpoints)
    assert body["ports"] == [{"name": "", "port": 8080, "protocol": "TCP"}]
