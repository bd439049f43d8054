"""core/v1 LimitRange: per-namespace bounds and defaults for container, pod and claim resources,
which the LimitRanger admission plugin applies.

Defaulting is kube's (SetDefaults_LimitRangeItem): for `type: Container`, `default` falls back to
`max` and `defaultRequest` to `default`, then to `min`.  Validation orders the bounds as kube does:
min <= defaultRequest <= default <= max, and 1 <= maxLimitRequestRatio <= max/min."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources._resourcelists import (
    NameCheck,
    canonicalize,
    check_container_resource_name,
    check_resource_name,
    resource_list,
)
from apiserver.resources.base import Column, ResourceDef
from machinery.objects import Obj, dicts, mapping, text
from machinery.quantity import Quantity

LIMIT_TYPES = ("Container", "Pod", "PersistentVolumeClaim")  # the types kube's plugins act on
BOUNDS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")
# resources that may not be overcommitted: a default limit must equal the default request
_NO_OVERCOMMIT_PREFIXES = ("hugepages-",)


def _default_item(item: Obj) -> None:
    for key in BOUNDS:
        canonicalize(item, key)
    if item.get("type") != "Container":
        return
    defaults = dict(mapping(item, "default"))
    for name, q in mapping(item, "max").items():
        defaults.setdefault(name, q)
    requests = dict(mapping(item, "defaultRequest"))
    for name, q in defaults.items():
        requests.setdefault(name, q)
    for name, q in mapping(item, "min").items():
        requests.setdefault(name, q)
    if defaults and isinstance(item.get("default", {}), dict):
        item["default"] = defaults
    if requests and isinstance(item.get("defaultRequest", {}), dict):
        item["defaultRequest"] = requests


def default(lr: Obj) -> None:
    for item in dicts(lr, "spec.limits"):
        _default_item(item)


def _is_overcommit_allowed(name: str) -> bool:
    return not name.startswith(_NO_OVERCOMMIT_PREFIXES) and ("/" not in name or name.startswith("kubernetes.io/"))


def _check_pair(
    lists: dict[str, dict[str, Quantity]], name: str, here: str, causes: list[Cause]
) -> None:  # the orderings of ValidateLimitRange, one resource at a time
    mn, mx = lists["min"].get(name), lists["max"].get(name)
    dflt, req = lists["default"].get(name), lists["defaultRequest"].get(name)
    ratio = lists["maxLimitRequestRatio"].get(name)

    def at(bound: str) -> str:
        return v.key(v.child(here, bound), name)

    if mn is not None and mx is not None and mn > mx:
        causes.append(v.invalid(at("min"), str(mn), f"min value {mn} is greater than max value {mx}"))
    if req is not None and mn is not None and mn > req:
        causes.append(
            v.invalid(at("defaultRequest"), str(req), f"min value {mn} is greater than default request value {req}")
        )
    if req is not None and mx is not None and req > mx:
        causes.append(
            v.invalid(at("defaultRequest"), str(req), f"default request value {req} is greater than max value {mx}")
        )
    if req is not None and dflt is not None and req > dflt:
        causes.append(
            v.invalid(
                at("defaultRequest"),
                str(req),
                f"default request value {req} is greater than default limit value {dflt}",
            )
        )
    if dflt is not None and mn is not None and mn > dflt:
        causes.append(v.invalid(at("default"), str(mn), f"min value {mn} is greater than default value {dflt}"))
    if dflt is not None and mx is not None and dflt > mx:
        causes.append(v.invalid(at("default"), str(mx), f"default value {dflt} is greater than max value {mx}"))
    if ratio is not None and ratio.value < 1:
        causes.append(v.invalid(at("maxLimitRequestRatio"), str(ratio), f"ratio {ratio} is less than 1"))
    if ratio is not None and mn is not None and mx is not None and mn.value > 0:
        limit = mx.value / mn.value
        if ratio.value > limit:
            causes.append(
                v.invalid(
                    at("maxLimitRequestRatio"), str(ratio), f"ratio {ratio} is greater than max/min = {float(limit):f}"
                )
            )
    if not _is_overcommit_allowed(name) and dflt is not None and req is not None and dflt != req:
        causes.append(
            v.invalid(
                at("defaultRequest"),
                str(req),
                f"default value {dflt} must equal to defaultRequest value {req} in {name}",
            )
        )


def _validate_item(item: Obj, here: str, seen: set[str], causes: list[Cause]) -> None:
    kind = item.get("type")
    kind_text = kind if isinstance(kind, str) else ""
    causes += [v.invalid(v.child(here, "type"), kind, m) for m in v.is_qualified_name(kind_text)]
    if kind_text in seen:
        causes.append(v.duplicate(v.child(here, "type"), kind_text))
    seen.add(kind_text)
    name_check: NameCheck = check_container_resource_name if kind in ("Pod", "Container") else check_resource_name
    lists: dict[str, dict[str, Quantity]] = {}
    for bound in BOUNDS:
        if kind == "Pod" and bound in ("default", "defaultRequest"):
            lists[bound] = {}
            if item.get(bound):
                causes.append(v.forbidden(v.child(here, bound), "may not be specified when `type` is 'Pod'"))
            continue
        lists[bound] = resource_list(item.get(bound), v.child(here, bound), causes, name_check=name_check)
    if kind == "PersistentVolumeClaim" and "storage" not in lists["min"] and "storage" not in lists["max"]:
        causes.append(
            v.required(
                v.child(here, "limits"), "either minimum or maximum storage value is required, but neither was provided"
            )
        )
    for name in sorted({n for bound in lists.values() for n in bound}):
        _check_pair(lists, name, here, causes)


def validate(lr: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(lr, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    spec = v.as_dict(lr.get("spec"), "spec", causes)
    seen: set[str] = set()
    for i, item in enumerate(v.as_list(spec.get("limits"), "spec.limits", causes)):
        here = v.index("spec.limits", i)
        _validate_item(v.as_dict(item, here, causes), here, seen, causes)
    return causes


def row(lr: Obj, now: float) -> list[Any]:
    """kube prints LimitRanges with its default table: Name and the creation time as a date."""
    return [text(lr, "metadata.creationTimestamp")]


RESOURCE = ResourceDef(
    group="",
    version="v1",
    kind="LimitRange",
    plural="limitranges",
    singular="limitrange",
    namespaced=True,
    short_names=("limits",),
    bumps_generation=False,
    default=default,
    validate=validate,
    columns=(
        Column(
            "Created At",
            type="date",
            description="CreationTimestamp is a timestamp representing the server time when this object was created. "
            "It is not guaranteed to be set in happens-before order across separate operations. Clients may not set "
            "this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null "
            "for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
            "#metadata",
        ),
    ),
    row=row,
    age_last=False,
)
