"""The part the endpoints and endpointslice controllers share: keys are services, and a pod's
change enqueues every service in its namespace that selects it (before or after the change)."""

from __future__ import annotations

from components.client.indexer import NAMESPACE_INDEX, key_of
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.controllers._infra_endpoints import selector_of, selects
from components.controllers.base import Controller
from machinery import objects
from machinery.objects import Obj

SERVICES = Resource("", "v1", "services", kind="Service")
PODS = Resource("", "v1", "pods", kind="Pod")


class ServicePodsController(Controller):
    """Subclasses call `super().setup()` and add the informer of what they write."""

    def setup(self) -> None:
        self.services = self.factory.informer(SERVICES)
        self.pods = self.factory.informer(PODS)
        self.services.add_handler(
            EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n), on_delete=self.enqueue)
        )
        self.pods.add_handler(
            EventHandler(
                on_add=lambda p: self._pod_changed(p, None),
                on_update=lambda o, n: self._pod_changed(n, o),
                on_delete=lambda p: self._pod_changed(p, None),
            )
        )

    def _pod_changed(self, pod: Obj, old: Obj | None) -> None:
        namespace = objects.namespace(pod)
        for svc in self.services.indexer.by_index(NAMESPACE_INDEX, namespace):
            sel = selector_of(svc)
            if selects(sel, pod) or (old is not None and selects(sel, old)):
                self.queue.add(key_of(svc))

    def selected_pods(self, service: Obj) -> list[Obj]:
        namespace = objects.namespace(service)
        sel = selector_of(service)
        return [p for p in self.pods.indexer.by_index(NAMESPACE_INDEX, namespace) if selects(sel, p)]
