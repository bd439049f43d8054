"""The APIServices of the group-versions this server serves itself (kube's autoregister and
crdregistration controllers), so `kubectl get apiservices` lists `v1.`, `v1.apps`, ... as Local.

Built-in group-versions get kube-apiserver's priorities (its table, below) and the label
`kube-aggregator.kubernetes.io/automanaged: onstart`; a group-version kube's table does not
name is not registered, as kube skips it.  One exception, decided here: metrics.k8s.io, which
this server computes itself where a kube cluster has metrics-server register it, is registered
with the priorities metrics-server's manifest uses (100, 100).  Each served version of a
CustomResourceDefinition gets one labelled `automanaged: "true"` (priorities 1000 and 100),
removed when no CRD serves it any more.  An APIService someone else made (no automanaged label)
is never touched.  Status is the availability loop's (Local: always available).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from apiserver import errors
from apiserver.kubernetes_service import keep_object
from apiserver.registry.deletion import DeleteOptions
from apiserver.registry.generic import Registry
from apiserver.resources.base import ResourceDef
from apiserver.watchcache.cacher import Cacher
from machinery.objects import Obj

log = logging.getLogger("raftkube.apiserver.aggregator")

AUTOMANAGED = "kube-aggregator.kubernetes.io/automanaged"
ON_START = "onstart"  # a built-in group-version
CUSTOM = "true"  # a CustomResourceDefinition's group-version
CUSTOM_PRIORITY = (1000, 100)  # crdregistration: low, sorted among themselves by version
SYNC_PERIOD_S = 2.0

# kube-apiserver's (group, version) -> (groupPriorityMinimum, versionPriority), for what it serves
BUILT_IN_PRIORITY: dict[tuple[str, str], tuple[int, int]] = {
    ("", "v1"): (18000, 1),
    ("events.k8s.io", "v1"): (17750, 15),
    ("authentication.k8s.io", "v1"): (17700, 15),
    ("authorization.k8s.io", "v1"): (17600, 15),
    ("certificates.k8s.io", "v1"): (17300, 15),
    ("rbac.authorization.k8s.io", "v1"): (17000, 15),
    ("apiextensions.k8s.io", "v1"): (16700, 15),
    ("admissionregistration.k8s.io", "v1"): (16700, 15),
    ("coordination.k8s.io", "v1"): (16500, 15),
    ("discovery.k8s.io", "v1"): (16200, 15),
    ("flowcontrol.apiserver.k8s.io", "v1"): (16100, 21),
    ("apps", "v1"): (17800, 15),
    ("autoscaling", "v1"): (17500, 15),
    ("autoscaling", "v2"): (17500, 30),
    ("batch", "v1"): (17400, 15),
    ("networking.k8s.io", "v1"): (17200, 15),
    ("policy", "v1"): (17100, 15),
    ("storage.k8s.io", "v1"): (16800, 15),
    ("scheduling.k8s.io", "v1"): (16600, 15),
    ("node.k8s.io", "v1"): (16300, 15),
    ("metrics.k8s.io", "v1beta1"): (100, 100),  # see the module docstring
}


def apiservice(group: str, version: str, priority: tuple[int, int], managed: str) -> Obj:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": f"{version}.{group}", "labels": {AUTOMANAGED: managed}},
        "spec": {
            "group": group,
            "version": version,
            "groupPriorityMinimum": priority[0],
            "versionPriority": priority[1],
        },
    }


def wanted(built_in: Iterable[tuple[str, str]], served: Iterable[ResourceDef]) -> dict[str, Obj]:
    """The local APIServices by name: `built_in`, the group-versions served at start; the rest of
    `served` (what is served now) are custom resources'."""
    fixed = set(built_in)
    out: dict[str, Obj] = {}
    for group, version in sorted(fixed):
        priority = BUILT_IN_PRIORITY.get((group, version))
        if priority is not None:
            made = apiservice(group, version, priority, ON_START)
            out[made["metadata"]["name"]] = made
    for res in served:
        if (res.group, res.version) not in fixed:
            made = apiservice(res.group, res.version, CUSTOM_PRIORITY, CUSTOM)
            out[made["metadata"]["name"]] = made
    return out


class LocalAPIServices:
    """Keeps the local APIServices as `wanted` says, every SYNC_PERIOD_S (a write only on a
    difference).  `sync_once` is one pass, for tests."""

    def __init__(
        self,
        registry: Registry,
        cache: Cacher,
        built_in: Iterable[tuple[str, str]],
        served: Callable[[], Iterable[ResourceDef]],
    ) -> None:
        self.registry = registry
        self.cache = cache
        self.built_in = frozenset(built_in)
        self.served = served

    async def sync_once(self) -> None:
        want = wanted(self.built_in, self.served())
        have = {str(o["metadata"]["name"]): o for o in self.cache.objects()}
        for name, obj in want.items():
            current = have.get(name)
            if current is not None and (current["metadata"].get("labels") or {}).get(AUTOMANAGED) is None:
                continue  # someone else's: theirs to keep
            if current is None or current.get("spec") != {**(current.get("spec") or {}), **obj["spec"]}:
                done = await keep_object(self.registry, obj)
                if done:
                    log.info("APIService %s %s", name, done)
        for name, current in have.items():
            if name not in want and (current["metadata"].get("labels") or {}).get(AUTOMANAGED) in (ON_START, CUSTOM):
                with contextlib.suppress(errors.StatusError):  # gone already, or changed: the next pass sees
                    await self.registry.delete(None, name, DeleteOptions())
                    log.info("APIService %s removed: nothing here serves it", name)

    async def run(self) -> None:
        while True:
            try:
                await self.sync_once()
            except errors.StatusError as e:
                log.warning("keeping the local APIServices: %s", e)
            await asyncio.sleep(SYNC_PERIOD_S)
