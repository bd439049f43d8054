"""The default ServiceCIDR `kubernetes`, kept by the apiserver as kube-apiserver 1.33's
defaultservicecidr controller keeps it: made from --service-cluster-ip-range when missing, its
Ready condition set True when its CIDRs are the flag's (left alone, and said once, when
someone made it with others).  Clients and conformance find the cluster's service range there.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from apiserver import errors
from apiserver.registry.generic import Registry
from apiserver.registry.strategy import STATUS
from machinery.objects import Obj

log = logging.getLogger("raftkube.apiserver")

NAME = "kubernetes"
MANAGER = "kube-apiserver"
INTERVAL_S = 10.0
READY_MESSAGE = "Kubernetes default Service CIDR is ready"


def _rfc3339(now: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def _ready(obj: Obj) -> bool:
    conditions = (obj.get("status") or {}).get("conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


async def reconcile(registry: Registry, cidrs: list[str], clock: Callable[[], float] = time.time) -> str:
    """One round; what was done ("" for nothing), for the log."""
    done = ""
    try:
        current = await registry.get(None, NAME)
    except errors.StatusError as e:
        if e.code != 404:
            raise
        try:
            current = await registry.create(
                None, {"metadata": {"name": NAME}, "spec": {"cidrs": cidrs}}, manager=MANAGER
            )
            done = "created"
        except errors.StatusError as e2:
            if e2.code != 409:
                raise
            current = await registry.get(None, NAME)
    if (current.get("metadata") or {}).get("deletionTimestamp") or _ready(current):
        return done
    if (current.get("spec") or {}).get("cidrs") != cidrs:
        return "mismatched"  # someone made it with other CIDRs: kube leaves it and warns

    def with_ready(obj: Obj | None) -> Obj:
        assert obj is not None
        condition = {
            "type": "Ready",
            "status": "True",
            "reason": "",
            "message": READY_MESSAGE,
            "lastTransitionTime": _rfc3339(clock()),
        }
        others = [c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") != "Ready"]
        obj["status"] = {**(obj.get("status") or {}), "conditions": [*others, condition]}
        return obj

    await registry.mutate(None, NAME, with_ready, subresource=STATUS, manager=MANAGER)
    return done or "ready"


async def keep_forever(
    registry: Registry, cidrs: list[str], sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
) -> None:
    warned = False
    while True:
        try:
            done = await reconcile(registry, cidrs)
            if done == "mismatched":
                if not warned:
                    log.warning("the default ServiceCIDR %r does not have this apiserver's CIDRs %s", NAME, cidrs)
                warned = True
            elif done:
                log.info("default ServiceCIDR %s: %s", NAME, done)
        except Exception:  # the loop outlives any one round's surprise; it is logged
            log.exception("default ServiceCIDR: reconcile round failed")
        await sleep(INTERVAL_S)
