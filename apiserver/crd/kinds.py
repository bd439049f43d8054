"""The `ResourceDef`s a stored CustomResourceDefinition defines: one per served version.

Every version of a CRD stores its objects in one place, kube's key layout
`/registry/<group>/<plural>/[<namespace>/]<name>`, in the storage version's shape: a version
that is not the storage version converts on the way in and out: kube's `None` strategy (only
apiVersion changes) in the sync hooks, a `Webhook` strategy through the CRD's conversion
webhook (`conversion.py`) in the async ones, which the registry and the watch cache await.

What a version declares becomes the definition's hooks: its schema defaults (on writes and on
reads from storage) and validates, its subresources are served by the same handlers as a
built-in kind's, its additionalPrinterColumns are the Table's columns and its selectableFields
the fields a field selector may name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from apiserver import validation as v
from apiserver.crd import structural
from apiserver.crd.validation_rules import Rules
from apiserver.errors import Cause
from apiserver.http.subresources.object_view import CUSTOM_STATUS_VIEW
from apiserver.http.subresources.scale import ScaleHandler
from apiserver.resources.base import Column, ResourceDef, Subresource
from machinery.objects import Obj

CRD_GROUP = "apiextensions.k8s.io"
_COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")
_STEP = re.compile(r"\.([A-Za-z0-9_$-]+)|\[(\d+)\]")


def json_path_steps(path: str) -> tuple[str | int, ...] | None:
    """`.spec.replicas` or `.status.conditions[0].type` as steps; None for what this simple
    subset of JSONPath does not read (filters, wildcards, unions)."""
    steps: list[str | int] = []
    at = 0
    while at < len(path):
        m = _STEP.match(path, at)
        if m is None:
            return None
        steps.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        at = m.end()
    return tuple(steps) if steps else None


def read_path(obj: Any, steps: tuple[str | int, ...]) -> Any:
    for step in steps:
        if isinstance(step, int):
            obj = obj[step] if isinstance(obj, list) and step < len(obj) else None
        else:
            obj = obj.get(step) if isinstance(obj, dict) else None
        if obj is None:
            return None
    return obj


@dataclass(frozen=True)
class _Printed:
    column: Column
    steps: tuple[str | int, ...] | None


def _columns(version: Mapping[str, Any]) -> list[_Printed]:
    out = []
    for spec in version.get("additionalPrinterColumns") or ():
        if not isinstance(spec, Mapping):
            continue
        kind = spec.get("type") if spec.get("type") in _COLUMN_TYPES else "string"
        column = Column(
            str(spec.get("name", "")),
            str(kind),
            str(spec.get("format") or ""),
            str(spec.get("description") or ""),
            int(spec.get("priority") or 0),
        )
        out.append(_Printed(column, json_path_steps(str(spec.get("jsonPath", "")))))
    return out


def _cell(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind in ("integer", "number", "boolean") or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _field_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def storage_version(crd: Obj) -> str:
    for version in crd["spec"]["versions"]:
        if version.get("storage"):
            return str(version["name"])
    return str(crd["spec"]["versions"][0]["name"])


def schema_of(version: Mapping[str, Any]) -> Mapping[str, Any]:
    schema = (version.get("schema") or {}).get("openAPIV3Schema")
    return schema if isinstance(schema, Mapping) else {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


class Converter(Protocol):
    async def convert(self, objects: Sequence[Obj], desired: str) -> list[Obj]: ...


def served_kinds(crd: Obj, converter: Converter | None = None) -> list[ResourceDef]:
    """The definitions of the CRD's served versions (its spec is valid: it was stored).
    `converter`: the CRD's conversion webhook, when its strategy is Webhook."""
    spec = crd["spec"]
    return [_version_kind(crd, version, converter) for version in spec["versions"] if version.get("served")]


def _version_kind(crd: Obj, version: Mapping[str, Any], converter: Converter | None) -> ResourceDef:
    spec = crd["spec"]
    names = spec["names"]
    group = str(spec["group"])
    name = str(version["name"])
    kind = str(names["kind"])
    namespaced = spec.get("scope") == "Namespaced"
    stored_as = f"{group}/{storage_version(crd)}"
    served_as = f"{group}/{name}"
    schema = schema_of(version)
    defaults = structural.has_defaults(schema)
    rules = Rules.of(schema)

    def to_storage(obj: Obj) -> Obj:
        return {**obj, "apiVersion": stored_as}  # a copy: the caller answers with `obj`

    def from_storage(obj: Obj) -> Obj:
        obj["apiVersion"] = served_as
        if defaults:
            structural.apply_defaults(schema, obj)
        return obj

    def default(obj: Obj) -> None:
        if defaults:
            structural.apply_defaults(schema, obj)

    async def for_serving(objs: list[Obj]) -> list[Obj]:
        assert converter is not None
        out = await converter.convert(objs, served_as)
        if defaults:
            for obj in out:
                structural.apply_defaults(schema, obj)
        return out

    async def for_storage(objs: list[Obj]) -> list[Obj]:
        assert converter is not None
        return await converter.convert(objs, stored_as)

    def validate(obj: Obj, old: Obj | None) -> list[Cause]:
        causes = v.validate_object_meta(obj, namespaced=namespaced, name_fn=v.name_is_dns_subdomain, old=old)
        causes += structural.validate(schema, obj)
        # the CEL rules run on what has the schema's shape (kube skips them otherwise too)
        return causes if causes else rules.validate(obj, old)

    subresources: list[Subresource] = []
    declared = version.get("subresources") or {}
    if isinstance(declared.get("scale"), Mapping):
        selector_steps = json_path_steps(str(declared["scale"].get("labelSelectorPath") or ""))

        def selector(obj: Obj) -> str:
            found = read_path(obj, selector_steps) if selector_steps else None
            return found if isinstance(found, str) else ""

        subresources.append(Subresource("scale", "Scale", "autoscaling", "v1", handler=ScaleHandler(selector)))
    if isinstance(declared.get("status"), Mapping):
        subresources.append(Subresource("status", kind, handler=CUSTOM_STATUS_VIEW))

    printed = _columns(version)

    def row(obj: Obj, now: float) -> list[Any]:
        return [_cell(read_path(obj, p.steps), p.column.type) if p.steps else None for p in printed]

    selectable = [
        (str(f.get("jsonPath", "")).lstrip("."), json_path_steps(str(f.get("jsonPath", ""))))
        for f in version.get("selectableFields") or ()
        if isinstance(f, Mapping)
    ]

    def fields(obj: Obj) -> dict[str, str]:
        return {label: _field_text(read_path(obj, steps)) for label, steps in selectable if steps}

    return ResourceDef(
        group=group,
        version=name,
        kind=kind,
        plural=str(names["plural"]),
        singular=str(names.get("singular") or kind.lower()),
        namespaced=namespaced,
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        subresources=tuple(subresources),
        default=default,
        validate=validate,
        fields=fields,
        field_selectors=tuple(label for label, _ in selectable),
        columns=tuple(p.column for p in printed),
        row=row if printed else None,
        age_last=not printed,
        store_as=f"{group}/{names['plural']}",
        # with a webhook, the sync hooks leave objects as they are and the calls convert them
        to_storage=to_storage if converter is None else None,
        from_storage=from_storage if converter is None else None,
        convert_for_storage=for_storage if converter is not None else None,
        convert_for_serving=for_serving if converter is not None else None,
        openapi_schema=schema,
    )
