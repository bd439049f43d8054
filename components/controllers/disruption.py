"""The disruption controller: every PodDisruptionBudget's status says how many of the pods it
selects are healthy, how many must stay so, and how many may be disrupted now (the number the
apiserver's pods/eviction charges).  The arithmetic is `_disruption_budget`'s; this module finds
the pods and their controllers' scale, and writes the status when it changed.

A PDB is recounted when it changes and when any pod it selects (before or after the change) is
added, changed or deleted, as kube's controller does; an eviction recorded in `disruptedPods`
brings one more recount when it expires.  A change of a ReplicaSet or Deployment recounts the
budgets of its namespace that count controllers' replicas, and a budget that could not be worked
out (SyncFailed) is tried again every RETRY_FAILED_S.  The status is written with the
resourceVersion read, so an eviction's concurrent charge is never overwritten (the loser is
recounted)."""

from __future__ import annotations

import logging

from components.client.indexer import NAMESPACE_INDEX, key_of, split_key
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.controllers._disruption_budget import BudgetError, compute, needs_scale
from components.controllers.base import Controller, Requeue
from machinery.disruption import budget_selects
from machinery.objects import Obj, controller_ref, metadata, spec

log = logging.getLogger("raftkube.controllers")

PDBS = Resource("policy", "v1", "poddisruptionbudgets", kind="PodDisruptionBudget")
PODS = Resource("", "v1", "pods", kind="Pod")
REPLICASETS = Resource("apps", "v1", "replicasets", kind="ReplicaSet")
DEPLOYMENTS = Resource("apps", "v1", "deployments", kind="Deployment")
RETRY_FAILED_S = 30.0


def _group(ref: Obj) -> str:
    api_version = ref.get("apiVersion")
    return api_version.rpartition("/")[0] if isinstance(api_version, str) else ""


def _replicas(obj: Obj) -> int:
    """spec.replicas (1 when unset, the apiserver's default); malformed: the budget cannot be known."""
    replicas = spec(obj).get("replicas", 1)
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        m = metadata(obj)
        raise BudgetError(f"{obj.get('kind', 'controller')} {m.get('name')!r} has an invalid spec.replicas")
    return replicas


class DisruptionController(Controller):
    name = "disruption"

    def setup(self) -> None:
        self.pdbs = self.factory.informer(PDBS)
        self.pods = self.factory.informer(PODS)
        # the pods' controllers: their scale is looked up; a change recounts the budgets using it
        self.replicasets = self.factory.informer(REPLICASETS)
        self.deployments = self.factory.informer(DEPLOYMENTS)
        for informer in (self.replicasets, self.deployments):
            informer.add_handler(
                EventHandler(
                    on_add=self._scale_changed,
                    on_update=lambda _o, n: self._scale_changed(n),
                    on_delete=self._scale_changed,
                )
            )
        self.pdbs.add_handler(EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n)))
        self.pods.add_handler(
            EventHandler(
                on_add=lambda p: self._pod_changed(p, None),
                on_update=lambda o, n: self._pod_changed(n, o),
                on_delete=lambda p: self._pod_changed(p, None),
            )
        )

    def _pod_changed(self, pod: Obj, old: Obj | None) -> None:
        namespace = metadata(pod).get("namespace") or ""
        for pdb in self.pdbs.indexer.by_index(NAMESPACE_INDEX, namespace):
            if budget_selects(pdb, pod) or (old is not None and budget_selects(pdb, old)):
                self.queue.add(key_of(pdb))

    def _scale_changed(self, owner: Obj) -> None:
        namespace = metadata(owner).get("namespace") or ""
        for pdb in self.pdbs.indexer.by_index(NAMESPACE_INDEX, namespace):
            if needs_scale(spec(pdb)):
                self.queue.add(key_of(pdb))

    # -- the pods' controllers ------------------------------------------------------------------

    def _controller_scale(self, ref: Obj, namespace: str) -> tuple[str, int] | None:
        """(uid, replicas) of the controller a pod's controllerRef names, or None when unknown.
        A ReplicaSet of a Deployment counts as the Deployment (one count across a rollout's
        ReplicaSets); if that Deployment is gone, as the ReplicaSet (kube's scale fallback)."""
        kind, name, uid, group = ref.get("kind"), ref.get("name"), ref.get("uid"), _group(ref)
        if group != "apps" or not isinstance(name, str) or not isinstance(uid, str):
            return None
        if kind == "Deployment":
            return self._owned(self.deployments.indexer.get(f"{namespace}/{name}"), uid)
        if kind != "ReplicaSet":
            return None
        rs = self.replicasets.indexer.get(f"{namespace}/{name}")
        if rs is None or metadata(rs).get("uid") != uid:
            return None
        owner = controller_ref(rs)
        if owner is not None and owner.get("kind") == "Deployment" and _group(owner) == "apps":
            found = self._owned(self.deployments.indexer.get(f"{namespace}/{owner.get('name')}"), owner.get("uid"))
            if found is not None:
                return found
        return uid, _replicas(rs)

    @staticmethod
    def _owned(obj: Obj | None, uid: object) -> tuple[str, int] | None:
        if obj is None or metadata(obj).get("uid") != uid or not isinstance(uid, str):
            return None
        return uid, _replicas(obj)

    def _scale(self, pods: list[Obj]) -> int:
        """The replicas the selected pods' controllers want, each controller once.  Pods without a
        controller are left out (kube warns about them); a controller that cannot be found makes
        the budget unknown."""
        scales: dict[str, int] = {}
        for pod in pods:
            ref = controller_ref(pod)
            if ref is None:
                continue
            if ref.get("uid") in scales:
                continue
            found = self._controller_scale(ref, metadata(pod).get("namespace") or "")
            if found is None:
                raise BudgetError(f'found no controllers for pod "{metadata(pod).get("name")}"')
            scales[found[0]] = found[1]
        return sum(scales.values())

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        namespace, name = split_key(key)
        pdb = self.pdbs.indexer.get(key)
        if pdb is None or namespace is None:
            return
        pods = [p for p in self.pods.indexer.by_index(NAMESPACE_INDEX, namespace) if budget_selects(pdb, p)]
        now = self.clock.now()
        computed = compute(pdb, pods, now, self._scale)
        if needs_scale(spec(pdb)) and any(controller_ref(p) is None for p in pods):
            log.info("%s: %s selects pods without a controller; they are not counted as expected", self.name, key)
        if computed.status != pdb.get("status"):
            body = {**pdb, "status": computed.status}
            await self.client.replace(PDBS.path(namespace, name, sub="status"), body)
        if computed.failed is not None:
            log.info("%s: %s: %s", self.name, key, computed.failed)
            raise Requeue(RETRY_FAILED_S)
        if computed.recheck_at is not None:
            raise Requeue(max(0.0, computed.recheck_at - now) + 1.0)
