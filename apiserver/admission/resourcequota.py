"""ResourceQuota: a namespace's quotas cap what its objects may use, and never over-admit.

Each create that a quota counts first charges the quota: `status.used` is raised by the
object's usage with a compare-and-swap write of the quota (the registry's optimistic update,
retried on conflict), and the create goes on only after that write won.  Fifty concurrent
creates against `pods: 10` therefore admit exactly ten: every charge is serialized by the
quota's revision.  A delete releases the charge once the object is gone (`release`).  A quota
whose `status.used` does not name a resource yet is first filled from the objects the cache
holds (the work kube's quota controller does).

Counted: object counts (`pods`, `services`, `secrets`, `configmaps`, `count/<resource>[.<group>]`,
...), and pods' `requests.*`/`limits.*` (`cpu` and `memory` meaning requests), with the scopes
Terminating, NotTerminating, BestEffort, NotBestEffort.  Refusals are kube's 403:
`exceeded quota: q, requested: pods=1, used: pods=10, limited: pods=10`.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from apiserver import errors
from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.podresources import pod_resources
from apiserver.quantity import Quantity, QuantityError, canonical, parse_quantity
from apiserver.registry.generic import Registry
from apiserver.resources.base import ResourceDef
from apiserver.resources.core_pods import qos_class

log = logging.getLogger("raftkube.apiserver")
Obj = dict[str, Any]
ONE = parse_quantity(1)
# the old names kube still counts core objects by
_CORE_COUNTS = {
    "pods": "pods",
    "services": "services",
    "secrets": "secrets",
    "configmaps": "configmaps",
    "persistentvolumeclaims": "persistentvolumeclaims",
    "replicationcontrollers": "replicationcontrollers",
    "resourcequotas": "resourcequotas",
}
# (namespace, ResourceDef) -> the objects of that kind in the namespace (for a first fill)
ObjectsIn = Callable[[str, ResourceDef], Iterable[Obj]]


def _terminal(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status")
    return isinstance(status, Mapping) and status.get("phase") in ("Succeeded", "Failed")


def usage(resource: ResourceDef, obj: Mapping[str, Any]) -> dict[str, Quantity]:
    """What one object uses, in quota resource names."""
    out: dict[str, Quantity] = {}
    count = f"count/{resource.plural}" + (f".{resource.group}" if resource.group else "")
    out[count] = ONE
    if resource.group == "" and resource.plural in _CORE_COUNTS:
        out[_CORE_COUNTS[resource.plural]] = ONE
    if resource.group == "" and resource.plural == "pods":
        if _terminal(obj):
            return {}
        spec = obj.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        for name, q in pod_resources(spec, "requests").items():
            out[f"requests.{name}"] = q
            if name in ("cpu", "memory", "ephemeral-storage"):
                out[name] = q
        for name, q in pod_resources(spec, "limits").items():
            out[f"limits.{name}"] = q
    if resource.group == "" and resource.plural == "services":
        kind = (obj.get("spec") or {}).get("type") if isinstance(obj.get("spec"), Mapping) else None
        if kind == "LoadBalancer":
            out["services.loadbalancers"] = ONE
        if kind in ("LoadBalancer", "NodePort"):
            out["services.nodeports"] = ONE
    return out


def in_scope(quota: Mapping[str, Any], resource: ResourceDef, obj: Mapping[str, Any]) -> bool:
    """Whether the quota's scopes select the object (scopes select pods only)."""
    spec = quota.get("spec")
    scopes = spec.get("scopes") if isinstance(spec, Mapping) else None
    if not scopes:
        return True
    if not (resource.group == "" and resource.plural == "pods"):
        return False
    pod_spec = obj.get("spec")
    pod_spec = pod_spec if isinstance(pod_spec, Mapping) else {}
    terminating = pod_spec.get("activeDeadlineSeconds") is not None
    best_effort = qos_class(dict(pod_spec)) == "BestEffort"
    wanted = {
        "Terminating": terminating,
        "NotTerminating": not terminating,
        "BestEffort": best_effort,
        "NotBestEffort": not best_effort,
    }
    return all(wanted.get(str(scope), False) for scope in scopes)


def _hard(quota: Mapping[str, Any]) -> dict[str, Quantity]:
    spec = quota.get("spec")
    hard = spec.get("hard") if isinstance(spec, Mapping) else None
    out: dict[str, Quantity] = {}
    for name, raw in hard.items() if isinstance(hard, Mapping) else ():
        try:
            out[str(name)] = parse_quantity(raw)
        except (QuantityError, TypeError):
            continue
    return out


def _used(quota: Mapping[str, Any]) -> dict[str, Quantity]:
    status = quota.get("status")
    used = status.get("used") if isinstance(status, Mapping) else None
    out: dict[str, Quantity] = {}
    for name, raw in used.items() if isinstance(used, Mapping) else ():
        try:
            out[str(name)] = parse_quantity(raw)
        except (QuantityError, TypeError):
            continue
    return out


def _pairs(values: Mapping[str, Quantity], names: Iterable[str]) -> str:
    return ",".join(f"{n}={canonical(values[n])}" for n in sorted(names) if n in values)


class ResourceQuota:
    name = "ResourceQuota"

    def __init__(self, quotas: Registry, quota_objects: Callable[[str], Iterable[Obj]], objects_in: ObjectsIn) -> None:
        self._quotas = quotas
        self._quota_objects = quota_objects
        self._objects_in = objects_in
        # one charge at a time per namespace in this apiserver (as kube's quota evaluator runs one
        # worker per namespace): concurrent creates queue here instead of racing the quota's
        # revision until their retries run out; the compare-and-swap still guards against
        # other apiservers
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def handles(self, request: AdmissionRequest) -> bool:
        return request.operation == "CREATE" and not request.subresource and bool(request.namespace)

    async def validate(self, request: AdmissionRequest) -> None:
        assert request.object is not None and request.namespace
        delta = usage(request.resource, request.object)
        if not delta:
            return
        quotas = [
            q
            for q in self._quota_objects(request.namespace)
            if any(n in _hard(q) for n in delta) and in_scope(q, request.resource, request.object)
        ]
        if not quotas:
            return
        lock = self._locks.get(request.namespace)
        if lock is None:
            lock = self._locks[request.namespace] = asyncio.Lock()
        async with lock:
            for quota in quotas:
                await self._charge(request, str(quota["metadata"]["name"]), delta)

    async def _charge(self, request: AdmissionRequest, quota_name: str, delta: dict[str, Quantity]) -> None:
        namespace = request.namespace
        assert namespace is not None

        def charge(current: Obj | None) -> Obj:
            if current is None:
                raise _QuotaGone
            hard = _hard(current)
            used = _used(current)
            for name in delta:
                if name in hard and name not in used:
                    counted = self._count(namespace, current, name, request.resource)
                    if counted is not None:
                        used[name] = counted
            wanted = {n for n in delta if n in hard}
            after = {n: used[n] + delta[n] if n in used else delta[n] for n in wanted}
            over = sorted(n for n in wanted if after[n] > hard[n])
            if over:
                raise errors.forbidden(
                    f"{errors.qualified(request.resource.plural, request.resource.group)} "
                    f'"{request.name}" is forbidden: exceeded quota: {quota_name}, '
                    f"requested: {_pairs(delta, over)}, used: {_pairs(used, over)}, limited: {_pairs(hard, over)}"
                )
            status = dict(current.get("status") or {})
            status["hard"] = {n: canonical(q) for n, q in sorted(hard.items())}
            status["used"] = {n: canonical(q) for n, q in sorted({**used, **after}.items())}
            current["status"] = status
            return current

        try:
            await self._quotas.mutate(namespace, quota_name, charge, subresource="status", dry_run=request.dry_run)
        except _QuotaGone:
            return  # deleted meanwhile: it limits nothing any more
        except errors.StatusError as e:
            if e.code == 404:
                return
            raise

    def _count(self, namespace: str, quota: Obj, name: str, resource: ResourceDef) -> Quantity | None:
        """The usage of `name` by what the namespace holds now (a quota's first fill)."""
        total: Quantity | None = None
        for obj in self._objects_in(namespace, resource):
            if in_scope(quota, resource, obj):
                q = usage(resource, obj).get(name)
                if q is not None:
                    total = q if total is None else total + q  # the first term's notation is kept
        return total

    async def release(self, resource: ResourceDef, obj: Obj) -> None:
        """Give back what a deleted object was charged (best effort: a lost release only
        under-admits until the quota is recounted)."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace")
        if not namespace:
            return
        delta = usage(resource, obj)
        if not delta:
            return
        for quota in list(self._quota_objects(str(namespace))):
            used = _used(quota)
            if not any(n in used for n in delta) or not in_scope(quota, resource, obj):
                continue

            def give_back(current: Obj | None) -> Obj:
                if current is None:
                    raise _QuotaGone
                now = _used(current)
                for n, q in delta.items():
                    if n in now:
                        left = now[n] - q
                        now[n] = left if left.value > 0 else parse_quantity(0)
                status = dict(current.get("status") or {})
                status["used"] = {n: canonical(q) for n, q in sorted(now.items())}
                current["status"] = status
                return current

            try:
                await self._quotas.mutate(
                    str(namespace), str(quota["metadata"]["name"]), give_back, subresource="status"
                )
            except (_QuotaGone, errors.StatusError) as e:
                log.info("quota release for %s/%s skipped: %s", namespace, meta.get("name"), e)


class _QuotaGone(Exception):
    """The quota was deleted between the list and the charge."""
