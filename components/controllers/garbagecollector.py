"""The garbage collector: objects whose owners are gone are deleted; owners deleted in the
foreground wait for their blocking dependents; owners deleted with `orphan` let them go.

It watches every resource the apiserver serves with list, watch and delete (found through
discovery; events excepted, as kube does) and keeps the ownership graph (`_gc_graph`).  Keys
are UIDs.  For an object with owners:
* every owner gone (not in the graph, and a live GET says 404 or another UID) -> delete it
  (background, with a UID precondition, so a re-created namesake is safe);
* some owners gone -> remove just those ownerReferences (a strategic-merge `$patch: delete`).
For an owner being deleted (deletionTimestamp set):
* finalizer `orphan` -> remove its ownerReference from every dependent, then the finalizer;
* finalizer `foregroundDeletion` -> delete every dependent (foreground when it has dependents
  of its own), but one that has another owner alive and not itself waiting for its dependents
  only loses its reference to this one (kube's "solid" owners; conformance "should not delete
  dependents that have both valid owner and owner that's waiting for dependents to be
  deleted"); when no dependent with blockOwnerDeletion is left, remove the finalizer.
  A dependent deleted in the foreground whose own dependents already wait for theirs may close
  a circle (a owns b owns c owns a: each would wait for the next forever), so first its
  ownerReferences stop blocking, as kube's collector does (conformance "should not be blocked
  by dependency circle").
"""

from __future__ import annotations

import contextlib
import logging

from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import ApiError, ConflictError, NotFoundError
from components.controllers._gc_graph import FOREGROUND, ORPHAN, Graph, Node, OwnerRef, dangling_split, owner_refs
from components.controllers.base import Controller, Requeue
from machinery.objects import Obj

RECHECK_S = 0.2
"""How soon an object that changed under a decision is looked at again (its event is on the way)."""
log = logging.getLogger("raftkube.controllers")
IGNORED = {("", "events"), ("events.k8s.io", "events")}
NEEDED_VERBS = {"list", "watch", "delete"}


class GarbageCollector(Controller):
    name = "garbagecollector"
    workers = 4

    def setup(self) -> None:
        self.graph = Graph()
        self.by_kind: dict[tuple[str, str], Resource] = {}  # (group, kind) -> resource

    async def prepare(self) -> None:
        for resource in await self._discover():
            self.by_kind[(resource.group, resource.kind)] = resource
            self.factory.informer(resource).add_handler(self._handler(resource))

    async def _discover(self) -> list[Resource]:
        found: list[Resource] = []
        versions = [("", "v1")]
        groups = (await self.client.get("/apis")).get("groups") or []
        for g in groups:
            preferred = (g.get("preferredVersion") or {}).get("version")
            if isinstance(g.get("name"), str) and isinstance(preferred, str):
                versions.append((g["name"], preferred))
        for group, version in versions:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            try:
                listing = await self.client.get(path)
            except ApiError as e:
                log.warning("garbagecollector: discovery of %s: %s", path, e)
                continue
            for r in listing.get("resources") or []:
                name = r.get("name")
                if not isinstance(name, str) or "/" in name or (group, name) in IGNORED:
                    continue
                if not set(r.get("verbs") or ()) >= NEEDED_VERBS:
                    continue
                found.append(Resource(group, version, name, bool(r.get("namespaced")), str(r.get("kind") or "")))
        return found

    # -- graph upkeep (handlers: quick, no I/O) ---------------------------------------------

    def _handler(self, resource: Resource) -> EventHandler:
        def seen(obj: Obj) -> None:
            self._seen(resource, obj)

        return EventHandler(on_add=seen, on_update=lambda _old, new: seen(new), on_delete=self._gone)

    def _seen(self, resource: Resource, obj: Obj) -> None:
        for uid in self.graph.upsert(resource, obj):
            self.queue.add(uid)

    def _gone(self, obj: Obj) -> None:
        uid = (obj.get("metadata") or {}).get("uid")
        if isinstance(uid, str):
            for affected in self.graph.remove(uid):
                self.queue.add(affected)

    # -- reconcile -------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        node = self.graph.nodes.get(key)
        if node is None:
            return
        if node.deleting:
            if ORPHAN in node.finalizers:
                await self._orphan_dependents(node)
            elif FOREGROUND in node.finalizers:
                await self._delete_dependents(node)
            return
        if not node.owners:
            return
        exists = {o.uid: await self._owner_exists(node, o) for o in node.owners}
        alive, gone = dangling_split(node, exists)
        if not gone:
            return
        if not alive:
            live = await self._live(node)
            if live is None:
                return
            if set(owner_refs(live)) != set(node.owners):
                raise Requeue(after=RECHECK_S)  # its owners changed since the graph saw it: once it catches up
            log.info(
                "garbagecollector: deleting %s %s/%s: its owners are gone",
                node.resource.plural,
                node.namespace or "",
                node.name,
            )
            try:
                await self._delete(node, "Background", str((live.get("metadata") or {}).get("resourceVersion") or ""))
            except ConflictError:
                raise Requeue(after=RECHECK_S) from None  # changed since it was read
        else:
            await self._drop_owner_refs(node, [o.uid for o in gone])

    async def _owner_exists(self, node: Node, owner: OwnerRef) -> bool:
        if owner.uid in self.graph.nodes:
            return True
        group = owner.api_version.rpartition("/")[0]
        resource = self.by_kind.get((group, owner.kind))
        if resource is None:
            return True  # a kind we cannot look up: never collect on a guess
        namespace = node.namespace if resource.namespaced else None
        if resource.namespaced and namespace is None:
            return False  # a cluster-scoped object cannot be owned by a namespaced one
        try:
            live = await self.client.get(resource.path(namespace, owner.name))
        except NotFoundError:
            return False
        return (live.get("metadata") or {}).get("uid") == owner.uid

    async def _delete(self, node: Node, policy: str, resource_version: str = "") -> None:
        """Delete this incarnation of `node` (and, given `resource_version`, only as it was
        read then: a change since, such as a new owner, makes it a 409 and a second look)."""
        preconditions = {"uid": node.uid} | ({"resourceVersion": resource_version} if resource_version else {})
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": policy,
            "preconditions": preconditions,
        }
        with contextlib.suppress(NotFoundError):
            await self.client.delete(node.resource.path(node.namespace, node.name), body)

    async def _drop_owner_refs(self, node: Node, owner_uids: list[str]) -> None:
        patch = {
            "metadata": {
                "uid": node.uid,  # the patch applies to this incarnation only
                "ownerReferences": [{"$patch": "delete", "uid": u} for u in owner_uids],
            }
        }
        with contextlib.suppress(NotFoundError):
            await self.client.patch(node.resource.path(node.namespace, node.name), patch, "strategic")

    def _waits_for_dependents(self, uid: str) -> bool:
        """An owner being deleted in the foreground (not a solid owner: it is going too)."""
        node = self.graph.nodes.get(uid)
        return node is not None and node.deleting and FOREGROUND in node.finalizers

    async def _unblock_owner_refs(self, node: Node) -> None:
        """Every ownerReference of `node` no longer blocks its owner's foreground deletion."""
        patch = {
            "metadata": {
                "uid": node.uid,
                "ownerReferences": [{"uid": o.uid, "blockOwnerDeletion": False} for o in node.owners],
            }
        }
        with contextlib.suppress(NotFoundError):
            await self.client.patch(node.resource.path(node.namespace, node.name), patch, "strategic")

    async def _orphan_dependents(self, owner: Node) -> None:
        for dependent in self.graph.dependents_of(owner.uid):
            await self._drop_owner_refs(dependent, [owner.uid])
        await self._remove_finalizer(owner, ORPHAN)

    async def _live(self, node: Node) -> Obj | None:
        """The object as the apiserver has it now (None: gone, or another incarnation)."""
        try:
            live = await self.client.get(node.resource.path(node.namespace, node.name))
        except NotFoundError:
            return None
        return live if (live.get("metadata") or {}).get("uid") == node.uid else None

    async def _delete_dependents(self, owner: Node) -> None:
        for dependent in self.graph.dependents_of(owner.uid):
            if dependent.deleting:
                continue
            # its owners as they are now, not as the graph last saw them: an owner added a
            # moment ago (conformance adds a second one, then deletes the first in the
            # foreground) must keep it, as kube's attemptToDeleteItem reads the latest object
            live = await self._live(dependent)
            if live is None or (live.get("metadata") or {}).get("deletionTimestamp"):
                continue
            version = str((live.get("metadata") or {}).get("resourceVersion") or "")
            others = [o for o in owner_refs(live) if o.uid != owner.uid]
            alive = {o.uid: await self._owner_exists(dependent, o) for o in others}
            if any(alive[o.uid] and not self._waits_for_dependents(o.uid) for o in others):
                gone = [o.uid for o in others if not alive[o.uid]]
                await self._drop_owner_refs(dependent, [owner.uid, *gone])  # a solid owner keeps it
                continue
            below = self.graph.dependents_of(dependent.uid)
            if any(d.deleting and FOREGROUND in d.finalizers for d in below):
                await self._unblock_owner_refs(dependent)  # else a circle of owners waits forever
            try:
                await self._delete(dependent, "Foreground" if below else "Background", version)
            except ConflictError:
                self.queue.add(owner.uid)  # it changed since it was read: look again
        if not self.graph.blocking_dependents(owner.uid):
            await self._remove_finalizer(owner, FOREGROUND)
        # else: each blocking dependent's disappearance queues the owner again

    async def _remove_finalizer(self, node: Node, finalizer: str) -> None:
        path = node.resource.path(node.namespace, node.name)
        try:
            live = await self.client.get(path)
        except NotFoundError:
            return
        meta = live.get("metadata") or {}
        finalizers = meta.get("finalizers") or []
        if meta.get("uid") != node.uid or finalizer not in finalizers:
            return
        meta["finalizers"] = [f for f in finalizers if f != finalizer]
        await self.client.replace(path, live)  # at the resourceVersion read: a conflict retries
