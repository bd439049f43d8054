"""The namespace controller: a deleted (Terminating) namespace is emptied, then finalized.

Each pass discovers every served group/version (/api, /apis), deletes the content of each
namespaced resource with the verbs list and delete (DELETE on the collection where
deletecollection is served, else one by one), lists what remains, and reports kube's five
conditions on the namespace's status.  While content remains it looks again shortly; once
empty it removes the `kubernetes` finalizer through `/finalize`, which removes the namespace
(kube's apiserver and ours alike); the DELETE it sends after that is for a namespace some other
finalizer still held (NotFound is fine: the namespace is gone either way)."""

from __future__ import annotations

import contextlib
import datetime
from typing import Any

from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import ApiError, ConflictError, NotFoundError, TransportError
from components.controllers._infra_namespace import FINALIZER, Outcome, Target, conditions, preferred_once, targets
from components.controllers.base import Controller, Requeue
from machinery.objects import Obj

NAMESPACES = Resource("", "v1", "namespaces", namespaced=False, kind="Namespace")
CONTENT_RECHECK_S = 1.0  # content remaining (graceful deletions, finalizers): look again
FAILURE_RECHECK_S = 5.0


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class NamespaceController(Controller):
    name = "namespace"

    def setup(self) -> None:
        self.namespaces = self.factory.informer(NAMESPACES)
        self.namespaces.add_handler(EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n)))

    async def reconcile(self, key: str) -> None:
        ns = self.namespaces.indexer.get(key)
        if ns is None or not (ns.get("metadata") or {}).get("deletionTimestamp"):
            return
        finalizers = list((ns.get("spec") or {}).get("finalizers") or [])
        if FINALIZER not in finalizers:
            if not finalizers and not (ns.get("metadata") or {}).get("finalizers"):
                await self._remove(key)
            return
        outcome = Outcome()
        found = await self._discover(outcome)
        for target in found:
            await self._empty(key, target, outcome)
        ns = await self._report(ns, outcome)
        if not outcome.done:
            raise Requeue(
                FAILURE_RECHECK_S if outcome.delete_failures or outcome.discovery_failures else CONTENT_RECHECK_S
            )
        body = {**ns, "spec": {**(ns.get("spec") or {}), "finalizers": [f for f in finalizers if f != FINALIZER]}}
        try:
            done = await self.client.replace(NAMESPACES.path(name=key, sub="finalize"), body)
        except NotFoundError:
            return
        if not (done.get("spec") or {}).get("finalizers") and not (done.get("metadata") or {}).get("finalizers"):
            await self._remove(key)

    async def _remove(self, name: str) -> None:
        with contextlib.suppress(NotFoundError):
            await self.client.delete(NAMESPACES.path(name=name))

    async def _discover(self, outcome: Outcome) -> list[Target]:
        group_versions: list[str] = []
        try:
            core = await self.client.get("/api")
            group_versions += [str(v) for v in core.get("versions") or []]
            groups = await self.client.get("/apis")
        except (ApiError, TransportError) as e:
            outcome.discovery_failures.append(f"discovery: {e}")
            return []
        for g in groups.get("groups") or []:
            preferred = (g.get("preferredVersion") or {}).get("groupVersion")
            versions = [str(v.get("groupVersion")) for v in g.get("versions") or []]
            group_versions += sorted(versions, key=lambda gv: gv != preferred)
        found: list[Target] = []
        for gv in group_versions:
            path = f"/api/{gv}" if "/" not in gv else f"/apis/{gv}"
            try:
                found += targets(gv, await self.client.get(path))
            except (ApiError, TransportError) as e:
                outcome.discovery_failures.append(f"{gv}: {e}")
        return preferred_once(found)

    async def _empty(self, namespace: str, target: Target, outcome: Outcome) -> None:
        path = Resource(target.group, target.version, target.plural).path(namespace)
        try:
            if target.deletecollection:
                await self.client.delete(path)
            else:
                for item in (await self.client.get(path)).get("items") or []:
                    with contextlib.suppress(NotFoundError, ConflictError):
                        await self.client.delete(f"{path}/{item['metadata']['name']}")
        except NotFoundError:
            pass
        except (ApiError, TransportError):
            outcome.delete_failures.append(target.group_resource)
        try:
            items: list[Any] = (await self.client.get(path)).get("items") or []
        except NotFoundError:
            return
        except (ApiError, TransportError):
            outcome.delete_failures.append(target.group_resource)
            return
        if items:
            outcome.remaining[target.group_resource] = len(items)
        for item in items:
            for f in (item.get("metadata") or {}).get("finalizers") or []:
                outcome.finalizers[str(f)] = outcome.finalizers.get(str(f), 0) + 1

    async def _report(self, ns: Obj, outcome: Outcome) -> Obj:
        """The namespace with the pass's conditions (written only when they changed)."""
        status = ns.get("status") or {}
        old = status.get("conditions") or []
        new = conditions(old, outcome, _now())
        if new == old:
            return ns
        body = {**ns, "status": {**status, "conditions": new}}
        return await self.client.replace(NAMESPACES.path(name=ns["metadata"]["name"], sub="status"), body)
