"""networking.k8s.io/v1 NetworkPolicy: which traffic the selected pods accept and send."""

from __future__ import annotations

from typing import Any

from apiserver.resources._shared import ensure, format_label_selector
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, dicts, get


def default(np: Obj) -> None:
    """networking/v1 SetDefaults_NetworkPolicy: ports speak TCP; policyTypes is Ingress, plus
    Egress when egress rules are given."""
    spec = ensure(np, "spec")
    if spec is None:
        return
    for direction in ("ingress", "egress"):
        for rule in dicts(spec, direction):
            for port in dicts(rule, "ports"):
                port.setdefault("protocol", "TCP")
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress", "Egress"] if spec.get("egress") else ["Ingress"]


def row(np: Obj, now: float) -> list[Any]:
    return [format_label_selector(get(np, "spec.podSelector"))]


RESOURCE = stored_kind(
    group="networking.k8s.io",
    version="v1",
    kind="NetworkPolicy",
    plural="networkpolicies",
    namespaced=True,
    short_names=("netpol",),
    default=default,
    columns=(Column("Pod-Selector", description="Selects the pods to which this NetworkPolicy object applies."),),
    row=row,
)
