"""discovery.k8s.io/v1 EndpointSlice: a service's endpoints in slices of at most 1000."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources._podspec import PROTOCOLS
from apiserver.resources.base import Column, ResourceDef
from machinery.objects import Obj, dicts, get, items, text

ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")


def default(slice_: Obj) -> None:
    ports = slice_.get("ports")
    for port in ports if isinstance(ports, list) else []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def validate(slice_: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(slice_, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    causes += v.validate_enum(slice_.get("addressType"), "addressType", ADDRESS_TYPES, optional=False)
    causes += v.validate_immutable(slice_, old, "addressType")
    endpoints = v.as_list(slice_.get("endpoints"), "endpoints", causes)
    if len(endpoints) > 1000:
        causes.append(
            Cause("FieldValueTooMany", f"Too many: {len(endpoints)}: must have at most 1000 items", "endpoints")
        )
    for i, ep in enumerate(endpoints):
        here = v.index("endpoints", i)
        ep = v.as_dict(ep, here, causes)
        addresses = v.as_list(ep.get("addresses"), v.child(here, "addresses"), causes)
        if not addresses:
            causes.append(v.required(v.child(here, "addresses"), "must contain at least 1 address"))
        elif len(addresses) > 100:
            causes.append(
                Cause(
                    "FieldValueTooMany",
                    f"Too many: {len(addresses)}: must have at most 100 items",
                    v.child(here, "addresses"),
                )
            )
    for i, port in enumerate(v.as_list(slice_.get("ports"), "ports", causes)):
        here = v.index("ports", i)
        port = v.as_dict(port, here, causes)
        number_ = port.get("port")
        if number_ is not None and (not v.is_int(number_) or not 0 <= number_ <= 65535):
            causes.append(v.invalid(v.child(here, "port"), number_, "must be between 0 and 65535, inclusive"))
        causes += v.validate_enum(port.get("protocol"), v.child(here, "protocol"), PROTOCOLS)
        name = port.get("name")
        if isinstance(name, str) and name:
            causes += [v.invalid(v.child(here, "name"), name, m) for m in v.is_dns1123_label(name)]
    return causes


def _more(shown: list[str], count: int) -> str:
    joined = ",".join(shown)
    if count > 3:
        return f"{joined} + {count - 3} more..."
    return joined or "<unset>"


def ports_text(slice_: Obj) -> str:
    shown: list[str] = []
    ports = dicts(slice_, "ports")
    for port in ports[:3]:
        value = get(port, "port")
        shown.append(str(value) if v.is_int(value) else (text(port, "name") or "*"))
    return _more(shown, len(ports))


def endpoints_text(slice_: Obj) -> str:
    addresses = [a for ep in dicts(slice_, "endpoints") for a in items(ep, "addresses") if isinstance(a, str)]
    return _more(addresses[:3], len(addresses))


def row(slice_: Obj, now: float) -> list[Any]:
    return [text(slice_, "addressType"), ports_text(slice_), endpoints_text(slice_)]


RESOURCE = ResourceDef(
    group="discovery.k8s.io",
    version="v1",
    kind="EndpointSlice",
    plural="endpointslices",
    singular="endpointslice",
    namespaced=True,
    default=default,
    validate=validate,
    columns=(
        Column("AddressType", description="addressType specifies the type of address carried by this EndpointSlice."),
        Column(
            "Ports", description="ports specifies the list of network ports exposed by each endpoint in this slice."
        ),
        Column("Endpoints", description="endpoints is a list of unique endpoints in this slice."),
    ),
    row=row,
)
