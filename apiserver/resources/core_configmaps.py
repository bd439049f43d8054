"""core/v1 ConfigMap: configuration as string (and binary) data, at most 1 MiB in all."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources.base import Column, ResourceDef
from machinery.objects import Obj, mapping

MAX_SIZE = 1024 * 1024


def validate_immutable_data(new: Obj, old: Obj | None, data_fields: tuple[str, ...]) -> list[Cause]:
    """Once `immutable: true` is stored, the data may not change and the flag may not be unset."""
    if old is None or old.get("immutable") is not True:
        return []
    causes: list[Cause] = []
    if new.get("immutable") is not True:
        causes.append(v.forbidden("immutable", "field is immutable when `immutable` is set"))
    for f in data_fields:
        if new.get(f) != old.get(f):
            causes.append(v.forbidden(f, "field is immutable when `immutable` is set"))
    return causes


def validate(cm: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(cm, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    size = 0
    data = v.map_of_strings(cm.get("data"), "data", causes)
    for k, val in data.items():
        causes += [v.invalid(v.key("data", k), k, m) for m in v.is_config_key(k)]
        size += len(val.encode())
    binary = v.map_of_strings(cm.get("binaryData"), "binaryData", causes)
    for k, val in binary.items():
        causes += [v.invalid(v.key("binaryData", k), k, m) for m in v.is_config_key(k)]
        if k in data:
            causes.append(v.duplicate(v.key("binaryData", k), k))
        size += len(val) * 3 // 4
    if size > MAX_SIZE:
        causes.append(v.too_long("", MAX_SIZE))
    immutable = cm.get("immutable")
    if immutable is not None and not isinstance(immutable, bool):
        causes.append(v.invalid("immutable", immutable, "must be a boolean"))
    causes += validate_immutable_data(cm, old, ("data", "binaryData"))
    return causes


def row(cm: Obj, now: float) -> list[Any]:
    return [len(mapping(cm, "data")) + len(mapping(cm, "binaryData"))]


RESOURCE = ResourceDef(
    group="",
    version="v1",
    kind="ConfigMap",
    plural="configmaps",
    singular="configmap",
    namespaced=True,
    short_names=("cm",),
    bumps_generation=False,
    validate=validate,
    columns=(
        Column(
            "Data",
            description="Data contains the configuration data. Each key must consist of alphanumeric characters, "
            "'-', '_' or '.'.",
        ),
    ),
    row=row,
)
