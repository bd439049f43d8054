"""NamespaceLifecycle: nothing is created in a namespace that does not exist or is being
deleted, and the namespaces every cluster relies on cannot be deleted.

As kube words it: 404 `namespaces "x" not found` for a missing namespace; 403 `pods "p" is
forbidden: unable to create new content in namespace x because it is being terminated`
(with a NamespaceTerminating cause); 403 `namespaces "default" is forbidden: this namespace
may not be deleted`.  The namespace is read from the watch cache, and from storage when the
cache does not have it, or when this server deleted it a moment ago (the cache may still
say Active), as kube's plugin does.
"""

from __future__ import annotations

from collections.abc import Callable

from apiserver import errors
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.namespaces import NamespaceReader, ObjectCache, live
from apiserver.admission.refusal import forbidden

IMMORTAL = frozenset({"default", "kube-system", "kube-public"})
FORCE_LIVE_SECONDS = 30.0  # how long after a delete the cache is not trusted to say Active
_MAX_REMEMBERED = 10_000


class NamespaceLifecycle:
    name = "NamespaceLifecycle"

    def __init__(
        self,
        cache: ObjectCache | None,
        registry: NamespaceReader | None,
        clock: Callable[[], float],
        immortal: frozenset[str] = IMMORTAL,
    ) -> None:
        self._cache = cache
        self._registry = registry
        self._clock = clock
        self._immortal = immortal
        self._deleted: dict[str, float] = {}  # namespace -> when this server was asked to delete it

    def handles(self, request: AdmissionRequest) -> bool:
        if request.resource.group == "" and request.resource.plural == "namespaces":
            return request.operation == "DELETE"
        return request.resource.namespaced and bool(request.namespace)

    async def admit(self, request: AdmissionRequest) -> None:
        """Creates and updates: the namespace must exist, and a create needs it Active."""
        if request.operation == "DELETE" or not request.namespace:
            return
        namespace = request.namespace
        found = self._cache.get_object(None, namespace) if self._cache is not None else None
        if found is None or (_phase(found) == "Active" and self._recently_deleted(namespace)):
            found = await live(self._registry, namespace)
        if found is None:
            raise errors.not_found("namespaces", namespace)
        if request.operation == "CREATE" and _phase(found) == "Terminating":
            raise forbidden(
                request,
                f"unable to create new content in namespace {namespace} because it is being terminated",
                [
                    {
                        "reason": "NamespaceTerminating",
                        "message": f"namespace {namespace} is being terminated",
                        "field": "metadata.namespace",
                    }
                ],
            )

    async def validate(self, request: AdmissionRequest) -> None:
        """Namespace deletes: the immortal ones are refused; the others remembered for a while."""
        if request.operation != "DELETE" or request.resource.plural != "namespaces":
            return
        if request.name in self._immortal:
            raise forbidden(request, "this namespace may not be deleted")
        now = self._clock()
        if len(self._deleted) >= _MAX_REMEMBERED:
            self._deleted = {n: t for n, t in self._deleted.items() if now - t < FORCE_LIVE_SECONDS}
        self._deleted[request.name] = now

    def _recently_deleted(self, namespace: str) -> bool:
        when = self._deleted.get(namespace)
        if when is None:
            return False
        if self._clock() - when >= FORCE_LIVE_SECONDS:
            del self._deleted[namespace]
            return False
        return True


def _phase(ns: dict[str, object]) -> str:
    status = ns.get("status")
    return str(status.get("phase", "")) if isinstance(status, dict) else ""
