"""The persistentvolume controller: claims bound to volumes, local volumes provisioned, volumes
released (kube's PV binder, with a built-in provisioner in place of an external one).

Keys are claims (`namespace/name`) and volumes (`/name`).  A claim:

* bound already: its status says Bound (phase, capacity, access modes), or Lost once its
  volume is gone;
* else the volume `_volume_binding.best_volume` picks is bound to it (the volume's claimRef
  first, then the claim's volumeName and status);
* else, when its class's provisioner is ours (`raftkube.io/local-path`), a volume is made:
  at once for `Immediate` (on the first node announcing a volume directory), for
  `WaitForFirstConsumer` once a pod using the claim is on a node (on that node);
* else it waits, and says so in an event (kube's WaitForFirstConsumer/ProvisioningFailed).

A bound claim asking for more storage than its volume has is expanded (kube's external-resizer,
for our provisioner; a class without `allowVolumeExpansion` never gets that far — admission
refuses the request): the claim says Resizing (allocatedResources, ControllerResizeInProgress),
the volume's capacity grows, then the claim's capacity.  A local volume is a directory, which has
no size to grow and no file system to resize, so the node has nothing to do.  Another
provisioner's volume waits for that provisioner (kube's ExternalExpanding event).

A volume whose claim is gone is Released; a released volume with reclaim policy Delete is
deleted, Retain keeps it.  A local volume's node hears first (its name in the Node's
released-volumes annotation, `machinery/local_volumes`), so its kubelet removes the directory;
while a pod that has not finished still names the deleted claim, the volume waits (kube keeps
such a claim with its pvc-protection finalizer, which raftkube does not have).

At start the cluster gets the default StorageClass `standard` (local-path, WaitForFirstConsumer,
Delete) when it has no default class, as a local cluster's addon would.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from components.client.events import NORMAL, WARNING, reference
from components.client.indexer import NAMESPACE_INDEX
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import AlreadyExistsError, NotFoundError
from components.controllers import _volume_binding as vb
from components.controllers.base import Controller, Requeue
from machinery import local_volumes
from machinery.objects import Obj, metadata, spec, status
from machinery.timestamps import format_time

CLAIMS = Resource("", "v1", "persistentvolumeclaims", kind="PersistentVolumeClaim")
VOLUMES = Resource("", "v1", "persistentvolumes", kind="PersistentVolume")
CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", kind="StorageClass")
PODS = Resource("", "v1", "pods", kind="Pod")
NODES = Resource("", "v1", "nodes", kind="Node")
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
STANDARD: Obj = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "standard", "annotations": {DEFAULT_CLASS_ANNOTATION: "true"}},
    "provisioner": vb.PROVISIONER,
    "reclaimPolicy": "Delete",
    "volumeBindingMode": "WaitForFirstConsumer",
}
VOLUME_PREFIX = "/"
IN_USE_RECHECK_S = 5.0  # a released volume whose claim a running pod still names is looked at again


class PersistentVolumeController(Controller):
    name = "persistentvolume-binder"
    workers = 2

    def setup(self) -> None:
        self.claims = self.factory.informer(CLAIMS)
        self.volumes = self.factory.informer(VOLUMES)
        self.classes = self.factory.informer(CLASSES)
        self.pods = self.factory.informer(PODS)
        self.nodes = self.factory.informer(NODES)
        self.claims.add_handler(
            EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n), on_delete=self._claim_gone)
        )
        self.volumes.add_handler(
            EventHandler(on_add=self._volume, on_update=lambda _o, n: self._volume(n), on_delete=self._volume)
        )
        self.pods.add_handler(EventHandler(on_add=self._pod, on_update=lambda _o, n: self._pod(n)))

    async def prepare(self) -> None:
        found = await self.client.get(CLASSES.path())
        if not any(
            (metadata(sc).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"
            for sc in found.get("items") or ()
        ):
            with contextlib.suppress(AlreadyExistsError):
                await self.client.create(CLASSES.path(), STANDARD)

    def _volume(self, pv: Obj) -> None:
        self.queue.add(VOLUME_PREFIX + str(metadata(pv).get("name")))
        ref = spec(pv).get("claimRef")
        if isinstance(ref, dict):
            self.queue.add(f"{ref.get('namespace')}/{ref.get('name')}")
        else:  # a free volume: every claim still waiting may take it
            for claim in self.claims.indexer.objects():
                if not spec(claim).get("volumeName"):
                    self.enqueue(claim)

    def _claim_gone(self, claim: Obj) -> None:
        """Its volume is released (or deleted) now."""
        name = spec(claim).get("volumeName")
        if name:
            self.queue.add(VOLUME_PREFIX + str(name))

    def _pod(self, pod: Obj) -> None:
        if not spec(pod).get("nodeName"):
            return
        ns = metadata(pod).get("namespace")
        for volume in spec(pod).get("volumes") or ():
            claim = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
            if isinstance(claim, dict) and claim.get("claimName"):
                self.queue.add(f"{ns}/{claim['claimName']}")

    async def reconcile(self, key: str) -> None:
        if key.startswith(VOLUME_PREFIX):
            pv = self.volumes.indexer.get(key[len(VOLUME_PREFIX) :])
            if pv is not None:
                await self._sync_volume(pv)
            return
        claim = self.claims.indexer.get(key)
        if claim is None or metadata(claim).get("deletionTimestamp"):
            return
        await self._sync_claim(claim)

    # -- claims -------------------------------------------------------------------------------

    async def _sync_claim(self, claim: Obj) -> None:
        bound_to = spec(claim).get("volumeName")
        if bound_to:
            pv = self.volumes.indexer.get(str(bound_to))
            if pv is None:
                await self._claim_status(claim, {"phase": "Lost"})
                return
            ref = spec(pv).get("claimRef") or {}
            if ref.get("uid") in (None, metadata(claim).get("uid")):
                await self._bind(claim, pv)
                if vb.requested(claim) > vb.capacity(pv):
                    await self._expand(claim, pv)
            return
        pv = vb.best_volume(self.volumes.indexer.objects(), claim)
        if pv is not None:
            await self._bind(claim, pv)
            return
        storage_class = self.classes.indexer.get(vb.class_of(claim)) if vb.class_of(claim) else None
        if storage_class is None and vb.class_of(claim):
            # kube's binder says so and the claim waits: the class (or a volume of it) may come
            said = f'storageclass.storage.k8s.io "{vb.class_of(claim)}" not found'
            self.events.record(self._ref(claim), WARNING, "ProvisioningFailed", said)
            return
        if storage_class is None or storage_class.get("provisioner") != vb.PROVISIONER:
            return  # a static volume may come, or another provisioner's
        node = self._node_for(claim, storage_class)
        if node is None:
            if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer":
                said = "waiting for first consumer to be created before binding"
                self.events.record(self._ref(claim), NORMAL, "WaitForFirstConsumer", said)
            else:
                said = "no node announces a local volume directory"
                self.events.record(self._ref(claim), WARNING, "ProvisioningFailed", said)
            return
        body = vb.provisioned(claim, storage_class, node)
        if body is None:
            said = f"node {metadata(node).get('name')} announces no local volume directory"
            self.events.record(self._ref(claim), WARNING, "ProvisioningFailed", said)
            return
        try:
            pv = await self.client.create(VOLUMES.path(), body)
        except AlreadyExistsError:
            pv = await self.client.get(VOLUMES.path(None, metadata(body)["name"]))
        said = f"Successfully provisioned volume {metadata(pv).get('name')}"
        self.events.record(self._ref(claim), NORMAL, "ProvisioningSucceeded", said)
        await self._bind(claim, pv)

    def _node_for(self, claim: Obj, storage_class: Obj) -> Obj | None:
        nodes = sorted(self.nodes.indexer.objects(), key=lambda n: str(metadata(n).get("name")))
        announcing = [n for n in nodes if (metadata(n).get("annotations") or {}).get(vb.VOLUME_DIR_ANNOTATION)]
        if storage_class.get("volumeBindingMode") != "WaitForFirstConsumer":
            return announcing[0] if announcing else None
        name = metadata(claim).get("name")
        for pod in self.pods.indexer.by_index(NAMESPACE_INDEX, str(metadata(claim).get("namespace") or "")):
            node_name = spec(pod).get("nodeName")
            if not node_name or metadata(pod).get("deletionTimestamp"):
                continue
            for volume in spec(pod).get("volumes") or ():
                ref = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
                if isinstance(ref, dict) and ref.get("claimName") == name:
                    return self.nodes.indexer.get(str(node_name))
        return None

    async def _bind(self, claim: Obj, pv: Obj) -> None:
        """The volume's claimRef, then the claim's volumeName, then both statuses."""
        pv_name = str(metadata(pv).get("name"))
        ref = spec(pv).get("claimRef")
        if not isinstance(ref, dict) or ref.get("uid") != metadata(claim).get("uid"):
            # reserved at the version read now: two claims racing for one volume, one wins
            # (a conflict is retried by the queue; the claim is not bound before the volume is)
            fresh = await self.client.get(VOLUMES.path(None, pv_name))
            if not vb.fits(fresh, claim):
                return
            pv = await self.client.replace(
                VOLUMES.path(None, pv_name), {**fresh, "spec": {**spec(fresh), "claimRef": vb.claim_ref(claim)}}
            )
        if (pv.get("status") or {}).get("phase") != "Bound":
            with contextlib.suppress(NotFoundError):
                await self.client.patch(VOLUMES.path(None, pv_name, "status"), {"status": {"phase": "Bound"}})
        m = metadata(claim)
        if spec(claim).get("volumeName") != pv_name:
            annotations = {**(m.get("annotations") or {}), "pv.kubernetes.io/bind-completed": "yes"}
            body = {
                **claim,
                "metadata": {**m, "annotations": annotations},
                "spec": {**spec(claim), "volumeName": pv_name},
            }
            claim = await self.client.replace(CLAIMS.path(m.get("namespace"), m.get("name")), body)
        wanted = {
            "phase": "Bound",
            "accessModes": list(spec(pv).get("accessModes") or ()),
            "capacity": dict(spec(pv).get("capacity") or {}),
        }
        if any(status(claim).get(k) != v for k, v in wanted.items()):
            await self._claim_status(claim, wanted)

    async def _expand(self, claim: Obj, pv: Obj) -> None:
        """The volume grown to the claim's request, then the claim's capacity (see the module)."""
        pv_name = str(metadata(pv).get("name"))
        if (metadata(pv).get("annotations") or {}).get(vb.PROVISIONED_BY) != vb.PROVISIONER:
            said = "waiting for an external controller to expand this PVC"
            self.events.record(self._ref(claim), NORMAL, "ExternalExpanding", said)
            return
        size = str(((spec(claim).get("resources") or {}).get("requests") or {}).get("storage"))
        self.events.record(self._ref(claim), NORMAL, "Resizing", f"External resizer is resizing volume {pv_name}")
        resizing = {"type": "Resizing", "status": "True", "lastTransitionTime": format_time(self.clock.now())}
        await self._claim_status(
            claim,
            {
                "allocatedResources": {"storage": size},
                "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"},
                "conditions": [resizing],
            },
        )
        fresh = await self.client.get(VOLUMES.path(None, pv_name))
        capacity = {**(spec(fresh).get("capacity") or {}), "storage": size}
        await self.client.replace(VOLUMES.path(None, pv_name), {**fresh, "spec": {**spec(fresh), "capacity": capacity}})
        # nothing for the node to do (no file system to grow): the claim has the new size at once
        await self._claim_status(
            claim,
            {
                "capacity": {**status(claim).get("capacity", {}), "storage": size},
                "allocatedResourceStatuses": None,
                "conditions": None,
            },
        )
        self.events.record(self._ref(claim), NORMAL, "VolumeResizeSuccessful", "Resize volume succeeded")

    async def _claim_status(self, claim: Obj, wanted: dict[str, Any]) -> None:
        m = metadata(claim)
        with contextlib.suppress(NotFoundError):
            await self.client.patch(CLAIMS.path(m.get("namespace"), m.get("name"), "status"), {"status": wanted})

    def _ref(self, claim: Obj) -> Any:
        return reference(claim, "v1", "PersistentVolumeClaim")

    # -- volumes ------------------------------------------------------------------------------

    async def _sync_volume(self, pv: Obj) -> None:
        name = str(metadata(pv).get("name"))
        phase = (pv.get("status") or {}).get("phase")
        ref = spec(pv).get("claimRef")
        if not isinstance(ref, dict):
            if phase != "Available":
                with contextlib.suppress(NotFoundError):
                    await self.client.patch(VOLUMES.path(None, name, "status"), {"status": {"phase": "Available"}})
            return
        claim = self.claims.indexer.get(f"{ref.get('namespace')}/{ref.get('name')}")
        if claim is not None and (not ref.get("uid") or metadata(claim).get("uid") == ref.get("uid")):
            return  # bound, or being bound by the claim's key
        if phase == "Bound" or (phase != "Released" and ref.get("uid")):
            with contextlib.suppress(NotFoundError):
                await self.client.patch(VOLUMES.path(None, name, "status"), {"status": {"phase": "Released"}})
            return
        if phase == "Released" and spec(pv).get("persistentVolumeReclaimPolicy") == "Delete":
            if self._still_mounted(ref):
                # kube keeps such a claim (pvc-protection); here its volume waits for the pods,
                # so a deleted claim's directory never goes from under a running container
                raise Requeue(IN_USE_RECHECK_S)
            await self._tell_node(pv)
            with contextlib.suppress(NotFoundError):
                await self.client.delete(VOLUMES.path(None, name))

    def _still_mounted(self, ref: Obj) -> bool:
        """Whether a pod that has not finished still names the (deleted) claim as a volume."""
        namespace, claim = str(ref.get("namespace") or ""), ref.get("name")
        for pod in self.pods.indexer.by_index(NAMESPACE_INDEX, namespace):
            if status(pod).get("phase") in ("Succeeded", "Failed"):
                continue
            for volume in spec(pod).get("volumes") or ():
                used = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
                if isinstance(used, dict) and used.get("claimName") == claim:
                    return True
        return False

    async def _tell_node(self, pv: Obj) -> None:
        """A local volume's name added to its node's released list (at the node's version read:
        a conflict retries), so the kubelet removes its directory once the volume is gone."""
        name = str(metadata(pv).get("name"))
        node = self.nodes.indexer.get(vb.node_of(pv) or "")
        if node is None or not vb.is_local_directory(pv, node):
            return  # not ours, or its node is gone with the directory
        annotations = metadata(node).get("annotations") or {}
        names = local_volumes.released(annotations)
        if name in names:
            return
        if len(names) >= local_volumes.MAX_RELEASED:
            raise Requeue(30.0)  # the node has not caught up: the volume waits
        value = json.dumps([*names, name])
        patch = {
            "metadata": {
                "resourceVersion": metadata(node).get("resourceVersion"),
                "annotations": {local_volumes.RELEASED_ANNOTATION: value},
            }
        }
        await self.client.patch(NODES.path(None, str(metadata(node).get("name"))), patch)
