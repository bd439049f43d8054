"""core/v1 Node: a machine the kubelet registers; `Ready` from its conditions, cordoned by
`spec.unschedulable`."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.age import since
from apiserver.errors import Cause
from apiserver.http.subresources.kubelet import NodeProxyHandler
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._podspec import TAINT_EFFECTS
from apiserver.resources._shared import ensure
from apiserver.resources.base import Column, ResourceDef, Subresource
from apiserver.table import AGE_COLUMN
from machinery.objects import Obj, dicts, get, mapping, text

# NodeStatus's members that are structs with members that are not omitempty: kube's JSON has
# them on every node, zero-valued until the kubelet reports
NODE_STATUS: dict[str, Any] = {
    "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
    "nodeInfo": dict.fromkeys(
        (
            "machineID",
            "systemUUID",
            "bootID",
            "kernelVersion",
            "osImage",
            "containerRuntimeVersion",
            "kubeletVersion",
            "kubeProxyVersion",
            "operatingSystem",
            "architecture",
        ),
        "",
    ),
}
ADDRESS_TYPES = ("Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS")


def default(node: Obj) -> None:
    status = ensure(node, "status")
    if status is not None and isinstance(status.get("capacity"), dict) and "allocatable" not in status:
        status["allocatable"] = dict(status["capacity"])


def validate(node: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(node, namespaced=False, name_fn=v.name_is_dns_subdomain, old=old)
    spec = v.as_dict(node.get("spec"), "spec", causes)
    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and not isinstance(unschedulable, bool):
        causes.append(v.invalid("spec.unschedulable", unschedulable, "must be a boolean"))
    for i, taint in enumerate(v.as_list(spec.get("taints"), "spec.taints", causes)):
        here = v.index("spec.taints", i)
        taint = v.as_dict(taint, here, causes)
        taint_key = taint.get("key")
        if not taint_key:
            causes.append(v.required(v.child(here, "key")))
        elif isinstance(taint_key, str):
            causes += [v.invalid(v.child(here, "key"), taint_key, m) for m in v.is_qualified_name(taint_key)]
        value = taint.get("value")
        if isinstance(value, str) and value:
            causes += [v.invalid(v.child(here, "value"), value, m) for m in v.is_label_value(value)]
        causes += v.validate_enum(taint.get("effect"), v.child(here, "effect"), TAINT_EFFECTS, optional=False)
    status = v.as_dict(node.get("status"), "status", causes)
    for i, addr in enumerate(v.as_list(status.get("addresses"), "status.addresses", causes)):
        here = v.index("status.addresses", i)
        addr = v.as_dict(addr, here, causes)
        causes += v.validate_enum(addr.get("type"), v.child(here, "type"), ADDRESS_TYPES, optional=False)
        if not addr.get("address"):
            causes.append(v.required(v.child(here, "address")))
    return causes


def fields(node: Obj) -> dict[str, str]:
    return {"spec.unschedulable": "true" if get(node, "spec.unschedulable") is True else "false"}


def status_text(node: Obj) -> str:
    """`Ready`, `NotReady` or `Unknown` (no Ready condition), then `,SchedulingDisabled` if cordoned."""
    parts: list[str] = []
    ready = next((c for c in dicts(node, "status.conditions") if text(c, "type") == "Ready"), None)
    if ready is not None:
        parts.append("Ready" if text(ready, "status") == "True" else "NotReady")
    else:
        parts.append("Unknown")
    if get(node, "spec.unschedulable") is True:
        parts.append("SchedulingDisabled")
    return ",".join(parts)


def roles(node: Obj) -> str:
    found: set[str] = set()
    for k, val in mapping(node, "metadata.labels").items():
        if k.startswith("node-role.kubernetes.io/") and k != "node-role.kubernetes.io/":
            found.add(k.removeprefix("node-role.kubernetes.io/"))
        elif k == "kubernetes.io/role" and isinstance(val, str) and val:
            found.add(val)
    return ",".join(sorted(found)) or "<none>"


def _address(node: Obj, kind: str) -> str:
    return next((text(a, "address") for a in dicts(node, "status.addresses") if text(a, "type") == kind), "<none>")


def row(node: Obj, now: float) -> list[Any]:
    info = mapping(node, "status.nodeInfo")
    return [
        status_text(node),
        roles(node),
        since(get(node, "metadata.creationTimestamp"), now),
        text(info, "kubeletVersion"),
        _address(node, "InternalIP"),
        _address(node, "ExternalIP"),
        text(info, "osImage") or "<unknown>",
        text(info, "kernelVersion") or "<unknown>",
        text(info, "containerRuntimeVersion") or "<unknown>",
    ]


RESOURCE = ResourceDef(
    group="",
    version="v1",
    kind="Node",
    plural="nodes",
    singular="node",
    namespaced=False,
    empty_status=NODE_STATUS,
    short_names=("no",),
    subresources=(
        Subresource("proxy", "NodeProxyOptions", verbs=("get",), handler=NodeProxyHandler()),
        Subresource("status", "Node", handler=STATUS_VIEW),
    ),
    bumps_generation=False,
    default=default,
    validate=validate,
    fields=fields,
    field_selectors=("spec.unschedulable",),
    columns=(
        Column("Status", description="The status of the node"),
        Column("Roles", description="The roles of the node"),
        AGE_COLUMN,
        Column("Version", description="Kubelet Version reported by the node."),
        Column("Internal-IP", priority=1, description="List of addresses reachable to the node."),
        Column("External-IP", priority=1, description="List of addresses reachable to the node."),
        Column("OS-Image", priority=1, description="OS Image reported by the node from /etc/os-release."),
        Column("Kernel-Version", priority=1, description="Kernel Version reported by the node from 'uname -r'."),
        Column("Container-Runtime", priority=1, description="ContainerRuntime Version reported by the node."),
    ),
    row=row,
    age_last=False,
)
