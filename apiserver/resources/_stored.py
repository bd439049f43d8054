"""A stored kind declared from its published schema: the one way the many built-in kinds whose
server side is "store it, default it, check it" are defined (storage, certificates, flowcontrol,
node, ...), and the shape a CustomResourceDefinition's kind will take.

`stored_kind` turns data (names, scope, subresources, columns, a defaulting function) into a
`ResourceDef` whose validation is ObjectMeta's rules plus the structural check of the kind's
OpenAPI schema (`_schema_check`), and whatever kind-specific rules the caller adds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.http.subresources.handler import SubresourceHandler
from apiserver.http.subresources.object_view import CUSTOM_STATUS_VIEW
from apiserver.http.subresources.scale import ScaleHandler
from apiserver.openapi_schemas import default_source
from apiserver.resources._schema_check import SchemaChecker
from apiserver.resources._shared import selector_string
from apiserver.resources.base import (
    Column,
    DefaultFunc,
    FieldsFunc,
    ResourceDef,
    RowFunc,
    Subresource,
    ValidateFunc,
)
from machinery.objects import Obj, get

NameFunc = Callable[[str, bool], list[str]]


@cache
def _checker(group: str, version: str, kind: str) -> SchemaChecker | None:
    source = default_source()
    name = source.name_for(group, version, kind)
    return SchemaChecker(source, name) if name else None


def _no_default(obj: Obj) -> None:
    return None


def _no_rules(new: Obj, old: Obj | None) -> list[Cause]:
    return []


def scale_selector(obj: Obj) -> str:
    return selector_string(get(obj, "spec.selector"))


def stored_kind(
    *,
    group: str,
    version: str,
    kind: str,
    plural: str,
    namespaced: bool,
    short_names: Sequence[str] = (),
    categories: Sequence[str] = (),
    status: Mapping[str, Any] | None = None,
    status_view: SubresourceHandler = CUSTOM_STATUS_VIEW,
    scale: Callable[[Obj], str] | None = None,
    extra_subresources: Sequence[Subresource] = (),
    columns: Sequence[Column] = (),
    row: RowFunc | None = None,
    default: DefaultFunc = _no_default,
    rules: ValidateFunc = _no_rules,
    name_fn: NameFunc = v.name_is_dns_subdomain,
    immutable: Sequence[str] = (),
    verbs: Sequence[str] | None = None,
    bumps_generation: bool = True,
    age_last: bool = True,
    fields: FieldsFunc | None = None,
    field_selectors: Sequence[str] = (),
    lenient: Sequence[str] = (),
) -> ResourceDef:
    """The ResourceDef of a kind whose structure comes from its schema; `rules` adds what the
    schema cannot say (kube's validation.go), `immutable` the dotted paths fixed once created.
    `status`, when the kind has a /status subresource, is the status every answer carries at
    least: the members of kube's Go status struct that are not omitempty, at their zero values;
    `lenient`: top-level fields below which the schema's required fields are not enforced.
    `status_view` serves it: a custom resource's (only status from the request) unless the kind
    says otherwise, as a built-in kind does (STATUS_VIEW: spec reset, the rest from the request)."""
    subresources: list[Subresource] = []
    if scale is not None:
        subresources.append(
            Subresource("scale", "Scale", group="autoscaling", version="v1", handler=ScaleHandler(scale))
        )
    if status is not None:
        subresources.append(Subresource("status", kind, handler=status_view))
    subresources.extend(extra_subresources)

    def validate(obj: Obj, old: Obj | None) -> list[Cause]:
        causes = v.validate_object_meta(obj, namespaced=namespaced, name_fn=name_fn, old=old)
        checker = _checker(group, version, kind)
        misshapen = checker.check(obj, tuple(lenient)) if checker is not None else []
        causes += misshapen
        for path in immutable:
            causes += v.validate_immutable(obj, old, path)
        # a value of the wrong type is where kube's decoding stops: the rules read a decoded object
        return causes if misshapen else causes + rules(obj, old)

    extra: dict[str, Any] = {}
    if verbs is not None:
        extra["verbs"] = tuple(verbs)
    if fields is not None:  # field selectors beyond metadata.name/namespace (kube's *ToSelectableFields)
        extra["fields"] = fields
        extra["field_selectors"] = tuple(field_selectors)
    return ResourceDef(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        short_names=tuple(short_names),
        categories=tuple(categories),
        subresources=tuple(subresources),
        bumps_generation=bumps_generation,
        default=default,
        validate=validate,
        columns=tuple(columns),
        row=row,
        age_last=age_last,
        empty_status=status,
        **extra,
    )
