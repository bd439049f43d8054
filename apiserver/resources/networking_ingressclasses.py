"""networking.k8s.io/v1 IngressClass: which controller serves the Ingresses that name the class
(`spec.controller`, fixed once created), with an optional reference to its parameters."""

from __future__ import annotations

import re
from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources.base import Column, ResourceDef
from machinery.objects import Obj, get, text

MAX_CONTROLLER = 250
SCOPES = ("Cluster", "Namespace")
_PATH_FMT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_PATH_RE = re.compile(f"^{_PATH_FMT}$")


def default(ic: Obj) -> None:
    params = get(ic, "spec.parameters")
    if isinstance(params, dict):
        params.setdefault("scope", "Cluster")


def _domain_prefixed_path(value: Any, field: str) -> list[Cause]:
    """validation.IsDomainPrefixedPath: `acme.io/foo`."""
    if not value:
        return [v.required(field)]
    if not isinstance(value, str):
        return [v.invalid(field, value, "must be a string")]
    host, _, path = value.partition("/")
    if not host or not path:
        return [v.invalid(field, value, 'must be a domain-prefixed path (such as "acme.io/foo")')]
    causes = [v.invalid(field, host, m) for m in v.is_dns1123_subdomain(host)]
    if not _PATH_RE.match(path):
        causes.append(v.invalid(field, path, f"Invalid path (regex used for validation is '{_PATH_FMT}')"))
    return causes


def _validate_parameters(params: Obj, causes: list[Cause]) -> None:
    field = "spec.parameters"
    for part in ("kind", "name"):
        if not params.get(part):
            causes.append(v.required(v.child(field, part)))
    scope = params.get("scope")
    causes += v.validate_enum(scope, v.child(field, "scope"), SCOPES)
    namespace = params.get("namespace")
    if scope == "Namespace" and not namespace:
        causes.append(v.required(v.child(field, "namespace"), "`parameters.scope` is set to 'Namespace'"))
    if scope == "Cluster" and namespace:
        causes.append(v.forbidden(v.child(field, "namespace"), "`parameters.scope` is set to 'Cluster'"))
    if isinstance(namespace, str) and namespace:
        causes += [v.invalid(v.child(field, "namespace"), namespace, m) for m in v.is_dns1123_label(namespace)]


def validate(ic: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(ic, namespaced=False, name_fn=v.name_is_dns_subdomain, old=old)
    spec = v.as_dict(ic.get("spec"), "spec", causes)
    controller = spec.get("controller")
    if isinstance(controller, str) and len(controller) > MAX_CONTROLLER:
        causes.append(v.too_long("spec.controller", MAX_CONTROLLER))
    causes += _domain_prefixed_path(controller, "spec.controller")
    if spec.get("parameters") is not None:
        _validate_parameters(v.as_dict(spec.get("parameters"), "spec.parameters", causes), causes)
    causes += v.validate_immutable(ic, old, "spec.controller")
    return causes


def row(ic: Obj, now: float) -> list[Any]:
    params = get(ic, "spec.parameters")
    shown = "<none>"
    if isinstance(params, dict):
        group = text(params, "apiGroup")
        shown = text(params, "kind") + (f".{group}" if group else "") + "/" + text(params, "name")
    return [text(ic, "spec.controller"), shown]


RESOURCE = ResourceDef(
    group="networking.k8s.io",
    version="v1",
    kind="IngressClass",
    plural="ingressclasses",
    singular="ingressclass",
    namespaced=False,
    default=default,
    validate=validate,
    columns=(
        Column("Controller", description="Controller that is responsible for handling this class"),
        Column("Parameters", description="A reference to a resource with additional parameters"),
    ),
    row=row,
)
