"""networking.k8s.io/v1 ServiceCIDR (GA in 1.33): a range Service ClusterIPs are allocated from."""

from __future__ import annotations

from typing import Any

from apiserver.http.subresources.object_view import STATUS_VIEW
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, get


def row(cidr: Obj, now: float) -> list[Any]:
    cidrs = get(cidr, "spec.cidrs")
    return [",".join(str(c) for c in cidrs) if isinstance(cidrs, list) and cidrs else "<none>"]


RESOURCE = stored_kind(
    group="networking.k8s.io",
    version="v1",
    kind="ServiceCIDR",
    plural="servicecidrs",
    namespaced=False,
    status={},
    status_view=STATUS_VIEW,
    columns=(Column("CIDRs", description="The CIDRs of the range."),),
    row=row,
)
