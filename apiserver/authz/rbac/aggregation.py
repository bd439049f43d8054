"""Aggregated ClusterRoles get their rules written: what kube's clusterrole-aggregation
controller does, so that `kubectl describe clusterrole view` shows what view allows.

Authorization never waits for this (the RBAC snapshot computes aggregation itself); the
writer only keeps the stored objects in step.  It wakes when the ClusterRoles cache changed,
computes each aggregated role's rules from the cache, and writes those that differ.  Every
apiserver may run it: they compute the same rules, and a write that changes nothing is not
written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol

from apiserver import errors
from apiserver.authz.rbac.policy import picked_by
from apiserver.registry.generic import Registry
from machinery.objects import Obj

log = logging.getLogger("raftkube.apiserver")


class RoleCache(Protocol):
    @property
    def generation(self) -> int: ...

    def objects(self) -> Iterator[Obj]: ...


def wanted_rules(roles: list[Obj]) -> dict[str, list[Any]]:
    """name -> the rules each aggregated ClusterRole should hold, exactly as kube's
    clusterrole-aggregation controller writes them: for each selector in order, the roles it
    picks (itself excepted) by name, their stored rules verbatim, each rule once.

    Verbatim, not normalised: kube-controller-manager runs that controller too (`raftkube up
    --upstream controller-manager`), and two writers whose rules differ only in order would
    rewrite the role back and forth for ever.  A role aggregated from aggregated roles
    converges in a few rounds; authorization never waits for it (PolicySnapshot resolves)."""
    by_name: dict[str, Obj] = {}
    for role in roles:
        role_name = (role.get("metadata") or {}).get("name")
        if isinstance(role_name, str):
            by_name[role_name] = role
    ordered = sorted(by_name.items())
    out: dict[str, list[Any]] = {}
    for name, role in ordered:
        aggregation = role.get("aggregationRule")
        if not isinstance(aggregation, dict):
            continue
        rules: list[Any] = []
        for _, other in picked_by(aggregation, name, ordered):
            picked = other.get("rules")
            for rule in picked if isinstance(picked, list) else []:
                if rule not in rules:
                    rules.append(rule)
        out[name] = rules
    return out


async def keep_aggregated(
    cache: RoleCache,
    registry: Registry,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    interval: float = 0.1,
) -> None:
    """Runs until cancelled."""
    seen = -1
    while True:
        if cache.generation != seen:
            seen = cache.generation
            roles = list(cache.objects())
            current = {(r.get("metadata") or {}).get("name"): r.get("rules") for r in roles}
            for name, rules in wanted_rules(roles).items():
                if current.get(name) == rules:
                    continue

                def with_rules(role: Obj | None, rules: list[Any] = rules) -> Obj:
                    if role is None:
                        raise errors.not_found("clusterroles", "", "rbac.authorization.k8s.io")
                    role["rules"] = rules
                    return role

                try:
                    await registry.mutate(None, name, with_rules, manager="clusterrole-aggregation-controller")
                except errors.StatusError as e:
                    log.info("aggregating clusterrole %s: %s", name, e.message)
        await sleep(interval)
