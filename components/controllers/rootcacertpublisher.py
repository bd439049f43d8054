"""The root-ca-cert-publisher: every active namespace has the ConfigMap `kube-root-ca.crt`.

Its `ca.crt` is the PEM of the CA that signs the apiserver's serving certificate, so a pod
(through the projected volume ServiceAccount admission gives it) can verify the apiserver.
Keys are namespace names.  A namespace added, or its ConfigMap deleted or changed, is
reconciled: a missing ConfigMap is created, one whose data or description differs is put back
(its data replaced whole, as kube does).  A terminating namespace gets nothing."""

from __future__ import annotations

from components.client.informer import EventHandler, InformerFactory
from components.client.listwatch import Resource
from components.client.rest import AlreadyExistsError, ForbiddenError, NotFoundError, RestClient
from components.controllers._infra_namespace import active
from components.controllers.base import Controller
from machinery import objects
from machinery.clock import Clock
from machinery.objects import Obj

NAMESPACES = Resource("", "v1", "namespaces", namespaced=False, kind="Namespace")
CONFIG_MAPS = Resource("", "v1", "configmaps", kind="ConfigMap")
CONFIG_MAP = "kube-root-ca.crt"
CA_KEY = "ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints"
    " such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across"
    " distributions of Kubernetes clusters."
)


class RootCACertPublisher(Controller):
    name = "root-ca-cert-publisher"

    def __init__(
        self,
        client: RestClient,
        factory: InformerFactory,
        *,
        clock: Clock | None = None,
        root_ca: bytes | None = None,
    ) -> None:
        """`root_ca` (PEM) defaults to the CA this client trusts the apiserver by (kube's default
        when --root-ca-file is not given); ValueError when there is neither."""
        ca = root_ca if root_ca is not None else client.config.ca_data
        if not ca:
            raise ValueError(f"{self.name}: no root CA to publish (give --root-ca-file, or a kubeconfig with a CA)")
        self.root_ca = ca.decode("ascii")
        super().__init__(client, factory, clock=clock)

    def setup(self) -> None:
        self.namespaces = self.factory.informer(NAMESPACES)
        # only the ConfigMaps we own: every other one is none of our business (and could be many)
        self.config_maps = self.factory.informer(CONFIG_MAPS, field_selector=f"metadata.name={CONFIG_MAP}")
        self.namespaces.add_handler(EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n)))
        self.config_maps.add_handler(
            EventHandler(
                on_add=self._config_map, on_update=lambda _o, n: self._config_map(n), on_delete=self._config_map
            )
        )

    def _config_map(self, cm: Obj) -> None:
        namespace = (cm.get("metadata") or {}).get("namespace")
        if namespace:
            self.queue.add(str(namespace))

    def _wanted(self, cm: Obj) -> bool:
        annotations = objects.annotations(cm)
        return cm.get("data") == {CA_KEY: self.root_ca} and annotations.get(DESCRIPTION_ANNOTATION) == DESCRIPTION

    async def reconcile(self, key: str) -> None:
        if not active(self.namespaces.indexer.get(key)):
            return
        cm = self.config_maps.indexer.get(f"{key}/{CONFIG_MAP}")
        if cm is not None and self._wanted(cm):
            return
        try:
            if cm is None:
                body: Obj = {
                    "metadata": {"name": CONFIG_MAP, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                    "data": {CA_KEY: self.root_ca},
                }
                await self.client.create(CONFIG_MAPS.path(key), body)
            else:
                meta = dict(cm.get("metadata") or {})
                meta["annotations"] = {**(meta.get("annotations") or {}), DESCRIPTION_ANNOTATION: DESCRIPTION}
                # resourceVersion stays: an edit since our informer saw it is a 409, and a fresh look
                await self.client.replace(
                    CONFIG_MAPS.path(key, CONFIG_MAP), {**cm, "metadata": meta, "data": {CA_KEY: self.root_ca}}
                )
        except AlreadyExistsError:
            pass  # the informer had not seen it yet; its add event brings the key back if it is wrong
        except (NotFoundError, ForbiddenError) as e:
            # the namespace (or the ConfigMap we meant to replace) went away, or the namespace began
            # terminating: a gone ConfigMap's delete event brings the key back
            if "being terminated" in e.message or isinstance(e, NotFoundError):
                return
            raise
