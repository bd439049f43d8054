"""namespaceSelector and objectSelector, as kube evaluates them.

namespaceSelector: a cluster-scoped object (other than a namespace) always matches; a
namespace object is judged by its own labels (the new object on create/update, the stored
one on delete); anything else by the labels of its namespace, read from the namespaces
watch cache, then from storage when the cache has not seen it yet (kube's lister-then-client
order).  A namespace that does not exist is kube's 404 for it.  objectSelector: the new or
the old object's labels match.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from apiserver import errors
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.webhook.config import Hook
from apiserver.admission.webhook.review import review_namespace
from machinery.objects import Obj, labels

# name -> the namespace object, or None when there is no such namespace
NamespaceLookup = Callable[[str], Awaitable[Obj | None]]


def object_matches(hook: Hook, request: AdmissionRequest) -> bool:
    selector = hook.object_selector
    if selector.empty():
        return True
    return selector.matches(labels(request.object)) or selector.matches(labels(request.old_object))


class NamespaceLabels:
    """The labels namespaceSelectors are judged by, looked up at most once per request."""

    def __init__(self, request: AdmissionRequest, lookup: NamespaceLookup) -> None:
        self._request = request
        self._lookup = lookup
        self._labels: Mapping[str, str] | None = None

    async def get(self) -> Mapping[str, str]:
        if self._labels is None:
            self._labels = await self._find()
        return self._labels

    async def _find(self) -> Mapping[str, str]:
        req = self._request
        if req.resource.group == "" and req.resource.plural == "namespaces" and not req.subresource:
            if req.operation in ("CREATE", "UPDATE"):
                return labels(req.object)
        name = review_namespace(req)
        found = await self._lookup(name)
        if found is None:
            raise errors.not_found("namespaces", name)
        return labels(found)


async def namespace_matches(hook: Hook, request: AdmissionRequest, labels: NamespaceLabels) -> bool:
    if not review_namespace(request):
        return True  # cluster-scoped and not a namespace: never exempted
    if hook.namespace_selector.empty():
        return True
    return hook.namespace_selector.matches(await labels.get())
