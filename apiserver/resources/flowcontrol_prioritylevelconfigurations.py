"""flowcontrol.apiserver.k8s.io/v1 PriorityLevelConfiguration: a share of the apiserver's
concurrency and how requests queue for it (API Priority and Fairness).  Stored and shown."""

from __future__ import annotations

from typing import Any

from apiserver.http.subresources.object_view import status_view
from apiserver.registry.strategy import OBJECT_META
from apiserver.resources._shared import ensure
from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, get, text


def default(plc: Obj) -> None:
    """flowcontrol/v1 SetDefaults_{Limited,Exempt}PriorityLevelConfiguration and _QueuingConfiguration."""
    spec = ensure(plc, "spec")
    if spec is None:
        return
    limited = spec.get("limited")
    if isinstance(limited, dict):
        limited.setdefault("nominalConcurrencyShares", 30)
        limited.setdefault("lendablePercent", 0)
        response = limited.get("limitResponse")
        queuing = response.get("queuing") if isinstance(response, dict) else None
        if isinstance(queuing, dict):
            queuing.setdefault("queues", 64)
            queuing.setdefault("handSize", 8)
            queuing.setdefault("queueLengthLimit", 50)
    exempt = spec.get("exempt")
    if isinstance(exempt, dict):
        exempt.setdefault("nominalConcurrencyShares", 0)
        exempt.setdefault("lendablePercent", 0)


def row(plc: Obj, now: float) -> list[Any]:
    kind = text(plc, "spec.type")
    shares: Any = "<none>"
    queues: Any = "<none>"
    hand: Any = "<none>"
    length: Any = "<none>"
    if kind == "Limited":
        shares = get(plc, "spec.limited.nominalConcurrencyShares")
        queuing = get(plc, "spec.limited.limitResponse.queuing")
        if isinstance(queuing, dict):
            queues, hand, length = queuing.get("queues"), queuing.get("handSize"), queuing.get("queueLengthLimit")
    elif kind == "Exempt":
        shares = get(plc, "spec.exempt.nominalConcurrencyShares")
    return [kind, shares, queues, hand, length]


RESOURCE = stored_kind(
    group="flowcontrol.apiserver.k8s.io",
    version="v1",
    kind="PriorityLevelConfiguration",
    plural="prioritylevelconfigurations",
    namespaced=False,
    status={},
    status_view=status_view(*OBJECT_META),
    default=default,
    columns=(
        Column("Type", description="Whether requests of the level are limited or exempt."),
        Column("NominalConcurrencyShares", description="The level's share of the server's concurrency."),
        Column("Queues", description="The number of queues of the level."),
        Column("HandSize", description="How many queues a flow is shuffle-sharded to."),
        Column("QueueLengthLimit", description="How many requests a queue holds."),
    ),
    row=row,
)
