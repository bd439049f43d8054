"""networking.k8s.io/v1 IPAddress (GA in 1.33): one allocated IP, named by the address in its
canonical form, with a reference to the object that holds it (a Service's ClusterIP)."""

from __future__ import annotations

import ipaddress
from typing import Any

from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, get, text


def canonical_ip_name(name: str, prefix: bool) -> list[str]:
    """ValidateIPAddressName: the name is an IP address written as kube's canonical form."""
    if prefix:
        return []
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return ["must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]
    return [] if str(ip) == name else [f"must be in canonical form ({ip})"]


def row(ip: Obj, now: float) -> list[Any]:
    ref = get(ip, "spec.parentRef")
    if not isinstance(ref, dict):
        return ["<none>"]
    group = text(ref, "group")
    resource = text(ref, "resource") + (f".{group}" if group else "")
    namespace = text(ref, "namespace")
    return [f"{resource}/{namespace + '/' if namespace else ''}{text(ref, 'name')}"]


RESOURCE = stored_kind(
    group="networking.k8s.io",
    version="v1",
    kind="IPAddress",
    plural="ipaddresses",
    namespaced=False,
    short_names=("ip",),
    name_fn=canonical_ip_name,
    immutable=("spec.parentRef",),
    columns=(Column("ParentRef", description="The object that holds this IP address."),),
    row=row,
)
