"""What a Service's Endpoints and EndpointSlices should hold, from its pods (pure, no I/O).

As kube's endpoints and endpointslice controllers: a pod counts once it has `status.podIP`
and is not terminal; a terminating pod counts only when the service publishes not-ready
addresses (Endpoints) or as `terminating` (slices).  Each service port's `targetPort` is
resolved per pod: a number as is, a name looked up among the pod's container ports (same
protocol); a pod that lacks the named port is left out of that port's subset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from machinery.objects import Obj, as_dict
from machinery.pods import is_ready, is_terminating

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.k8s.io"
HEADLESS_LABEL = "service.kubernetes.io/headless"
MAX_ENDPOINTS_PER_SLICE = 100


def selector_of(service: Mapping[str, Any]) -> dict[str, str]:
    """The service's selector (empty: the service is not the controllers' to fill)."""
    sel = as_dict(service.get("spec")).get("selector")
    return {str(k): str(v) for k, v in sel.items()} if isinstance(sel, Mapping) else {}


def selects(selector: Mapping[str, str], pod: Mapping[str, Any]) -> bool:
    labels = as_dict(as_dict(pod.get("metadata")).get("labels"))
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _counts(pod: Mapping[str, Any]) -> bool:
    status = as_dict(pod.get("status"))
    return bool(status.get("podIP")) and status.get("phase") not in ("Succeeded", "Failed")


def find_port(pod: Mapping[str, Any], service_port: Mapping[str, Any]) -> int | None:
    """The pod's port for one service port (kube's podutil.FindPort), None when it has none."""
    target = service_port.get("targetPort", service_port.get("port"))
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    protocol = service_port.get("protocol") or "TCP"
    spec = as_dict(pod.get("spec"))
    for container in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        for p in as_dict(container).get("ports") or []:
            p = as_dict(p)
            if p.get("name") == target and (p.get("protocol") or "TCP") == protocol:
                port = p.get("containerPort")
                return port if isinstance(port, int) else None
    return None


def _target_ref(pod: Mapping[str, Any]) -> Obj:
    meta = as_dict(pod.get("metadata"))
    return {
        "kind": "Pod",
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
    }


def _address(service: Mapping[str, Any], pod: Mapping[str, Any]) -> Obj:
    spec, svc_name = as_dict(pod.get("spec")), as_dict(service.get("metadata")).get("name")
    addr: Obj = {"ip": as_dict(pod.get("status"))["podIP"]}
    if spec.get("hostname") and spec.get("subdomain") == svc_name:
        addr["hostname"] = spec["hostname"]
    if spec.get("nodeName"):
        addr["nodeName"] = spec["nodeName"]
    addr["targetRef"] = _target_ref(pod)
    return addr


def _endpoint_port(service_port: Mapping[str, Any], number: int) -> Obj:
    out: Obj = {"port": number, "protocol": service_port.get("protocol") or "TCP"}
    if service_port.get("name"):
        out["name"] = service_port["name"]
    if service_port.get("appProtocol"):
        out["appProtocol"] = service_port["appProtocol"]
    return out


def _port_key(ports: list[Obj]) -> tuple[tuple[str, int, str], ...]:
    return tuple(sorted((str(p.get("name", "")), int(p["port"]), str(p["protocol"])) for p in ports))


def _resolved_ports(service: Mapping[str, Any], pod: Mapping[str, Any]) -> list[Obj]:
    out = []
    for sp in as_dict(service.get("spec")).get("ports") or []:
        number = find_port(pod, as_dict(sp))
        if number is not None:
            out.append(_endpoint_port(as_dict(sp), number))
    return out


def endpoints_subsets(service: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[Obj]:
    """The Endpoints `subsets`: one per distinct port set, addresses sorted by IP (kube repacks)."""
    publish = bool(as_dict(service.get("spec")).get("publishNotReadyAddresses"))
    has_ports = bool(as_dict(service.get("spec")).get("ports"))
    groups: dict[tuple[tuple[str, int, str], ...], tuple[list[Obj], list[Obj], list[Obj]]] = {}
    for pod in pods:
        if not _counts(pod) or (is_terminating(pod) and not publish):
            continue
        ports = _resolved_ports(service, pod)
        if has_ports and not ports:
            continue
        entry = groups.setdefault(_port_key(ports), (ports, [], []))
        (entry[1] if publish or is_ready(pod) else entry[2]).append(_address(service, pod))
    subsets = []
    for key in sorted(groups):
        ports, ready, not_ready = groups[key]
        subset: Obj = {}
        if ready:
            subset["addresses"] = sorted(ready, key=lambda a: (a["ip"], a["targetRef"]["name"]))
        if not_ready:
            subset["notReadyAddresses"] = sorted(not_ready, key=lambda a: (a["ip"], a["targetRef"]["name"]))
        if ports:
            subset["ports"] = sorted(ports, key=lambda p: (p.get("name", ""), p["port"], p["protocol"]))
        subsets.append(subset)
    return subsets


def managed_labels(service: Mapping[str, Any]) -> dict[str, str]:
    """The labels the controllers put on an Endpoints object: the service's, plus headless."""
    labels = {str(k): str(v) for k, v in as_dict(as_dict(service.get("metadata")).get("labels")).items()}
    if as_dict(service.get("spec")).get("clusterIP") == "None":
        labels[HEADLESS_LABEL] = ""
    else:
        labels.pop(HEADLESS_LABEL, None)
    return labels


def address_type(service: Mapping[str, Any]) -> str:
    families = as_dict(service.get("spec")).get("ipFamilies") or ["IPv4"]
    return "IPv6" if families[0] == "IPv6" else "IPv4"


def slice_endpoints(
    service: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]
) -> dict[tuple[tuple[str, int, str], ...], tuple[list[Obj], list[Obj]]]:
    """Per distinct port set: (ports, endpoints) for slices, endpoints sorted by address."""
    publish = bool(as_dict(service.get("spec")).get("publishNotReadyAddresses"))
    has_ports = bool(as_dict(service.get("spec")).get("ports"))
    family_v6 = address_type(service) == "IPv6"
    groups: dict[tuple[tuple[str, int, str], ...], tuple[list[Obj], list[Obj]]] = {}
    for pod in pods:
        if not _counts(pod) or (":" in str(as_dict(pod.get("status"))["podIP"])) != family_v6:
            continue
        ports = _resolved_ports(service, pod)
        if has_ports and not ports:
            continue
        ready, ending = is_ready(pod), is_terminating(pod)
        spec = as_dict(pod.get("spec"))
        ep: Obj = {
            "addresses": [as_dict(pod.get("status"))["podIP"]],
            "conditions": {"ready": publish or (ready and not ending), "serving": ready, "terminating": ending},
            "targetRef": _target_ref(pod),
        }
        if spec.get("nodeName"):
            ep["nodeName"] = spec["nodeName"]
        if spec.get("hostname") and spec.get("subdomain") == as_dict(service.get("metadata")).get("name"):
            ep["hostname"] = spec["hostname"]
        entry = groups.setdefault(_port_key(ports), (ports, []))
        entry[1].append(ep)
    for _ports, eps in groups.values():
        eps.sort(key=lambda e: (e["addresses"][0], e["targetRef"]["name"]))
        _ports.sort(key=lambda p: (p.get("name", ""), p["port"], p["protocol"]))
    return groups


def desired_slices(service: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> list[tuple[list[Obj], list[Obj]]]:
    """(ports, endpoints) of every slice the service should have: at most 100 endpoints each;
    a service without ready-or-not endpoints still gets one empty slice (as kube keeps one)."""
    out: list[tuple[list[Obj], list[Obj]]] = []
    for key in sorted(groups := slice_endpoints(service, pods)):
        ports, eps = groups[key]
        for i in range(0, len(eps), MAX_ENDPOINTS_PER_SLICE):
            out.append((ports, eps[i : i + MAX_ENDPOINTS_PER_SLICE]))
    if not out:
        out.append(([], []))  # kube's placeholder slice
    return out
