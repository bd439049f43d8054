"""coordination.k8s.io/v1 Lease: node heartbeats and leader election."""

from __future__ import annotations

from typing import Any

from apiserver import validation as v
from apiserver.errors import Cause
from apiserver.resources.base import Column, ResourceDef
from machinery.objects import Obj, mapping, text


def validate(lease: Obj, old: Obj | None) -> list[Cause]:
    causes = v.validate_object_meta(lease, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    spec = v.as_dict(lease.get("spec"), "spec", causes)
    causes += v.validate_positive(spec.get("leaseDurationSeconds"), "spec.leaseDurationSeconds")
    causes += v.validate_non_negative(spec.get("leaseTransitions"), "spec.leaseTransitions")
    holder = spec.get("holderIdentity")
    if holder is not None and not isinstance(holder, str):
        causes.append(v.invalid("spec.holderIdentity", holder, "must be a string"))
    return causes


def row(lease: Obj, now: float) -> list[Any]:
    return [text(mapping(lease, "spec"), "holderIdentity")]


RESOURCE = ResourceDef(
    group="coordination.k8s.io",
    version="v1",
    kind="Lease",
    plural="leases",
    singular="lease",
    namespaced=True,
    bumps_generation=False,
    validate=validate,
    columns=(Column("Holder", description="holderIdentity contains the identity of the holder of a current lease."),),
    row=row,
)
