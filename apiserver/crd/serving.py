"""Keeps what the server serves in step with the stored CustomResourceDefinitions.

One loop per apiserver, following the CRDs' watch cache, does what kube's apiextensions
controllers do between them:

* naming: a CRD whose plural or kind is already served in its group (by another CRD or a
  built-in kind) is not served; its `NamesAccepted` condition says which name conflicts;
* serving: each served version becomes a `ResourceDef` in the scope (registry, watch cache,
  discovery, OpenAPI) and its schema is told to pruning; a changed spec rebuilds them, as kube
  recreates a CRD's storage;
* establishing: once served, `Established` is set (clients wait for it before using the kind),
  with `acceptedNames` and `storedVersions`;
* finalizing: a deleted CRD (held by `customresourcecleanup.apiextensions.k8s.io`) is marked
  `Terminating`, its objects are deleted (each as by a DELETE, so their own finalizers hold
  them), and once none is left the finalizer goes and so does the CRD.

Several apiservers on one store each run this loop; what they write is the same, so they agree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from apiserver import errors, pruning
from apiserver.admission.webhook.client import ServiceResolver, WebhookClient
from apiserver.admission.webhook.config import TLSContexts
from apiserver.crd import kinds
from apiserver.crd.conversion import TIMEOUT_S, WebhookConverter
from apiserver.http.handlers.scope import ResourceScope
from apiserver.patch import schema as patch_schema
from apiserver.registry.deletion import DeleteOptions
from apiserver.registry.strategy import STATUS
from apiserver.resources.apiextensions_customresourcedefinitions import CLEANUP_FINALIZER
from apiserver.resources.base import ResourceDef
from machinery.conditions import merge_conditions
from machinery.objects import Obj
from machinery.timestamps import format_time

log = logging.getLogger("raftkube.apiserver.crd")

MANAGER = "kube-apiserver"
CLEANUP_BATCH = 500  # objects deleted per pass of the loop, so one huge CRD does not stall the rest


def _condition(kind: str, status: str, reason: str, message: str, now: float) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "lastTransitionTime": format_time(now),
        "reason": reason,
        "message": message,
    }


def _forget(res: ResourceDef) -> None:
    pruning.forget_custom(res.group, res.version, res.kind)
    patch_schema.forget_custom(res.group, res.version, res.kind)


class CustomResourceServing:
    """Runs until cancelled (`run`); `sync` is one pass, for tests."""

    def __init__(
        self,
        scope: ResourceScope,
        crds: ResourceDef,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        interval: float = 0.1,
        resolve_service: ServiceResolver | None = None,
    ) -> None:
        self.scope = scope
        # conversion webhooks are called as admission webhooks are (service routing, CA bundles)
        self.webhooks = WebhookClient(resolve_service=resolve_service)
        self.tls = TLSContexts()
        self.crds = crds
        self.clock = clock
        self.sleep = sleep
        self.interval = interval
        # CRD name -> (the spec it was served from, the definitions serving it)
        self.served: dict[str, tuple[bytes, list[ResourceDef]]] = {}
        self._pending = False  # a CRD still being finalized: pass again even without a change
        self.synced = False  # the stored CRDs have been served once (the server is ready)
        self.conversion_timeout = TIMEOUT_S  # seconds a conversion webhook gets (kube: 30, fixed)

    async def run(self) -> None:
        cache = self.scope.caches[self.crds]
        seen = -1
        while True:
            if cache.ready and (cache.generation != seen or self._pending):
                seen = cache.generation
                try:
                    await self.sync()
                    self.synced = True
                except Exception:  # one bad pass never stops serving: the next one retries
                    log.exception("serving custom resources")
                    self._pending = True
            await self.sleep(self.interval)

    def _converter(self, crd: Obj) -> WebhookConverter | None:
        conversion = crd["spec"].get("conversion") or {}
        if conversion.get("strategy") != "Webhook":
            return None
        return WebhookConverter(
            str(crd["metadata"]["name"]), conversion, self.webhooks, self.tls, self.conversion_timeout
        )

    async def stop(self) -> None:
        for _, served in self.served.values():
            for res in served:
                _forget(res)
        self.served.clear()
        await self.webhooks.close()

    async def sync(self) -> None:
        cache = self.scope.caches[self.crds]
        current = {str(c["metadata"]["name"]): c for c in cache.objects()}
        self._pending = False
        for name in [n for n in self.served if n not in current]:
            await self._withdraw(name)
        for _name, crd in sorted(current.items()):
            if (crd["metadata"]).get("deletionTimestamp"):
                await self._finalize(crd)
            else:
                await self._serve(crd, current)

    # -- serving ------------------------------------------------------------------------------

    async def _withdraw(self, name: str) -> None:
        _, served = self.served.pop(name)
        for res in served:
            _forget(res)
            await self.scope.withdraw(res)

    def _conflict(self, crd: Obj, current: dict[str, Obj]) -> str:
        """Why the CRD's names cannot be served ('' when they can)."""
        spec = crd["spec"]
        group, names = spec["group"], spec["names"]
        mine = crd["metadata"]["name"]
        for other_name, (_, served) in self.served.items():
            if other_name == mine:
                continue
            for res in served:
                if res.group != group:
                    continue
                if res.plural == names["plural"]:
                    return f'"{names["plural"]}" is already in use'
                if res.kind == names["kind"]:
                    return f'"{names["kind"]}" is already in use'
        for res in self.scope.resources():
            if res.group == group and res.plural == names["plural"] and not self._is_custom(res):
                return f'"{names["plural"]}" is already in use'
        return ""

    def _is_custom(self, res: ResourceDef) -> bool:
        return any(res in served for _, served in self.served.values())

    async def _serve(self, crd: Obj, current: dict[str, Obj]) -> None:
        name = str(crd["metadata"]["name"])
        signature = orjson.dumps(crd["spec"], option=orjson.OPT_SORT_KEYS)
        now = self.clock()
        served = self.served.get(name)
        if served is None or served[0] != signature:
            conflict = self._conflict(crd, current) if served is None else ""
            if conflict:
                await self._set_status(
                    crd, [_condition("NamesAccepted", "False", "NameConflict", conflict, now)], accepted=False
                )
                return
            if served is not None:
                await self._withdraw(name)
            defs = kinds.served_kinds(crd, self._converter(crd))
            for res, version in zip(defs, [x for x in crd["spec"]["versions"] if x.get("served")], strict=True):
                pruning.register_custom(res.group, res.version, res.kind, kinds.schema_of(version))
                patch_schema.register_custom(res.group, res.version, res.kind, kinds.schema_of(version))
                await self.scope.serve(res)
            self.served[name] = (signature, defs)
        await self._set_status(
            crd,
            [
                _condition("NamesAccepted", "True", "NoConflicts", "no conflicts found", now),
                _condition("Established", "True", "InitialNamesAccepted", "the initial names have been accepted", now),
            ],
            accepted=True,
        )

    async def _set_status(self, crd: Obj, wanted: list[dict[str, str]], *, accepted: bool) -> None:
        def with_status(obj: Obj | None) -> Obj:
            if obj is None:
                raise errors.not_found("customresourcedefinitions", crd["metadata"]["name"], kinds.CRD_GROUP)
            found = obj.get("status")
            status: dict[str, Any] = found if isinstance(found, dict) else {}
            status["conditions"] = merge_conditions(list(status.get("conditions") or ()), wanted)
            if accepted:
                names = obj["spec"]["names"]
                status["acceptedNames"] = {k: names[k] for k in names}
                stored = list(status.get("storedVersions") or ())
                version = kinds.storage_version(obj)
                if version not in stored:
                    stored.append(version)
                status["storedVersions"] = stored
            obj["status"] = status
            return obj

        if self._status_current(crd, wanted, accepted):
            return
        with contextlib.suppress(errors.StatusError):  # gone or conflicting: the next pass sees why
            await self.scope.registries[self.crds].mutate(
                None, crd["metadata"]["name"], with_status, subresource=STATUS, manager=MANAGER
            )

    @staticmethod
    def _status_current(crd: Obj, wanted: list[dict[str, str]], accepted: bool) -> bool:
        status = crd.get("status") or {}
        have = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, dict)}
        for cond in wanted:
            got = have.get(cond["type"])
            if got is None or any(got.get(k) != cond[k] for k in ("status", "reason", "message")):
                return False
        if accepted:
            if status.get("acceptedNames") != crd["spec"]["names"]:
                return False
            if kinds.storage_version(crd) not in (status.get("storedVersions") or ()):
                return False
        return True

    # -- finalizing ---------------------------------------------------------------------------

    async def _finalize(self, crd: Obj) -> None:
        name = str(crd["metadata"]["name"])
        if CLEANUP_FINALIZER not in (crd["metadata"].get("finalizers") or ()):
            return
        now = self.clock()
        await self._set_status(
            crd,
            [
                _condition(
                    "Terminating", "True", "InstanceDeletionInProgress", "CustomResource deletion is in progress", now
                )
            ],
            accepted=False,
        )
        served = self.served.get(name)
        if served is None:  # never served here (a name conflict, or a restart): serve to delete
            defs = kinds.served_kinds(crd, self._converter(crd))
            for res in defs:
                await self.scope.serve(res)
            served = (b"", defs)
            self.served[name] = served
        left = await self._delete_objects(served[1][0]) if served[1] else 0
        if left:
            self._pending = True
            return

        def without_finalizer(obj: Obj | None) -> Obj:
            if obj is None:
                raise errors.not_found("customresourcedefinitions", name, kinds.CRD_GROUP)
            obj["metadata"]["finalizers"] = [
                f for f in obj["metadata"].get("finalizers") or () if f != CLEANUP_FINALIZER
            ]
            return obj

        try:
            await self.scope.registries[self.crds].mutate(None, name, without_finalizer, manager=MANAGER)
        except errors.StatusError as e:
            log.info("finalizing customresourcedefinition %s: %s", name, e.message)
            self._pending = True

    async def _delete_objects(self, res: ResourceDef) -> int:
        """Delete the kind's objects (a batch of them); how many are left."""
        registry = self.scope.registries[res]
        objects = await registry.list_all(None)
        for obj in objects[:CLEANUP_BATCH]:
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            with contextlib.suppress(errors.StatusError):
                await registry.delete(meta.get("namespace"), meta["name"], DeleteOptions())
        return len(objects)
