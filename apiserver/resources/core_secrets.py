"""core/v1 Secret: sensitive data, base64 in JSON, at most 1 MiB decoded.

`stringData` is write-only: defaulting folds it into `data` (as kube's conversion does), so it is
never stored.  Causes never echo secret contents."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources.base import Column, ResourceDef
from apiserver.resources.core_configmaps import validate_immutable_data
from machinery.objects import Obj, mapping, text

MAX_SIZE = 1024 * 1024
REDACTED = "<secret contents redacted>"

# type -> keys its data must hold
_REQUIRED_KEYS = {
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}


def default(secret: Obj) -> None:
    if not secret.get("type"):
        secret["type"] = "Opaque"
    string_data = secret.get("stringData")
    if isinstance(string_data, dict) and all(isinstance(x, str) for x in string_data.values()):
        data = secret.setdefault("data", {})
        if isinstance(data, dict):
            for k, val in string_data.items():
                data[k] = base64.b64encode(val.encode()).decode()
            del secret["stringData"]


def _decoded_size(field: str, value: str, causes: list[Cause]) -> int:
    try:
        return len(base64.b64decode(value.replace("\n", "").replace("\r", ""), validate=True))
    except (binascii.Error, ValueError) as exc:
        causes.append(Cause("FieldValueInvalid", f'Invalid value: "{REDACTED}": illegal base64 data ({exc})', field))
        return 0


def validate(secret: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(secret, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    size = 0
    data: dict[str, Any] = v.as_dict(secret.get("data"), "data", causes)
    for k, val in data.items():
        here = v.key("data", k)
        causes += [v.invalid(here, k, m) for m in v.is_config_key(k)]
        if not isinstance(val, str):
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{REDACTED}": must be a base64 string', here))
        else:
            size += _decoded_size(here, val, causes)
    if size > MAX_SIZE:
        causes.append(v.too_long("data", MAX_SIZE))
    kind = secret.get("type")
    if not isinstance(kind, str) or not kind:
        causes.append(v.required("type"))
        kind = ""
    for needed in _REQUIRED_KEYS.get(kind, ()):
        if needed not in data:
            causes.append(v.required(v.key("data", needed)))
    if kind == "kubernetes.io/service-account-token" and not mapping(secret, "metadata.annotations").get(
        "kubernetes.io/service-account.name"
    ):
        causes.append(v.required("metadata.annotations[kubernetes.io/service-account.name]"))
    if old is not None and kind != text(old, "type"):
        causes.append(v.immutable("type", kind))
    causes += validate_immutable_data(secret, old, ("data",))
    return causes


def fields(secret: Obj) -> dict[str, str]:
    return {"type": text(secret, "type")}


def row(secret: Obj, now: float) -> list[Any]:
    return [text(secret, "type"), len(mapping(secret, "data"))]


RESOURCE = ResourceDef(
    group="",
    version="v1",
    kind="Secret",
    plural="secrets",
    singular="secret",
    namespaced=True,
    bumps_generation=False,
    default=default,
    validate=validate,
    fields=fields,
    field_selectors=("type",),
    columns=(
        Column("Type", description="Used to facilitate programmatic handling of secret data."),
        Column("Data", description="Data contains the secret data."),
    ),
    row=row,
)
