"""apiextensions.k8s.io/v1 CustomResourceDefinition: a kind defined by storing it.

This module is the CRD object itself: kube's defaults and validation of its spec (names, scope,
versions with exactly one storage version, a structural schema for each, printer columns,
selectable fields, conversion).  Serving the kinds it defines is `apiserver.crd`.

A new CRD gets the finalizer `customresourcecleanup.apiextensions.k8s.io` when created (kube
adds it on the first DELETE; adding it up front gives the same deletion: the CRD stays, marked
Terminating, until its objects are gone) so that deleting a CRD deletes its objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver import validation as v
from apiserver.crd.structural import schema_problems
from apiserver.crd.validation_rules import rule_problems
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj

CLEANUP_FINALIZER = "customresourcecleanup.apiextensions.k8s.io"
SCOPES = ("Cluster", "Namespaced")
CONVERSIONS = ("None", "Webhook")
COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")
COLUMN_FORMATS = ("int32", "int64", "float", "double", "byte", "date", "date-time", "password")


def default(crd: Obj) -> None:
    """apiextensions/v1 SetDefaults_CustomResourceDefinition, and the cleanup finalizer."""
    spec = crd.get("spec")
    if isinstance(spec, dict):
        names = spec.get("names")
        if isinstance(names, dict) and isinstance(names.get("kind"), str):
            names.setdefault("listKind", f"{names['kind']}List")
            names.setdefault("singular", names["kind"].lower())
        conversion = spec.setdefault("conversion", {"strategy": "None"})
        if isinstance(conversion, dict):
            conversion.setdefault("strategy", "None")
    meta = crd.get("metadata")
    if isinstance(meta, dict) and meta.get("deletionTimestamp") is None:
        finalizers = meta.get("finalizers")
        if finalizers is None:
            meta["finalizers"] = [CLEANUP_FINALIZER]
        elif isinstance(finalizers, list) and CLEANUP_FINALIZER not in finalizers:
            finalizers.append(CLEANUP_FINALIZER)


def _dns1035(value: Any, field: str, causes: list[Cause]) -> None:
    if not isinstance(value, str) or not value:
        causes.append(v.required(field))
        return
    causes.extend(v.invalid(field, value, m) for m in v.is_dns1035_label(value))


def _names(names: Any, causes: list[Cause]) -> None:
    field = "spec.names"
    names = v.as_dict(names, field, causes)
    for member in ("plural", "singular"):
        if member == "singular" and not names.get(member):
            continue
        _dns1035(names.get(member), f"{field}.{member}", causes)
    for member in ("kind", "listKind"):
        value = names.get(member)
        if not isinstance(value, str) or not value:
            causes.append(v.required(f"{field}.{member}"))
        else:
            causes.extend(v.invalid(f"{field}.{member}", value, m) for m in v.is_dns1035_label(value.lower()))
    if names.get("kind") and names.get("kind") == names.get("listKind"):
        causes.append(v.invalid(f"{field}.listKind", names.get("listKind"), "kind and listKind may not be the same"))
    for i, short in enumerate(names.get("shortNames") or ()):
        _dns1035(short, f"{field}.shortNames[{i}]", causes)
    for i, category in enumerate(names.get("categories") or ()):
        _dns1035(category, f"{field}.categories[{i}]", causes)


def _columns(version: Mapping[str, Any], field: str, causes: list[Cause]) -> None:
    for i, column in enumerate(version.get("additionalPrinterColumns") or ()):
        at = f"{field}.additionalPrinterColumns[{i}]"
        column = v.as_dict(column, at, causes)
        if not column.get("name"):
            causes.append(v.required(f"{at}.name"))
        if not column.get("type"):
            causes.append(v.required(f"{at}.type"))
        else:
            causes += v.validate_enum(column.get("type"), f"{at}.type", COLUMN_TYPES)
        causes += v.validate_enum(column.get("format") or None, f"{at}.format", COLUMN_FORMATS)
        path = column.get("jsonPath")
        if not isinstance(path, str) or not path:
            causes.append(v.required(f"{at}.jsonPath"))
        elif not path.startswith("."):
            causes.append(v.invalid(f"{at}.jsonPath", path, "must be a simple json path starting with ."))


def _versions(spec: Mapping[str, Any], causes: list[Cause]) -> None:
    field = "spec.versions"
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        causes.append(v.required(field, "must have exactly one version marked as storage version"))
        return
    seen: set[str] = set()
    storage = 0
    for i, version in enumerate(versions):
        at = f"{field}[{i}]"
        version = v.as_dict(version, at, causes)
        name = version.get("name")
        _dns1035(name, f"{at}.name", causes)
        if isinstance(name, str):
            if name in seen:
                causes.append(v.duplicate(f"{at}.name", name))
            seen.add(name)
        storage += version.get("storage") is True
        schema = (
            (version.get("schema") or {}).get("openAPIV3Schema") if isinstance(version.get("schema"), dict) else None
        )
        if not isinstance(schema, Mapping):
            causes.append(v.required(f"{at}.schema.openAPIV3Schema", "schemas are required"))
        else:
            causes += schema_problems(schema, f"{at}.schema.openAPIV3Schema")
            causes += rule_problems(schema, f"{at}.schema.openAPIV3Schema")
        _columns(version, at, causes)
        for j, selectable in enumerate(version.get("selectableFields") or ()):
            path = selectable.get("jsonPath") if isinstance(selectable, dict) else None
            if not isinstance(path, str) or not path.startswith("."):
                causes.append(v.required(f"{at}.selectableFields[{j}].jsonPath", "must be a simple json path"))
    if storage != 1:
        causes.append(v.invalid(field, versions, "must have exactly one version marked as storage version"))
    if not any(isinstance(x, dict) and x.get("served") is True for x in versions):
        causes.append(v.invalid(field, versions, "must have at least one version marked as served"))


def _conversion(spec: Mapping[str, Any], causes: list[Cause]) -> None:
    conversion = spec.get("conversion")
    if not isinstance(conversion, dict):
        return
    strategy = conversion.get("strategy")
    causes += v.validate_enum(strategy, "spec.conversion.strategy", CONVERSIONS, optional=False)
    if strategy == "Webhook":
        webhook = conversion.get("webhook")
        if not isinstance(webhook, dict) or not isinstance(webhook.get("clientConfig"), dict):
            causes.append(
                v.required("spec.conversion.webhook.clientConfig", "required when strategy is set to Webhook")
            )
        elif not (webhook.get("conversionReviewVersions") or []):
            causes.append(v.required("spec.conversion.webhook.conversionReviewVersions"))
    elif conversion.get("webhook") is not None:
        causes.append(v.forbidden("spec.conversion.webhook", "should not be set when strategy is not set to Webhook"))


def rules(crd: Obj, old: Obj | None) -> list[Cause]:
    """ValidateCustomResourceDefinition: the parts its OpenAPI schema cannot say."""
    causes: list[Cause] = []
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [v.required("spec")]
    group = spec.get("group")
    if not isinstance(group, str) or not group:
        causes.append(v.required("spec.group"))
    else:
        causes.extend(v.invalid("spec.group", group, m) for m in v.is_dns1123_subdomain(group))
        if "." not in group:
            causes.append(v.invalid("spec.group", group, "should be a domain with at least one dot"))
    causes += v.validate_enum(spec.get("scope"), "spec.scope", SCOPES, optional=False)
    _names(spec.get("names"), causes)
    plural = (spec.get("names") or {}).get("plural") if isinstance(spec.get("names"), dict) else None
    name = (crd.get("metadata") or {}).get("name")
    if isinstance(plural, str) and isinstance(group, str) and name != f"{plural}.{group}":
        causes.append(v.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    _versions(spec, causes)
    _conversion(spec, causes)
    if old is not None and isinstance(old.get("spec"), dict):
        for member in ("group", "scope"):
            if spec.get(member) != old["spec"].get(member) and member == "group":
                causes.append(v.immutable(f"spec.{member}", spec.get(member)))
    return causes


def row(crd: Obj, now: float) -> list[Any]:
    return [(crd.get("metadata") or {}).get("creationTimestamp")]


RESOURCE = stored_kind(
    group="apiextensions.k8s.io",
    version="v1",
    kind="CustomResourceDefinition",
    plural="customresourcedefinitions",
    namespaced=False,
    short_names=("crd", "crds"),
    categories=("api-extensions",),
    status={"acceptedNames": {"plural": "", "kind": ""}},
    status_view=STATUS_VIEW,  # kube's CRD statusStrategy: spec from the stored object, the rest from the request
    default=default,
    rules=rules,
    lenient=("status",),  # a condition with a message alone is accepted (conformance updates one)
    columns=(Column("Created At", "date", description="the time the definition was created"),),
    row=row,
    age_last=False,
)
