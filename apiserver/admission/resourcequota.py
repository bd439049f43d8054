"""ResourceQuota: a namespace's quotas cap what its objects may use, and never over-admit.

Each create that a quota counts first charges the quota: `status.used` is raised by the
object's usage with a compare-and-swap write of the quota (the registry's optimistic update,
retried on conflict), and the create goes on only after that write won.  Fifty concurrent
creates against `pods: 10` therefore admit exactly ten: every charge is serialized by the
quota's revision.  A delete releases the charge once the object is gone (`release`).  A quota
whose `status.used` does not name a resource yet is first filled from the objects the cache
holds (the work kube's quota controller does).

What an object uses and which quotas' scopes select it is machinery.quota's (the quota
controller recounts by the same rules).  Refusals are kube's 403:
`exceeded quota: q, requested: pods=1, used: pods=10, limited: pods=10`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver import errors
from apiserver.admission.by_version import ByVersion
from apiserver.admission.interface import AdmissionRequest
from apiserver.registry.generic import Registry
from apiserver.registry.strategy import STATUS
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj
from machinery.podresources import all_containers, container_resources
from machinery.quantity import Quantity, QuantityError, canonical, parse_quantity
from machinery.quota import in_scope, usage

log = logging.getLogger("raftkube.apiserver")
WRITTEN_KEPT = 10_000  # quotas whose last write is remembered
# (namespace, ResourceDef) -> the objects of that kind in the namespace (for a first fill)
ObjectsIn = Callable[[str, ResourceDef], Iterable[Obj]]
# a quota -> its parsed spec.hard
HardOf = Callable[[Mapping[str, Any]], Mapping[str, Quantity]]


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


@dataclass(eq=False)
class _Charge:
    """One create waiting for its quota charge (`refusal` is set when a quota has no room), or
    the give-back of a deleted object (`request` None): both go through the namespace's worker,
    so one apiserver never races itself for a quota's revision."""

    request: AdmissionRequest | None
    delta: dict[str, Quantity]
    quotas: list[str]
    done: asyncio.Future[None]
    refusal: errors.StatusError | None = None

    @property
    def dry_run(self) -> bool:
        return self.request is not None and self.request.dry_run


class ResourceQuota:
    name = "ResourceQuota"

    def __init__(self, quotas: Registry, quota_objects: Callable[[str], Iterable[Obj]], objects_in: ObjectsIn) -> None:
        self._quotas = quotas
        self._quota_objects = quota_objects
        self._objects_in = objects_in
        # Creates of one namespace are charged in batches by one worker (kube's quota evaluator
        # does the same): whoever comes while a batch is being written waits for the next one,
        # which charges all of them with one write per quota.  The compare-and-swap of that
        # write still guards against other apiservers.
        self._waiting: dict[str, list[_Charge]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        # each quota as this apiserver last wrote it: the next charge starts from it instead
        # of reading the store (the cache may not have seen the write yet)
        self._written: dict[tuple[str, str], Obj] = {}
        self._hard: HardOf = ByVersion(_hard)  # every create in the namespace reads it, several times

    def handles(self, request: AdmissionRequest) -> bool:
        return request.operation == "CREATE" and not request.subresource and bool(request.namespace)

    async def validate(self, request: AdmissionRequest) -> None:
        assert request.object is not None and request.namespace
        in_namespace = list(self._quota_objects(request.namespace))
        if not in_namespace:  # most namespaces have none: a pod's usage is not worth working out
            return
        delta = usage(request.resource, request.object)
        if not delta:
            return
        quotas = [
            q
            for q in in_namespace
            if any(n in self._hard(q) for n in delta) and in_scope(q, request.resource, request.object)
        ]
        if not quotas:
            return
        if request.resource.group == "" and request.resource.plural == "pods":
            _require_specified(request, quotas, self._hard)
        charge = _Charge(
            request, delta, [str(q["metadata"]["name"]) for q in quotas], asyncio.get_running_loop().create_future()
        )
        await self._queue(request.namespace, charge)
        if charge.refusal is not None:
            raise charge.refusal

    async def _queue(self, namespace: str, charge: _Charge) -> None:
        """Hand `charge` to the namespace's worker (started when there is none) and wait for it."""
        self._waiting.setdefault(namespace, []).append(charge)
        if namespace not in self._workers:
            self._workers[namespace] = asyncio.create_task(self._work(namespace))
        await charge.done

    async def _work(self, namespace: str) -> None:
        try:
            while batch := self._waiting.pop(namespace, None):
                try:
                    for quota_name in dict.fromkeys(n for c in batch for n in c.quotas):
                        await self._charge_batch(namespace, quota_name, [c for c in batch if quota_name in c.quotas])
                except Exception as e:
                    error = e if isinstance(e, errors.StatusError) else errors.internal(f"quota: {e}")
                    for c in batch:
                        if c.refusal is None:
                            c.refusal = error
                for c in batch:
                    if not c.done.done():
                        c.done.set_result(None)
        finally:
            del self._workers[namespace]

    async def _charge_batch(self, namespace: str, quota_name: str, batch: list[_Charge]) -> None:
        """Charge every create of `batch` that fits, in order, with one write of the quota."""
        pending = [c for c in batch if c.refusal is None]
        dry = [c for c in pending if c.dry_run]
        wet = [c for c in pending if not c.dry_run]
        verdicts: dict[int, errors.StatusError] = {}

        def charge(current: Obj | None) -> Obj:
            if current is None:
                raise _QuotaGone
            verdicts.clear()
            hard = self._hard(current)
            used = _used(current)
            filled: set[str] = set()  # counted once per charge, even when nothing was there to count
            for c in pending:
                for name in c.delta:
                    if c.request is not None and name in hard and name not in used and name not in filled:
                        filled.add(name)
                        counted = self._count(namespace, current, name, c.request.resource)
                        if counted is not None:
                            used[name] = counted
            for c in dry + wet:
                if c.request is None:  # a give-back: what is not counted yet has nothing to give
                    for n, q in c.delta.items():
                        if n in used:
                            left = used[n] - q
                            used[n] = left if left.nanos > 0 else parse_quantity(0)
                    continue
                wanted = {n for n in c.delta if n in hard}
                after = {n: used[n] + c.delta[n] if n in used else c.delta[n] for n in wanted}
                over = sorted(n for n in wanted if after[n] > hard[n])
                if over:
                    res = c.request.resource
                    verdicts[id(c)] = errors.forbidden(
                        f'{errors.qualified(res.plural, res.group)} "{c.request.name}" is forbidden: '
                        f"exceeded quota: {quota_name}, requested: {_pairs(c.delta, over)}, "
                        f"used: {_pairs(used, over)}, limited: {_pairs(hard, over)}"
                    )
                elif not c.request.dry_run:
                    used.update(after)
            status = dict(current.get("status") or {})
            status["hard"] = {n: canonical(q) for n, q in sorted(hard.items())}
            status["used"] = {n: canonical(q) for n, q in sorted(used.items())}
            current["status"] = status
            return current

        try:
            # track=False: usage written on every create is not a field anyone manages;
            # honour_resource_version=False: a concurrent write (a give-back, another apiserver)
            # means charge again from the fresh quota, never a 409 for the creates waiting
            written, _ = await self._quotas.mutate(
                namespace,
                quota_name,
                charge,
                subresource=STATUS,
                dry_run=not wet,
                track=False,
                honour_resource_version=False,
                start_from=self._newest(namespace, quota_name),
            )
        except _QuotaGone:
            self._written.pop((namespace, quota_name), None)
            return  # deleted meanwhile: it limits nothing any more
        except errors.StatusError as e:
            if e.code == 404:
                self._written.pop((namespace, quota_name), None)
                return
            raise
        if wet:
            self._written.pop((namespace, quota_name), None)
            self._written[(namespace, quota_name)] = written
            if len(self._written) > WRITTEN_KEPT:  # the least recently written first
                del self._written[next(iter(self._written))]
        for c in pending:
            c.refusal = verdicts.get(id(c))

    def _newest(self, namespace: str, name: str) -> Obj | None:
        """The quota at the highest resourceVersion this apiserver knows: its own last write or
        the cache's copy (another apiserver's write, a status update by the controller)."""
        known = [self._written.get((namespace, name))]
        known += [q for q in self._quota_objects(namespace) if q.get("metadata", {}).get("name") == name]
        best = None
        for q in known:
            if q is not None and (best is None or _revision(q) > _revision(best)):
                best = q
        return best

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
        """Give back what a deleted object was charged (best effort: a lost give-back only
        under-admits until the quota is recounted)."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace")
        if not namespace:
            return
        delta = usage(resource, obj)
        if not delta:
            return
        quotas = [
            str(q["metadata"]["name"])
            for q in self._quota_objects(str(namespace))
            if any(n in self._hard(q) for n in delta) and in_scope(q, resource, obj)
        ]
        if not quotas:
            return
        give_back = _Charge(None, delta, quotas, asyncio.get_running_loop().create_future())
        await self._queue(str(namespace), give_back)
        if give_back.refusal is not None:
            log.info("quota give-back for %s/%s skipped: %s", namespace, meta.get("name"), give_back.refusal.message)


_COMPUTE = {
    "requests.cpu": ("requests", "cpu"),
    "cpu": ("requests", "cpu"),
    "requests.memory": ("requests", "memory"),
    "memory": ("requests", "memory"),
    "limits.cpu": ("limits", "cpu"),
    "limits.memory": ("limits", "memory"),
}


def _revision(obj: Obj) -> int:
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return int(rv) if isinstance(rv, str) and rv.isdigit() else 0


def _require_specified(request: AdmissionRequest, quotas: list[Obj], hard: HardOf) -> None:
    """A quota on a compute resource needs every container to state it (kube's pod evaluator
    constraint), else the usage it charges would be a guess: `failed quota: q: must specify cpu`."""
    spec = (request.object or {}).get("spec")
    containers = all_containers(spec) if isinstance(spec, Mapping) else []
    # what every container states, by requests/limits (computed once, asked per quota and name)
    stated_by_all = {
        which: set.intersection(*(set(container_resources(c, which)) for c in containers)) if containers else set()
        for which in ("requests", "limits")
    }
    for quota in quotas:
        missing = set()
        for name in hard(quota):
            if name not in _COMPUTE:
                continue
            which, resource = _COMPUTE[name]
            if containers and resource not in stated_by_all[which]:
                missing.add(name)
        if missing:
            raise errors.forbidden(
                f'pods "{request.name}" is forbidden: failed quota: {quota["metadata"]["name"]}: '
                f"must specify {','.join(sorted(missing))}"
            )


class _QuotaGone(Exception):
    """The quota was deleted between the list and the charge."""
