"""scheduling.k8s.io/v1 PriorityClass: a named pod priority.  `value` and `preemptionPolicy` are
fixed once created, names starting `system-` belong to the two classes Kubernetes defines, and a
user class may not rank above 1000000000 (the system classes live above it)."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.age import since
from apiserver.errors import Cause
from apiserver.resources.base import Column, ResourceDef
from apiserver.table import AGE_COLUMN
from machinery.objects import Obj, get, text

PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")
SYSTEM_PREFIX = "system-"
HIGHEST_USER_PRIORITY = 1_000_000_000
# name -> (value, globalDefault)
SYSTEM_CLASSES = {"system-node-critical": (2_000_001_000, False), "system-cluster-critical": (2_000_000_000, False)}
INT32 = (-(2**31), 2**31 - 1)


def default(pc: Obj) -> None:
    pc.setdefault("preemptionPolicy", "PreemptLowerPriority")


def _system_class_problem(name: str, value: Any, global_default: bool) -> str:
    known = SYSTEM_CLASSES.get(name)
    if known is None:
        return f"{name} is not a known system priority class"
    if value != known[0]:
        return f"value of {name} PriorityClass must be {known[0]}"
    if global_default != known[1]:
        return f"globalDefault of {name} PriorityClass must be {str(known[1]).lower()}"
    return ""


def validate(pc: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(pc, namespaced=False, name_fn=v.name_is_dns_subdomain, old=old)
    value = pc.get("value", 0)
    if not v.is_int(value) or not INT32[0] <= value <= INT32[1]:
        causes.append(v.invalid("value", value, "must be a 32-bit integer"))
    global_default = pc.get("globalDefault", False)
    if not isinstance(global_default, bool):
        causes.append(v.invalid("globalDefault", global_default, "must be a boolean"))
        global_default = False
    name = text(pc, "metadata.name")
    if name.startswith(SYSTEM_PREFIX):
        problem = _system_class_problem(name, value, global_default)
        if problem:
            causes.append(
                v.forbidden(
                    "metadata.name",
                    f"priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. "
                    f"error: {problem}",
                )
            )
    elif v.is_int(value) and value > HIGHEST_USER_PRIORITY:
        causes.append(
            v.forbidden("value", f"maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}")
        )
    causes += v.validate_enum(pc.get("preemptionPolicy"), "preemptionPolicy", PREEMPTION_POLICIES)
    description = pc.get("description")
    if description is not None and not isinstance(description, str):
        causes.append(v.invalid("description", description, "must be a string"))
    if old is not None:
        if pc.get("value", 0) != old.get("value", 0):
            causes.append(v.forbidden("value", "may not be changed in an update."))
        causes += v.validate_immutable(pc, old, "preemptionPolicy")
    return causes


def row(pc: Obj, now: float) -> list[Any]:
    value = get(pc, "value")
    policy = get(pc, "preemptionPolicy")
    return [
        value if v.is_int(value) else 0,
        get(pc, "globalDefault") is True,
        since(get(pc, "metadata.creationTimestamp"), now),
        policy if isinstance(policy, str) else "",
    ]


RESOURCE = ResourceDef(
    group="scheduling.k8s.io",
    version="v1",
    kind="PriorityClass",
    plural="priorityclasses",
    singular="priorityclass",
    namespaced=False,
    short_names=("pc",),
    bumps_generation=False,
    default=default,
    validate=validate,
    columns=(
        Column(
            "Value",
            type="integer",
            description="value represents the integer value of this priority class. This is the actual priority "
            "that pods receive when they have the name of this class in their pod spec.",
        ),
        Column(
            "Global-Default",
            type="boolean",
            description="globalDefault specifies whether this PriorityClass should be considered as the default "
            "priority for pods that do not have any priority class. Only one PriorityClass can be marked as "
            "`globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set "
            "to true, the smallest value of such global default PriorityClasses will be used as the default priority.",
        ),
        AGE_COLUMN,
        Column(
            "PreemptionPolicy",
            description="preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, "
            "PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
        ),
    ),
    row=row,
    age_last=False,
)
