"""core/v1 Service: a stable virtual IP and DNS name in front of the pods its selector picks.

Here: defaults, kube's ValidateService (the clusterIP/clusterIPs/ipFamilies rules of
ValidateServiceClusterIPsRelatedFields among them) and the strategy's PrepareForUpdate (fields
that belong to the old type go when the type changes and the client left them as they were).
The cluster IPs and node ports are allocated after validation (apiserver/service_allocation.py).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.http.subresources.service_proxy import ServiceProxyHandler
from apiserver.resources._podspec import PROTOCOLS
from apiserver.resources._shared import ensure, format_labels
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj, dicts, get, items, mapping, number, text

TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
AFFINITIES = ("ClientIP", "None")
TRAFFIC_POLICIES = ("Cluster", "Local")
IP_FAMILIES = ("IPv4", "IPv6")
IP_FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
NONE = "None"  # clusterIP of a headless Service
DEFAULT_AFFINITY_TIMEOUT_S = 10800  # kube's DefaultClientIPServiceAffinitySeconds
MAX_AFFINITY_TIMEOUT_S = 86400
NODE_PORT_TYPES = ("NodePort", "LoadBalancer")
IP_MESSAGE = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


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
    if spec.get("sessionAffinity") == "None":
        spec.pop("sessionAffinityConfig", None)  # kube's SetDefaults_Service drops it
    elif spec.get("sessionAffinity") == "ClientIP":
        config = spec.get("sessionAffinityConfig")
        client = config.get("clientIP") if isinstance(config, dict) else None
        if not isinstance(client, dict) or client.get("timeoutSeconds") is None:
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": DEFAULT_AFFINITY_TIMEOUT_S}}
    _sync_cluster_ips(spec)
    ports = spec.get("ports")
    for port in ports if isinstance(ports, list) else []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if port.get("targetPort") in (None, 0, "") and v.is_int(port.get("port")) and port["port"] > 0:
                port["targetPort"] = port["port"]
    status = ensure(svc, "status")
    if status is not None:
        status.setdefault("loadBalancer", {})


def _sync_cluster_ips(spec: Obj) -> None:
    """kube's normalizeClusterIPs for what a client sent: clusterIP alone fills clusterIPs, and
    clusterIPs alone fills clusterIP (either can be written by a client that knows only one)."""
    single, several = spec.get("clusterIP"), spec.get("clusterIPs")
    if isinstance(single, str) and single and not several:
        spec["clusterIPs"] = [single]
    elif not single and isinstance(several, list) and several and isinstance(several[0], str):
        spec["clusterIP"] = several[0]


def prepare_update(new: Obj, old: Obj) -> None:
    """kube's dropTypeDependentFields: when the type changes, what only the old type uses goes,
    unless the client changed it too (then validation speaks)."""
    spec, before = new.get("spec"), old.get("spec")
    if not isinstance(spec, dict) or not isinstance(before, dict) or spec.get("type") == before.get("type"):
        return
    kind = spec.get("type")
    if kind == "ExternalName":
        for field in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "internalTrafficPolicy"):
            if spec.get(field) == before.get(field):
                spec.pop(field, None)
    if kind not in NODE_PORT_TYPES:
        ports, old_ports = spec.get("ports"), before.get("ports")
        if isinstance(ports, list) and _node_ports(ports) == _node_ports(old_ports):
            for port in ports:
                if isinstance(port, dict):
                    port.pop("nodePort", None)
        for field in ("externalTrafficPolicy", "healthCheckNodePort"):
            if spec.get(field) == before.get(field):
                spec.pop(field, None)
    if kind != "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") == before.get(
        "allocateLoadBalancerNodePorts"
    ):
        spec.pop("allocateLoadBalancerNodePorts", None)
    if kind != "ExternalName" and before.get("type") == "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")


def _node_ports(ports: Any) -> list[Any]:
    return [p.get("nodePort") for p in ports if isinstance(p, dict)] if isinstance(ports, list) else []


def _valid_ip(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _family(ip: str) -> str:
    return "IPv6" if ipaddress.ip_address(ip).version == 6 else "IPv4"


def _cluster_ip_rules(spec: Obj, old: Obj | None) -> list[Cause]:
    """ValidateServiceClusterIPsRelatedFields (and, on update, that allocated IPs stay)."""
    causes: list[Cause] = []
    single, several = spec.get("clusterIP"), spec.get("clusterIPs")
    if several is not None and not isinstance(several, list):
        return [v.invalid("spec.clusterIPs", several, "must be a list")]
    several = several or []
    if single:
        if not several:
            causes.append(v.required("spec.clusterIPs"))
        elif several[0] != single:
            causes.append(v.invalid("spec.clusterIPs", several, "first value must match `clusterIP`"))
    elif several:
        causes.append(v.invalid("spec.clusterIPs", several, "must be empty when `clusterIP` is not specified"))
    families = v.as_list(spec.get("ipFamilies"), "spec.ipFamilies", causes)
    seen: set[Any] = set()
    for i, family in enumerate(families):
        here = v.index("spec.ipFamilies", i)
        if family not in IP_FAMILIES:
            causes.append(v.not_supported(here, family, IP_FAMILIES))
        if isinstance(family, str) and family in seen:
            causes.append(v.duplicate(here, family))
        if isinstance(family, str):
            seen.add(family)
    causes += v.validate_enum(spec.get("ipFamilyPolicy"), "spec.ipFamilyPolicy", IP_FAMILY_POLICIES)
    bad_ips = False
    for i, ip in enumerate(several):
        if i == 0 and ip == NONE:
            if len(several) > 1:
                bad_ips = True
                causes.append(v.invalid("spec.clusterIPs", several, "'None' must be the first and only value"))
            continue
        if not _valid_ip(ip):
            bad_ips = True
            causes.append(
                v.invalid(
                    v.index("spec.clusterIPs", i), ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
                )
            )
    if len(several) > 2:
        causes.append(v.invalid("spec.clusterIPs", several, "may only hold up to 2 values"))
    if bad_ips:
        return causes
    if len(several) == 2 and _family(several[0]) == _family(several[1]):
        causes.append(v.invalid("spec.clusterIPs", several, "may specify no more than one IP for each IP family"))
    if several and several[0] != NONE:
        for i, (ip, family) in enumerate(zip(several, families, strict=False)):
            if family in IP_FAMILIES and _family(ip) != family:
                expected = "an IPv6" if family == "IPv6" else "an IPv4"
                causes.append(
                    v.invalid(
                        v.index("spec.clusterIPs", i),
                        ip,
                        f"expected {expected} value as indicated by `ipFamilies[{i}]`",
                    )
                )
    if old is not None:
        before = get(old, "spec")
        if isinstance(before, dict) and "ExternalName" not in (spec.get("type"), before.get("type")):
            raw = before.get("clusterIPs")
            old_ips: list[Any] = raw if isinstance(raw, list) else []
            both_headless = old_ips[:1] == [NONE] and several[:1] == [NONE]
            if not both_headless and len(old_ips) == len(several):
                for i, ip in enumerate(old_ips):
                    if ip != several[i]:
                        causes.append(v.invalid(v.index("spec.clusterIPs", i), several, "may not change once set"))
    return causes


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
    causes += _type_rules(spec, ports)
    causes += _affinity_rules(spec)
    if kind != "ExternalName":
        causes += _cluster_ip_rules(spec, old)
    return causes


def _type_rules(spec: Obj, ports: list[Any]) -> list[Cause]:
    """What each type allows: no node ports on a ClusterIP Service, no cluster IP on an
    ExternalName one, none of (protocol, port) or (protocol, nodePort) twice."""
    causes: list[Cause] = []
    kind = spec.get("type")
    several = spec.get("clusterIPs")
    headless = isinstance(several, list) and several[:1] == [NONE]
    if kind in NODE_PORT_TYPES and headless:
        causes.append(v.invalid("spec.clusterIPs[0]", NONE, f"may not be set to 'None' for {kind} services"))
    if kind == "ExternalName":
        if several:
            causes.append(v.forbidden("spec.clusterIPs", "may not be set for ExternalName services"))
        if spec.get("ipFamilies"):
            causes.append(v.forbidden("spec.ipFamilies", "may not be set for ExternalName services"))
        if spec.get("ipFamilyPolicy") is not None:
            causes.append(v.forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services"))
        name = spec.get("externalName")
        if isinstance(name, str) and name.removesuffix("."):
            cname = name.removesuffix(".")
            causes += [v.invalid("spec.externalName", cname, m) for m in v.is_dns1123_subdomain(cname)]
    node_ports: set[tuple[Any, Any]] = set()
    service_ports: set[tuple[Any, Any]] = set()
    for i, port in enumerate(ports):
        if not isinstance(port, dict):
            continue
        here = v.index("spec.ports", i)
        node_port = port.get("nodePort")
        if node_port not in (None, 0):
            if kind == "ClusterIP":
                causes.append(v.forbidden(v.child(here, "nodePort"), "may not be used when `type` is 'ClusterIP'"))
            key = (port.get("protocol"), node_port)
            if v.is_int(node_port) and key in node_ports:
                causes.append(v.duplicate(v.child(here, "nodePort"), node_port))
            node_ports.add(key)
        key = (port.get("protocol"), port.get("port"))
        if v.is_int(port.get("port")) and key in service_ports:
            causes.append(v.duplicate(here, {"port": port.get("port"), "protocol": port.get("protocol")}))
        service_ports.add(key)
    return causes


def _affinity_rules(spec: Obj) -> list[Cause]:
    config = spec.get("sessionAffinityConfig")
    if spec.get("sessionAffinity") == "None" and config is not None:
        return [v.forbidden("spec.sessionAffinityConfig", "must not be set when session affinity is None")]
    if spec.get("sessionAffinity") != "ClientIP":
        return []
    timeout = get(config, "clientIP.timeoutSeconds") if isinstance(config, dict) else None
    here = "spec.sessionAffinityConfig.clientIP.timeoutSeconds"
    if not v.is_int(timeout) or not 0 < timeout <= MAX_AFFINITY_TIMEOUT_S:
        return [v.invalid(here, timeout, f"must be greater than 0 and less than {MAX_AFFINITY_TIMEOUT_S}")]
    return []


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


def fields(svc: Obj) -> dict[str, str]:
    """kube's selectable fields of a Service (kube-proxy lists with spec.clusterIP!=None)."""
    return {"spec.clusterIP": text(svc, "spec.clusterIP"), "spec.type": text(svc, "spec.type")}


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
    subresources=(
        Subresource(
            "proxy",
            "ServiceProxyOptions",
            verbs=("create", "delete", "get", "patch", "update"),
            handler=ServiceProxyHandler(),
        ),
        Subresource("status", "Service", handler=STATUS_VIEW),
    ),
    bumps_generation=False,
    fields=fields,
    field_selectors=("spec.clusterIP", "spec.type"),
    default=default,
    validate=validate,
    prepare_update=prepare_update,
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
