"""The APIServices' `Available` condition, and the resources of each remote group-version.

kube-aggregator's two availability controllers in one loop: a local APIService (no
`spec.service`) is always available (`Local`); a remote one is when its Service exists, has a
ready endpoint, and the server there answers `GET /apis/<group>/<version>` (200, or 403: up
but not telling) within 5 s (`Passed`, "all checks passed"); otherwise `ServiceNotFound`,
`MissingEndpoints` or `FailedDiscoveryCheck` with kube's messages.  The condition is written
only when it changes (a status that holds keeps its lastTransitionTime), through the registry's
status subresource, so a watcher sees each change once.

The same GET gives the group-version's APIResourceList, which discovery serves beside our
own groups (`remote_versions`); the server's OpenAPI v3 root says where its document of the
group-version is, which /openapi/v3 lists and relays (`remote_openapi`).  Remote APIServices
are checked when the set of APIServices changes, every `recheck` seconds after, and every
`retry` seconds while unavailable (a server just starting is picked up quickly).  Checks run
side by side, each bounded in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from apiserver import errors
from apiserver.aggregator.proxy import AggregatorClient, Unreachable, service_of
from apiserver.discovery import RemoteGroupVersion
from apiserver.registry.generic import Registry
from apiserver.registry.strategy import STATUS
from apiserver.watchcache.cacher import Cacher
from machinery.conditions import merge_conditions
from machinery.objects import Obj, as_dict
from machinery.timestamps import format_time

log = logging.getLogger("raftkube.apiserver.aggregator")

MANAGER = "kube-apiserver"
AVAILABLE = "Available"
PASSED = ("True", "Passed", "all checks passed")
LOCAL = ("True", "Local", "Local APIServices are always available")


def is_available(apiservice: Obj) -> bool:
    """Whether the APIService's stored `Available` condition is True."""
    for cond in as_dict(apiservice.get("status")).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == AVAILABLE:
            return cond.get("status") == "True"
    return False


class APIServiceAvailability:
    """Runs until cancelled (`run`); `check_all` is one pass, for tests."""

    def __init__(
        self,
        cache: Cacher,
        registry: Registry,
        client: AggregatorClient | None,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        interval: float = 0.5,
        recheck: float = 10.0,
        retry: float = 2.0,
    ) -> None:
        self.cache, self.registry, self.client = cache, registry, client
        self.clock, self.sleep = clock, sleep
        self.interval, self.recheck, self.retry = interval, recheck, retry
        self._discovered: dict[str, RemoteGroupVersion] = {}
        self._openapi: dict[str, str] = {}  # APIService name -> its server's OpenAPI v3 document URL
        self._due: dict[str, float] = {}  # APIService name -> when to check it next (monotonic)

    def remote_versions(self) -> tuple[RemoteGroupVersion, ...]:
        """The remote group-versions whose resources are known and whose APIService is available."""
        out = []
        for name, remote in self._discovered.items():
            current = self.cache.get_object(None, name)
            if current is not None and service_of(current) is not None and is_available(current):
                out.append(remote)
        return tuple(out)

    def remote_openapi(self) -> dict[str, str]:
        """`apis/<group>/<version>` -> the server-relative URL of its OpenAPI v3 document, for
        the available remote group-versions whose servers publish one."""
        out = {}
        for remote in self.remote_versions():
            url = self._openapi.get(f"{remote.version}.{remote.group}")
            if url is not None:
                out[f"apis/{remote.group}/{remote.version}"] = url
        return out

    def remote_for(self, group: str, version: str) -> Obj | None:
        """The APIService handing `group/version` to another server (None: none, or a local one)."""
        found = self.cache.get_object(None, f"{version}.{group}")
        return found if found is not None and service_of(found) is not None else None

    async def run(self) -> None:
        seen = -1
        while True:
            if self.cache.ready:
                changed = self.cache.generation != seen
                seen = self.cache.generation
                try:
                    await self.check_all(force=changed)
                except Exception:  # one bad pass never stops the loop: the next one retries
                    log.exception("checking APIServices")
            await self.sleep(self.interval)

    async def check_all(self, *, force: bool = True) -> None:
        """Check the APIServices that are due (all of them with `force`)."""
        now = time.monotonic()
        current = {str(a["metadata"]["name"]): a for a in self.cache.objects()}
        for gone in [n for n in self._discovered if n not in current]:
            del self._discovered[gone]
        for gone in [n for n in self._due if n not in current]:
            del self._due[gone]
        for gone in [n for n in self._openapi if n not in current]:
            del self._openapi[gone]
        due = [a for n, a in current.items() if force or now >= self._due.get(n, 0.0)]
        await asyncio.gather(*(self._check(a) for a in due))

    async def _check(self, apiservice: Obj) -> None:
        name = str(apiservice["metadata"]["name"])
        if service_of(apiservice) is None:
            self._discovered.pop(name, None)
            self._due[name] = float("inf")  # local: nothing changes it but an edit
            await self._set(apiservice, LOCAL)
            return
        wanted: tuple[str, str, str]
        if self.client is None:
            wanted = ("False", "ServiceAccessError", "this apiserver has no front-proxy certificate to call it with")
        else:
            try:
                found = await self.client.discover(apiservice)
                wanted = PASSED
                spec = as_dict(apiservice.get("spec"))
                resources = found.get("resources") if isinstance(found, dict) else None
                self._discovered[name] = RemoteGroupVersion.of(
                    str(spec.get("group") or ""),
                    str(spec.get("version") or ""),
                    spec.get("groupPriorityMinimum"),
                    spec.get("versionPriority"),
                    resources if isinstance(resources, list) else [],
                )
                url = await self.client.openapi_url(apiservice)
                if url is None:
                    self._openapi.pop(name, None)
                else:
                    self._openapi[name] = url
            except Unreachable as e:
                wanted = ("False", e.reason, str(e))
                self._discovered.pop(name, None)
        self._due[name] = time.monotonic() + (self.recheck if wanted[0] == "True" else self.retry)
        await self._set(apiservice, wanted)

    async def _set(self, apiservice: Obj, wanted: tuple[str, str, str]) -> None:
        status, reason, message = wanted
        for cond in as_dict(apiservice.get("status")).get("conditions") or ():
            if isinstance(cond, dict) and cond.get("type") == AVAILABLE:
                if (cond.get("status"), cond.get("reason"), cond.get("message")) == wanted:
                    return
        condition = {
            "type": AVAILABLE,
            "status": status,
            "lastTransitionTime": format_time(self.clock()),
            "reason": reason,
            "message": message,
        }

        def with_condition(obj: Obj | None) -> Obj:
            if obj is None:
                raise errors.not_found("apiservices", str(apiservice["metadata"]["name"]), "apiregistration.k8s.io")
            found = obj.get("status")
            current: dict[str, Any] = found if isinstance(found, dict) else {}
            current["conditions"] = merge_conditions(list(current.get("conditions") or ()), [condition])
            obj["status"] = current
            return obj

        if status != "True":
            log.info("APIService %s is not available: %s", apiservice["metadata"]["name"], message)
        with contextlib.suppress(errors.StatusError):  # gone or conflicting: the next pass sees why
            await self.registry.mutate(
                None, str(apiservice["metadata"]["name"]), with_condition, subresource=STATUS, manager=MANAGER
            )
