"""core/v1 Endpoints: the addresses behind a service, kept by the endpoints controller."""

from __future__ import annotations

import ipaddress
from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources._podspec import PROTOCOLS
from apiserver.resources.base import Column, ResourceDef
from machinery.objects import Obj, dicts, number, text


def default(ep: Obj) -> None:
    subsets = ep.get("subsets")
    for subset in subsets if isinstance(subsets, list) else []:
        ports = subset.get("ports") if isinstance(subset, dict) else None
        for port in ports if isinstance(ports, list) else []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")


def _validate_ip(value: Any, field: str) -> list[Cause]:
    if not value:
        return [v.required(field)]
    try:
        ipaddress.ip_address(value)
    except (ValueError, TypeError):
        return [v.invalid(field, value, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")]
    return []


def validate(ep: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(ep, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    for i, subset in enumerate(v.as_list(ep.get("subsets"), "subsets", causes)):
        here = v.index("subsets", i)
        subset = v.as_dict(subset, here, causes)
        for group in ("addresses", "notReadyAddresses"):
            for j, addr in enumerate(v.as_list(subset.get(group), v.child(here, group), causes)):
                addr_here = v.index(v.child(here, group), j)
                addr = v.as_dict(addr, addr_here, causes)
                causes += _validate_ip(addr.get("ip"), v.child(addr_here, "ip"))
        ports = v.as_list(subset.get("ports"), v.child(here, "ports"), causes)
        for j, port in enumerate(ports):
            port_here = v.index(v.child(here, "ports"), j)
            port = v.as_dict(port, port_here, causes)
            causes += v.validate_port(port.get("port"), v.child(port_here, "port"))
            causes += v.validate_enum(port.get("protocol"), v.child(port_here, "protocol"), PROTOCOLS, optional=False)
            if len(ports) > 1 and not port.get("name"):
                causes.append(v.required(v.child(port_here, "name")))
    return causes


def endpoints_text(ep: Obj) -> str:
    """`10.0.0.1:80,10.0.0.2:80 + 3 more...`: the first three address:port pairs, `<none>` if empty."""
    subsets = dicts(ep, "subsets")
    if not subsets:
        return "<none>"
    shown: list[str] = []
    count = 0
    for subset in subsets:
        ips = [text(a, "ip") for a in dicts(subset, "addresses")]
        ports = dicts(subset, "ports")
        pairs = ips if not ports else [_join(ip, number(p, "port")) for p in ports for ip in ips]
        count += len(pairs)
        shown.extend(pairs[: max(0, 3 - len(shown))])
    text_ = ",".join(shown)
    return f"{text_} + {count - 3} more..." if count > 3 else text_


def _join(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def row(ep: Obj, now: float) -> list[Any]:
    return [endpoints_text(ep)]


RESOURCE = ResourceDef(
    group="",
    version="v1",
    kind="Endpoints",
    plural="endpoints",
    singular="endpoints",
    namespaced=True,
    short_names=("ep",),
    bumps_generation=False,
    default=default,
    validate=validate,
    columns=(Column("Endpoints", description="The set of all endpoints is the union of all subsets."),),
    row=row,
)
