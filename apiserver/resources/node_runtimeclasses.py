"""node.k8s.io/v1 RuntimeClass: a container runtime configuration pods may ask for by name."""

from __future__ import annotations

from typing import Any

from apiserver.resources._stored import stored_kind
from apiserver.resources.base import Column
from machinery.objects import Obj, text


def row(rc: Obj, now: float) -> list[Any]:
    return [text(rc, "handler")]


RESOURCE = stored_kind(
    group="node.k8s.io",
    version="v1",
    kind="RuntimeClass",
    plural="runtimeclasses",
    namespaced=False,
    immutable=("handler",),
    columns=(Column("Handler", description="The runtime handler the class names."),),
    row=row,
)
