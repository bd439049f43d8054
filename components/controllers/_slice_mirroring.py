"""What the endpointslicemirroring controller writes, computed without I/O (kube's
pkg/controller/endpointslicemirroring reconciler, read for its semantics).

A Service without a selector has its Endpoints written by someone else; this mirrors them into
EndpointSlices so slice readers (the proxy, DNS) see them too.  `plan(service, endpoints,
existing)` says which slices to create, update and delete:

- nothing is mirrored (every existing mirrored slice goes) when the Endpoints or the Service is
  missing, the Service has a selector (the endpointslice controller's business), or the
  Endpoints is labelled `endpointslice.kubernetes.io/skip-mirror: "true"` or is a leader-election
  record;
- the subsets are first repacked as kube's `RepackSubsets` does: an address (ip + targetRef uid)
  appears once per port, not-ready wins over ready, and ports with the same addresses share one
  subset;
- each repacked subset gives one slice per address family (IPv4, IPv6) holding at most
  `max_per_subset` of its addresses, ready ones first; an address that is not an IP is skipped
  and counted (`Plan.invalid`), as are those over the limit (`Plan.skipped`, which includes
  the invalid ones, as upstream's count does);
- a slice is keyed by (address type, port set); an existing slice with that key is updated in
  place (the first, by name; others with the key are deleted), and only when its endpoints,
  labels or annotations differ from what it would be written as, or its owner is an older
  Endpoints of the same name; a new slice with no existing one to reuse takes the name of a
  slice of its family that would be deleted (updated instead), else is created;
- a mirrored slice has the Endpoints' labels plus `kubernetes.io/service-name` and
  `endpointslice.kubernetes.io/managed-by=endpointslicemirroring-controller.k8s.io`, its
  annotations minus `endpoints.kubernetes.io/last-change-trigger-time` and
  `kubectl.kubernetes.io/last-applied-configuration`, and the Endpoints as controller owner.

Input is whatever the informer holds: any shape is read, none raises."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from components.controllers._infra_endpoints import MANAGED_BY_LABEL, SERVICE_NAME_LABEL
from machinery import objects
from machinery.objects import Obj, dicts, mapping, metadata, text

MANAGED_BY = "endpointslicemirroring-controller.k8s.io"
SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror"
LEADER_ANNOTATION = "control-plane.alpha.kubernetes.io/leader"
DROPPED_ANNOTATIONS = (
    "endpoints.kubernetes.io/last-change-trigger-time",
    "kubectl.kubernetes.io/last-applied-configuration",
)
MAX_ENDPOINTS_PER_SUBSET = 1000  # kube's --mirroring-max-endpoints-per-subset default

PortKey = tuple[str, int, str, str | None]  # name, port, protocol, appProtocol
SliceKey = tuple[str, tuple[PortKey, ...]]  # address type, sorted ports
_AddrKey = tuple[str, str]  # ip, targetRef uid


@dataclass
class Plan:
    """Whole slice bodies to create and to update (an update carries the held slice's name and
    resourceVersion), held slices to delete, and what was left out."""

    create: list[Obj] = field(default_factory=list)
    update: list[Obj] = field(default_factory=list)
    delete: list[Obj] = field(default_factory=list)
    invalid: int = 0
    skipped: int = 0

    @property
    def over_limit(self) -> int:
        """Addresses left out for the per-subset limit alone."""
        return self.skipped - self.invalid


def should_mirror(endpoints: Mapping[str, Any] | None) -> bool:
    """Not opted out, and not a leader-election record (old components lock on Endpoints)."""
    if not isinstance(endpoints, Mapping):
        return False
    return objects.labels(endpoints).get(SKIP_MIRROR_LABEL) != "true" and (
        LEADER_ANNOTATION not in objects.annotations(endpoints)
    )


def has_selector(service: Mapping[str, Any]) -> bool:
    """An empty selector is none (kube stores `{}` as absent)."""
    return bool(mapping(objects.spec(service), "selector"))


def mirrored(slice_: Mapping[str, Any]) -> bool:
    return objects.labels(slice_).get(MANAGED_BY_LABEL) == MANAGED_BY


def parse_ip(value: Any) -> tuple[str, str] | None:
    """(canonical text, address type), or None when not an IP.  Leading zeros in IPv4 are read
    as decimal (kube's ParseIPSloppy); an IPv4-mapped IPv6 address is IPv4; zones are refused."""
    if not isinstance(value, str) or "%" in value:
        return None
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address
    try:
        ip = ipaddress.ip_address(value)
    except ValueError:
        parts = value.split(".")
        if len(parts) != 4 or not all(p.isascii() and p.isdigit() and int(p) <= 255 for p in parts):
            return None
        ip = ipaddress.IPv4Address(".".join(str(int(p)) for p in parts))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), "IPv4" if ip.version == 4 else "IPv6"


def port_key(port: Mapping[str, Any]) -> PortKey:
    app = port.get("appProtocol")
    return (
        text(port, "name"),
        objects.number(port, "port"),
        text(port, "protocol") or "TCP",
        app if isinstance(app, str) else None,
    )


def _port_order(p: PortKey) -> tuple[str, int, str, bool, str]:
    return p[0], p[1], p[2], p[3] is not None, p[3] or ""


def port_set(ports: Iterable[PortKey]) -> tuple[PortKey, ...]:
    """The ports in one order, whatever order they came in."""
    return tuple(sorted(ports, key=_port_order))


def slice_key(slice_: Mapping[str, Any]) -> SliceKey:
    return text(slice_, "addressType"), port_set(port_key(p) for p in dicts(slice_, "ports"))


def repack(subsets: Iterable[Any]) -> list[tuple[tuple[PortKey, ...], list[Obj], list[Obj]]]:
    """(ports, ready addresses, not-ready addresses) per distinct address set; a subset with no
    ports contributes its addresses under no port."""
    first: dict[_AddrKey, Obj] = {}
    by_port: dict[PortKey | None, dict[_AddrKey, bool]] = {}
    for subset in subsets:
        if not isinstance(subset, dict):
            continue
        ports: list[PortKey | None] = [port_key(p) for p in dicts(subset, "ports")] or [None]
        for port in ports:
            held = by_port.setdefault(port, {})
            for group, ready in (("addresses", True), ("notReadyAddresses", False)):
                for addr in dicts(subset, group):
                    key = (text(addr, "ip"), text(addr, "targetRef.uid"))
                    first.setdefault(key, addr)
                    if held.get(key, True):  # once not ready, not ready
                        held[key] = ready
    groups: dict[frozenset[tuple[_AddrKey, bool]], list[PortKey]] = {}
    for port, addrs in by_port.items():
        ports_of = groups.setdefault(frozenset(addrs.items()), [])
        if port is not None:
            ports_of.append(port)
    out = []
    for addrs_ready, ports_ in groups.items():
        in_order = sorted(addrs_ready)
        out.append((port_set(ports_), [first[k] for k, r in in_order if r], [first[k] for k, r in in_order if not r]))
    return sorted(out, key=lambda s: [_port_order(p) for p in s[0]])


def to_endpoint(address: Mapping[str, Any], ready: bool) -> tuple[Obj, str] | None:
    """The slice endpoint for an Endpoints address and its address type; None when not an IP."""
    parsed = parse_ip(address.get("ip"))
    if parsed is None:
        return None
    ip, family = parsed
    endpoint: Obj = {"addresses": [ip], "conditions": {"ready": ready}}
    if isinstance(address.get("targetRef"), dict):
        endpoint["targetRef"] = dict(address["targetRef"])
    if text(address, "nodeName"):
        endpoint["nodeName"] = address["nodeName"]
    if text(address, "hostname"):
        endpoint["hostname"] = address["hostname"]
    return endpoint, family


def _identity(endpoint: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two slice endpoints the same one (kube's endpoint hash)."""
    addresses = sorted(a for a in objects.items(endpoint, "addresses") if isinstance(a, str))
    return (
        tuple(addresses),
        text(endpoint, "hostname"),
        text(endpoint, "targetRef.namespace"),
        text(endpoint, "targetRef.name"),
    )


def _same_beyond_identity(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    def ref(e: Mapping[str, Any]) -> Obj:
        return {k: v for k, v in mapping(e, "targetRef").items() if k != "resourceVersion"}

    return (
        all(a.get(f) == b.get(f) for f in ("nodeName", "zone"))
        and all(objects.get(a, f"conditions.{c}") == objects.get(b, f"conditions.{c}") for c in _CONDITIONS)
        and ref(a) == ref(b)
    )


_CONDITIONS = ("ready", "serving", "terminating")


def _port(p: PortKey) -> Obj:
    name, number, protocol, app = p
    out: Obj = {"name": name, "port": number, "protocol": protocol}
    if app is not None:
        out["appProtocol"] = app
    return out


def slice_labels(endpoints: Mapping[str, Any]) -> dict[str, Any]:
    return objects.labels(endpoints) | {SERVICE_NAME_LABEL: objects.name(endpoints), MANAGED_BY_LABEL: MANAGED_BY}


def slice_annotations(endpoints: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in objects.annotations(endpoints).items() if k not in DROPPED_ANNOTATIONS}


def _owner(endpoints: Mapping[str, Any]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "name": objects.name(endpoints),
        "uid": objects.uid(endpoints),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _generate_name(name: str) -> str:
    # `<name>-` unless that would be too long for a name (kube's getEndpointSlicePrefix)
    return f"{name}-" if len(name) < 253 else name


def build_slice(
    endpoints: Mapping[str, Any], key: SliceKey, items: list[Obj], held: Mapping[str, Any] | None = None
) -> Obj:
    """The slice body; with `held`, an update of that slice (its name and resourceVersion kept)."""
    meta: Obj = {
        "namespace": objects.namespace(endpoints),
        "labels": slice_labels(endpoints),
        "annotations": slice_annotations(endpoints),
        "ownerReferences": [_owner(endpoints)],
    }
    if held is not None:
        meta = {**metadata(held), **meta}
    else:
        meta["generateName"] = _generate_name(objects.name(endpoints))
    family, ports = key
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": meta,
        "addressType": family,
        "ports": [_port(p) for p in ports],
        "endpoints": items,
    }


def _up_to_date(endpoints: Mapping[str, Any], held: Mapping[str, Any], want: dict[tuple[Any, ...], Obj]) -> bool:
    matches = 0
    for e in dicts(held, "endpoints"):
        got = want.get(_identity(e))
        if got is None or not _same_beyond_identity(got, e):
            return False
        matches += 1
    if matches != len(want):
        return False
    if objects.labels(held) != slice_labels(endpoints) or objects.annotations(held) != slice_annotations(endpoints):
        return False
    # a recreated Endpoints (same name, new uid) must own its slices
    return not any(
        o.get("kind") == "Endpoints"
        and o.get("name") == objects.name(endpoints)
        and o.get("uid") != objects.uid(endpoints)
        for o in objects.owner_references(held)
    )


def _desired(endpoints: Mapping[str, Any], limit: int, out: Plan) -> dict[SliceKey, dict[tuple[Any, ...], Obj]]:
    """Per slice key the endpoints it should hold, by identity; keys with none are kept (their
    held slices are to go)."""
    want: dict[SliceKey, dict[tuple[Any, ...], Obj]] = {}
    for ports, ready, not_ready in repack(objects.items(endpoints, "subsets")):
        for family in ("IPv4", "IPv6"):
            want.setdefault((family, ports), {})
        added = 0
        for addr, is_ready in [(a, True) for a in ready] + [(a, False) for a in not_ready]:
            if added >= limit:
                break
            made = to_endpoint(addr, is_ready)
            if made is None:
                out.invalid += 1
                continue
            endpoint, family = made
            want[(family, ports)][_identity(endpoint)] = endpoint
            added += 1
        out.skipped += len(ready) + len(not_ready) - added
    return want


def plan(
    service: Mapping[str, Any] | None,
    endpoints: Mapping[str, Any] | None,
    existing: Iterable[Mapping[str, Any]],
    max_per_subset: int = MAX_ENDPOINTS_PER_SUBSET,
) -> Plan:
    """What to write so the mirrored slices `existing` (this Endpoints' own, by label) match."""
    held = sorted((dict(s) for s in existing), key=objects.name)
    if endpoints is None or not should_mirror(endpoints) or not isinstance(service, Mapping) or has_selector(service):
        return Plan(delete=held)
    out = Plan()
    limit = max(max_per_subset, 0)
    want = _desired(endpoints, limit, out)
    held_by_key: dict[SliceKey, list[Obj]] = {}
    for s in held:
        held_by_key.setdefault(slice_key(s), []).append(s)
    for key, items in want.items():
        mine = held_by_key.get(key, [])
        if not items:
            out.delete += mine
            continue
        out.delete += mine[1:]
        if mine and _up_to_date(endpoints, mine[0], items):
            continue
        body = build_slice(endpoints, key, list(items.values())[:limit], mine[0] if mine else None)
        (out.update if mine else out.create).append(body)
    for key, slices in held_by_key.items():
        if key not in want:
            out.delete += slices
    _recycle(out)
    if objects.get(endpoints, "metadata.deletionTimestamp"):
        out.create = []  # a going Endpoints gets no new slices
    return out


def _recycle(out: Plan) -> None:
    """A slice to create takes the name of one of its family to delete: an update, not both."""
    for new in list(out.create):
        family = new.get("addressType")
        old = next((s for s in out.delete if s.get("addressType") == family), None)
        if old is None:
            continue
        out.create.remove(new)
        out.delete.remove(old)
        meta = {k: v for k, v in new["metadata"].items() if k != "generateName"}
        out.update.append({**new, "metadata": {**metadata(old), **meta}})
