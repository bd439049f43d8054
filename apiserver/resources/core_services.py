"""core/v1 Service: a stable virtual IP and DNS name in front of the pods its selector picks.

The cluster IP and node ports are allocated by the registry, not here."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._podspec import PROTOCOLS
from apiserver.resources._shared import ensure, format_labels
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj, dicts, get, items, mapping, number, text

TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
AFFINITIES = ("ClientIP", "None")
TRAFFIC_POLICIES = ("Cluster", "Local")


def default(svc: Obj) -> None:
    spec = ensure(svc, "spec")
    if spec is None:
        return
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    kind = spec.get("type")
    if kind != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if kind in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    ports = spec.get("ports")
    for port in ports if isinstance(ports, list) else []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if port.get("targetPort") in (None, 0, "") and v.is_int(port.get("port")) and port["port"] > 0:
                port["targetPort"] = port["port"]
    status = ensure(svc, "status")
    if status is not None:
        status.setdefault("loadBalancer", {})


def _validate_port(port: Obj, here: str, several: bool) -> list[Cause]:
    causes = v.validate_port(port.get("port"), v.child(here, "port"))
    causes += v.validate_enum(port.get("protocol"), v.child(here, "protocol"), PROTOCOLS, optional=False)
    name = port.get("name")
    if several and not name:
        causes.append(v.required(v.child(here, "name")))
    elif isinstance(name, str) and name:
        causes += [v.invalid(v.child(here, "name"), name, m) for m in v.is_dns1123_label(name)]
    target = port.get("targetPort")
    if isinstance(target, str):
        causes += [v.invalid(v.child(here, "targetPort"), target, m) for m in v.is_port_name(target)]
    elif target is not None:
        causes += v.validate_port(target, v.child(here, "targetPort"))
    causes += v.validate_port(port.get("nodePort"), v.child(here, "nodePort"), optional=True)
    return causes


def validate(svc: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(svc, namespaced=True, name_fn=v.name_is_dns1035_label, old=old)
    spec = v.as_dict(svc.get("spec"), "spec", causes)
    kind = spec.get("type")
    causes += v.validate_enum(kind, "spec.type", TYPES)
    causes += v.validate_enum(spec.get("sessionAffinity"), "spec.sessionAffinity", AFFINITIES)
    causes += v.validate_enum(spec.get("internalTrafficPolicy"), "spec.internalTrafficPolicy", TRAFFIC_POLICIES)
    causes += v.validate_enum(spec.get("externalTrafficPolicy"), "spec.externalTrafficPolicy", TRAFFIC_POLICIES)
    ports = v.as_list(spec.get("ports"), "spec.ports", causes)
    headless = spec.get("clusterIP") == "None"
    if kind == "ExternalName":
        if not spec.get("externalName"):
            causes.append(v.required("spec.externalName"))
    elif not ports and not headless and isinstance(spec.get("ports", []), list):
        causes.append(v.required("spec.ports"))
    names: list[tuple[str, Any]] = []
    for i, port in enumerate(ports):
        here = v.index("spec.ports", i)
        port = v.as_dict(port, here, causes)
        causes += _validate_port(port, here, len(ports) > 1)
        if port.get("name"):
            names.append((v.child(here, "name"), port.get("name")))
    causes += v.validate_unique(names)
    if spec.get("selector") is not None:
        causes += v.validate_labels(spec.get("selector"), "spec.selector")
    if old is not None:
        before, after = text(old, "spec.clusterIP"), spec.get("clusterIP")
        if before and after and after != before:
            causes.append(v.immutable("spec.clusterIP", after))
    return causes


def external_ip(svc: Obj) -> str:
    """The External-IP cell: external IPs, load-balancer ingress (`<pending>` until there is one)."""
    kind = text(svc, "spec.type")
    external = [x for x in items(svc, "spec.externalIPs") if isinstance(x, str)]
    if kind in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if kind == "LoadBalancer":
        ingress = sorted(
            {text(i, "ip") or text(i, "hostname") for i in dicts(svc, "status.loadBalancer.ingress")} - {""}
        )
        lb = ",".join(ingress)
        if len(lb) > 16:
            lb = lb[:13] + "..."
        if external:
            return ",".join([*([x for x in lb.split(",") if x] if lb else []), *external])
        return lb or "<pending>"
    if kind == "ExternalName":
        return text(svc, "spec.externalName")
    return "<unknown>"


def ports_text(svc: Obj) -> str:
    pieces = []
    for port in dicts(svc, "spec.ports"):
        if number(port, "nodePort") > 0:
            pieces.append(f"{number(port, 'port')}:{number(port, 'nodePort')}/{text(port, 'protocol')}")
        else:
            pieces.append(f"{number(port, 'port')}/{text(port, 'protocol')}")
    return ",".join(pieces) or "<none>"


def row(svc: Obj, now: float) -> list[Any]:
    cluster_ips = [x for x in items(svc, "spec.clusterIPs") if isinstance(x, str)]
    cluster_ip = cluster_ips[0] if cluster_ips else (text(svc, "spec.clusterIP") or "<none>")
    selector = get(svc, "spec.selector")
    return [
        text(svc, "spec.type"),
        cluster_ip,
        external_ip(svc),
        ports_text(svc),
        format_labels(selector if isinstance(selector, dict) else mapping(svc, "spec.selector")),
    ]


RESOURCE = ResourceDef(
    group="",
    version="v1",
    kind="Service",
    plural="services",
    singular="service",
    namespaced=True,
    empty_status={"loadBalancer": {}},
    short_names=("svc",),
    categories=("all",),
    subresources=(Subresource("status", "Service", handler=STATUS_VIEW),),
    bumps_generation=False,
    default=default,
    validate=validate,
    columns=(
        Column("Type", description="type determines how the Service is exposed."),
        Column("Cluster-IP", description="clusterIP is the IP address of the service."),
        Column(
            "External-IP",
            description="externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic "
            "for this service.",
        ),
        Column("Port(s)", description="The list of ports that are exposed by this service."),
        Column(
            "Selector",
            priority=1,
            description="Route service traffic to pods with label keys and values matching this selector.",
        ),
    ),
    row=row,
    return_deleted=True,  # DELETE answers with the Service, as kube's service storage does
)
