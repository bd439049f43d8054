"""The admission contract: what a plugin sees of a write, and the chain that runs plugins.

Order, as in kube-apiserver: the resource's defaulting, then every mutating plugin (which
may change the object), then the resource's validation, then every validating plugin (which
may only refuse, with a StatusError).  Plugins see creates, updates (with the stored object)
and deletes, and connects (exec, attach, port-forward: the object is the request's options,
PodExecOptions and the like, and nothing is stored); a plugin says which requests concern it,
so the chain skips it cheaply otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from apiserver.auth.user import User
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


@dataclass(slots=True)
class AdmissionRequest:
    operation: Operation
    resource: ResourceDef
    subresource: str  # "" for the main resource
    namespace: str | None
    name: str
    user: User
    object: Obj | None  # what will be stored (None for a delete; a connect's options); mutating plugins change it
    old_object: Obj | None  # what is stored now (None for a create)
    dry_run: bool = False


def is_pod_create(request: AdmissionRequest) -> bool:
    """A new pod in a namespace: what the pod plugins (LimitRanger, ServiceAccount) act on."""
    return (
        request.operation == "CREATE"
        and request.resource.group == ""
        and request.resource.plural == "pods"
        and not request.subresource
        and bool(request.namespace)
    )


class MutatingPlugin(Protocol):
    name: str

    def handles(self, request: AdmissionRequest) -> bool: ...

    async def admit(self, request: AdmissionRequest) -> None: ...


class ValidatingPlugin(Protocol):
    name: str

    def handles(self, request: AdmissionRequest) -> bool: ...

    async def validate(self, request: AdmissionRequest) -> None: ...


class AdmissionChain:
    """The plugins in order; the server assembles it from config (see `assembly`)."""

    def __init__(self, mutating: Sequence[MutatingPlugin] = (), validating: Sequence[ValidatingPlugin] = ()) -> None:
        self.mutating = tuple(mutating)
        self.validating = tuple(validating)

    async def admit(self, request: AdmissionRequest) -> None:
        for plugin in self.mutating:
            if plugin.handles(request):
                await plugin.admit(request)

    async def validate(self, request: AdmissionRequest) -> None:
        for plugin in self.validating:
            if plugin.handles(request):
                await plugin.validate(request)

    async def close(self) -> None:
        """Release what plugins hold (the webhook plugins' HTTP sessions); the server calls it on stop."""
        for plugin in {id(p): p for p in (*self.mutating, *self.validating)}.values():
            close = getattr(plugin, "close", None)
            if close is not None:
                await close()

    def names(self) -> list[str]:
        return [p.name for p in self.mutating] + [p.name for p in self.validating]


NO_ADMISSION = AdmissionChain()
