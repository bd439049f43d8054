"""The horizontal pod autoscaler: a workload's replicas follow its pods' measured usage.

Keys are `namespace/name` of autoscaling/v2 HorizontalPodAutoscalers, each looked at when it
changes and every SYNC_S seconds (kube's --horizontal-pod-autoscaler-sync-period).  A pass,
as kube's reconcileAutoscaler:

1. the target's `/scale` (Deployment, ReplicaSet, StatefulSet, ReplicationController): its
   replicas and its pods' selector; a target at 0 replicas is not scaled (ScalingDisabled);
2. its pods' PodMetrics from metrics.k8s.io (the apiserver computes them from the kubelets'
   usage), and each `Resource` metric's proposal (_hpa_replicas: Utilization of the pods'
   requests, or AverageValue); the highest proposal wins.  Other metric types (Pods, Object,
   External, ContainerResource) need a custom or external metrics API, which is not served:
   they are reported as such in ScalingActive;
3. the proposal stabilized and rate-limited by `behavior` and bounded by min/maxReplicas;
   a change goes to the target's `/scale`, told in a SuccessfulRescale event;
4. status: current and desired replicas, current metrics, lastScaleTime, and kube's three
   conditions (AbleToScale, ScalingActive, ScalingLimited) with its reasons and messages.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from components.client.events import NORMAL, WARNING, ObjectRef, reference
from components.client.indexer import NAMESPACE_INDEX
from components.client.informer import EventHandler
from components.client.listwatch import Resource
from components.client.rest import ApiError, ConflictError, NotFoundError
from components.controllers._hpa_replicas import Event, MetricError, Proposal, decide, resource_proposal
from components.controllers.base import Controller, Requeue
from machinery.conditions import merge_conditions
from machinery.objects import Obj, labels, metadata, spec, status
from machinery.selectors import LabelSelector, SelectorError
from machinery.timestamps import format_time

HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", kind="HorizontalPodAutoscaler")
PODS = Resource("", "v1", "pods", kind="Pod")
POD_METRICS = "/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods"
SCALABLE = {
    ("apps", "Deployment"): Resource("apps", "v1", "deployments", kind="Deployment"),
    ("apps", "ReplicaSet"): Resource("apps", "v1", "replicasets", kind="ReplicaSet"),
    ("apps", "StatefulSet"): Resource("apps", "v1", "statefulsets", kind="StatefulSet"),
    ("", "ReplicationController"): Resource("", "v1", "replicationcontrollers", kind="ReplicationController"),
}
SYNC_S = 15.0
HISTORY_S = 600.0  # proposals and scale events older than any window kept


class HorizontalPodAutoscalerController(Controller):
    name = "horizontalpodautoscaling"
    workers = 1
    wall: Callable[[], float] = staticmethod(time.time)

    def __init__(self, *args: Any, sync_period: float = SYNC_S, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sync_period = sync_period  # --horizontal-pod-autoscaler-sync-period

    def setup(self) -> None:
        self.hpas = self.factory.informer(HPAS)
        self.pods = self.factory.informer(PODS)
        self.hpas.add_handler(
            EventHandler(on_add=self.enqueue, on_update=lambda _o, n: self.enqueue(n), on_delete=self._forget)
        )
        self._proposals: dict[str, list[Event]] = {}
        self._ups: dict[str, list[Event]] = {}
        self._downs: dict[str, list[Event]] = {}

    def _forget(self, hpa: Obj) -> None:
        key = f"{metadata(hpa).get('namespace')}/{metadata(hpa).get('name')}"
        for kept in (self._proposals, self._ups, self._downs):
            kept.pop(key, None)

    async def reconcile(self, key: str) -> None:
        hpa = self.hpas.indexer.get(key)
        if hpa is None or metadata(hpa).get("deletionTimestamp"):
            return
        now = self.wall()
        for kept in (self._proposals, self._ups, self._downs):
            kept[key] = [e for e in kept.get(key, []) if e[0] > now - HISTORY_S]
        await self._autoscale(key, hpa, now)
        raise Requeue(after=self.sync_period)

    async def _autoscale(self, key: str, hpa: Obj, now: float) -> None:
        ns = str(metadata(hpa).get("namespace") or "")
        ref = spec(hpa).get("scaleTargetRef") or {}
        group = str(ref.get("apiVersion") or "").rpartition("/")[0]
        target = SCALABLE.get((group, str(ref.get("kind") or "")))
        conditions: list[dict[str, str]] = []
        if target is None:
            why = f'no matches for kind "{ref.get("kind")}" in group "{group}"'
            await self._failed(
                hpa, "FailedGetScale", f"the HPA controller was unable to get the target's current scale: {why}"
            )
            return
        scale_path = target.path(ns, str(ref.get("name") or ""), "scale")
        try:
            scale = await self.client.get(scale_path)
        except ApiError as e:
            await self._failed(
                hpa, "FailedGetScale", f"the HPA controller was unable to get the target's current scale: {e.message}"
            )
            return
        current = int(spec(scale).get("replicas") or 0)
        minimum = int(spec(hpa).get("minReplicas") or 1)
        maximum = int(spec(hpa).get("maxReplicas") or minimum)
        if current == 0 and minimum != 0:
            conditions = [
                _condition(
                    "AbleToScale",
                    "True",
                    "SucceededGetScale",
                    "the HPA controller was able to get the target's current scale",
                ),
                _condition(
                    "ScalingActive",
                    "False",
                    "ScalingDisabled",
                    "scaling is disabled since the replica count of the target is zero",
                ),
            ]
            await self._write_status(hpa, current, current, [], conditions, None)
            return
        proposals, failure = await self._proposals_for(hpa, ns, str(status(scale).get("selector") or ""), current)
        if not proposals:
            assert failure is not None
            self.events.record(self._ref(hpa), WARNING, failure.reason, str(failure))
            conditions = [
                _condition(
                    "AbleToScale",
                    "True",
                    "SucceededGetScale",
                    "the HPA controller was able to get the target's current scale",
                ),
                _condition("ScalingActive", "False", failure.reason, str(failure)),
            ]
            await self._write_status(hpa, current, current, [], conditions, None)
            return
        best = max(proposals, key=lambda p: p.replicas)
        decision = decide(
            best.replicas,
            current,
            minimum,
            maximum,
            spec(hpa).get("behavior"),
            self._proposals[key],
            self._ups[key],
            self._downs[key],
            now,
        )
        self._proposals[key].append((now, best.replicas))
        scaled_at: float | None = None
        able = _condition("AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size")
        if decision.replicas != current:
            try:
                await self.client.patch(scale_path, {"spec": {"replicas": decision.replicas}}, "merge")
            except ApiError as e:
                self.events.record(
                    self._ref(hpa), WARNING, "FailedRescale", f"New size: {decision.replicas}; error: {e.message}"
                )
                able = _condition(
                    "AbleToScale",
                    "False",
                    "FailedUpdateScale",
                    f"the HPA controller was unable to update the target scale: {e.message}",
                )
            else:
                above = "above" if decision.replicas > current else "below"
                metric = (best.current.get("resource") or {}).get("name", "cpu")
                why = f"{metric} resource utilization (percentage of request) {above} target"
                self.events.record(
                    self._ref(hpa), NORMAL, "SuccessfulRescale", f"New size: {decision.replicas}; reason: {why}"
                )
                (self._ups if decision.replicas > current else self._downs)[key].append(
                    (now, abs(decision.replicas - current))
                )
                scaled_at = now
                able = _condition(
                    "AbleToScale",
                    "True",
                    "SucceededRescale",
                    f"the HPA controller was able to update the target scale to {decision.replicas}",
                )
        metric = (best.current.get("resource") or {}).get("name", "cpu")
        active = _condition(
            "ScalingActive",
            "True",
            "ValidMetricFound",
            "the HPA was able to successfully calculate a replica count from"
            f" {metric} resource utilization (percentage of request)",
        )
        limited = (
            _condition("ScalingLimited", "True", decision.limited, _LIMITED[decision.limited])
            if decision.limited
            else _condition(
                "ScalingLimited", "False", "DesiredWithinRange", "the desired count is within the acceptable range"
            )
        )
        await self._write_status(
            hpa, current, decision.replicas, [p.current for p in proposals], [able, active, limited], scaled_at
        )

    async def _proposals_for(
        self, hpa: Obj, ns: str, selector_text: str, current: int
    ) -> tuple[list[Proposal], MetricError | None]:
        try:
            selector = LabelSelector.parse(selector_text)
        except SelectorError as e:
            return [], MetricError(
                "InvalidSelector", f"couldn't convert selector into a corresponding internal selector object: {e}"
            )
        pods = [
            p
            for p in self.pods.indexer.by_index(NAMESPACE_INDEX, ns)
            if selector.matches(labels(p))
            and not metadata(p).get("deletionTimestamp")
            and status(p).get("phase") == "Running"
        ]
        try:
            listed = await self.client.get(POD_METRICS.format(namespace=ns), {"labelSelector": selector_text})
        except ApiError as e:
            return [], MetricError("FailedGetResourceMetric", f"unable to get metrics for resource: {e.message}")
        usage = {str(metadata(m).get("name") or ""): m for m in listed.get("items") or ()}
        proposals: list[Proposal] = []
        failure: MetricError | None = None
        for metric in spec(hpa).get("metrics") or ():
            if metric.get("type") != "Resource":
                failure = MetricError(
                    "InvalidMetricSourceType",
                    f"the HPA was unable to compute the replica count: {metric.get('type')} metrics need a custom or"
                    " external metrics API, which this cluster does not serve",
                )
                continue
            try:
                proposals.append(resource_proposal(metric, pods, usage, current))
            except MetricError as e:
                failure = e
        return proposals, failure

    async def _failed(self, hpa: Obj, reason: str, message: str) -> None:
        self.events.record(self._ref(hpa), WARNING, reason, message)
        current = int(status(hpa).get("currentReplicas") or 0)
        await self._write_status(hpa, current, current, [], [_condition("AbleToScale", "False", reason, message)], None)

    async def _write_status(
        self,
        hpa: Obj,
        current: int,
        desired: int,
        metrics: list[Obj],
        conditions: list[dict[str, str]],
        scaled_at: float | None,
    ) -> None:
        new: dict[str, Any] = dict(status(hpa))
        new["currentReplicas"] = current
        new["desiredReplicas"] = desired
        if metrics:
            new["currentMetrics"] = metrics
        else:
            new.pop("currentMetrics", None)
        if scaled_at is not None:
            new["lastScaleTime"] = format_time(scaled_at)
        if metadata(hpa).get("generation") is not None:
            new["observedGeneration"] = metadata(hpa)["generation"]
        stamped = [{**c, "lastTransitionTime": format_time(self.wall())} for c in conditions]
        new["conditions"] = merge_conditions([dict(c) for c in new.get("conditions") or ()], stamped)
        if new == status(hpa):
            return
        m = metadata(hpa)
        # changed or gone meanwhile: the next pass writes what it finds
        with contextlib.suppress(ConflictError, NotFoundError):
            await self.client.replace(HPAS.path(m.get("namespace"), m.get("name"), "status"), {**hpa, "status": new})

    def _ref(self, hpa: Obj) -> ObjectRef:
        return reference(hpa, "autoscaling/v2", "HorizontalPodAutoscaler")


_LIMITED = {
    "TooManyReplicas": "the desired replica count is more than the maximum replica count",
    "TooFewReplicas": "the desired replica count is less than the minimum replica count",
    "ScaleUpLimit": "the desired replica count is increasing faster than the maximum scale rate",
    "ScaleDownLimit": "the desired replica count is decreasing faster than the maximum scale rate",
}


def _condition(kind: str, state: str, reason: str, message: str) -> dict[str, str]:
    return {"type": kind, "status": state, "reason": reason, "message": message}
