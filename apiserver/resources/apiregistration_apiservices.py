"""apiregistration.k8s.io/v1 APIService: which server serves a group-version.

Stored and validated as kube-aggregator does: the name is `<version>.<group>` (`v1.` for the core
group, so a path segment rather than a DNS subdomain), priorities in range, a service reference
complete, a CA bundle or skipping TLS verification but not both.  The aggregator package proxies
a remote group-version to its service and keeps the Local ones (`local_apiservices`).
"""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj

MAX_GROUP_PRIORITY = 20000
MAX_VERSION_PRIORITY = 1000


def default(svc: Obj) -> None:
    """apiregistration/v1 SetDefaults_ServiceReference: port 443."""
    service = (svc.get("spec") or {}).get("service") if isinstance(svc.get("spec"), dict) else None
    if isinstance(service, dict):
        service.setdefault("port", 443)


def rules(svc: Obj, old: Obj | None) -> list[Cause]:
    """ValidateAPIService."""
    causes: list[Cause] = []
    spec = svc.get("spec")
    if not isinstance(spec, dict):
        return [v.required("spec")]
    group, version = spec.get("group") or "", spec.get("version")
    if not isinstance(version, str) or not version:
        causes.append(v.required("spec.version"))
    else:
        causes.extend(v.invalid("spec.version", version, m) for m in v.is_dns1035_label(version))
        name = (svc.get("metadata") or {}).get("name")
        if name != f"{version}.{group}":
            causes.append(
                v.invalid("metadata.name", name, f'must be `spec.version+"."+spec.group`: "{version}.{group}"')
            )
    if group:
        causes.extend(v.invalid("spec.group", group, m) for m in v.is_dns1123_subdomain(str(group)))
    group_priority = spec.get("groupPriorityMinimum")
    if not v.is_int(group_priority) or not 0 < group_priority <= MAX_GROUP_PRIORITY:
        causes.append(
            v.invalid("spec.groupPriorityMinimum", group_priority, f"must be between 1 and {MAX_GROUP_PRIORITY}")
        )
    version_priority = spec.get("versionPriority")
    if not v.is_int(version_priority) or not 0 < version_priority <= MAX_VERSION_PRIORITY:
        causes.append(
            v.invalid("spec.versionPriority", version_priority, f"must be between 1 and {MAX_VERSION_PRIORITY}")
        )
    service = spec.get("service")
    if service is None:
        if spec.get("caBundle"):
            causes.append(v.invalid("spec.caBundle", "", "local APIServices may not have a caBundle"))
        if spec.get("insecureSkipTLSVerify"):
            causes.append(
                v.invalid("spec.insecureSkipTLSVerify", True, "local APIServices may not have insecureSkipTLSVerify")
            )
    elif isinstance(service, dict):
        for member in ("namespace", "name"):
            if not service.get(member):
                causes.append(v.required(f"spec.service.{member}"))
        if "port" in service:
            causes += v.validate_port(service.get("port"), "spec.service.port")
        if spec.get("insecureSkipTLSVerify") and spec.get("caBundle"):
            causes.append(v.invalid("spec.insecureSkipTLSVerify", True, "may not be true if caBundle is present"))
    return causes


def row(svc: Obj, now: float) -> list[Any]:
    spec = svc.get("spec") or {}
    service = spec.get("service") if isinstance(spec, dict) else None
    where = f"{service.get('namespace')}/{service.get('name')}" if isinstance(service, dict) else "Local"
    available = "Unknown"
    for cond in (svc.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == "Available":
            available = str(cond.get("status"))
            if available != "True" and cond.get("reason"):
                available = f"{available} ({cond.get('reason')})"
    return [where, available]


RESOURCE = stored_kind(
    name_fn=v.name_is_path_segment,  # kube-aggregator's: `v1.` names the core group-version
    group="apiregistration.k8s.io",
    version="v1",
    kind="APIService",
    plural="apiservices",
    namespaced=False,
    categories=("api-extensions",),
    status={},
    status_view=STATUS_VIEW,
    default=default,
    rules=rules,
    columns=(
        Column("Service", description="The service that serves the group-version, or Local."),
        Column("Available", description="Whether the group-version is served."),
    ),
    row=row,
    lenient=("status",),
)
