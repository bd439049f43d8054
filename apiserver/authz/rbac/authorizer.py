"""The RBAC authorizer: allows what a binding of the user grants, has no opinion otherwise.

It reads a `PolicySnapshot` rebuilt only when one of its sources changed (RBAC objects
change rarely; requests are many), and remembers recent answers, so the hot path of a
request is one dict lookup.  A change to any Role or binding reaches the next request as
soon as the watch cache has it (milliseconds), with no restart.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Any, Protocol

from apiserver.authz.attributes import Attributes
from apiserver.authz.interface import NO_OPINION, Decision, Verdict
from apiserver.authz.rbac.policy import PolicySnapshot
from apiserver.authz.rbac.rules import any_allows

_MEMO_SIZE = 8192
_ALLOW = Verdict(Decision.ALLOW)


class PolicySource(Protocol):
    def version(self) -> Hashable:
        """Changes whenever the snapshot would."""
        ...

    def snapshot(self) -> PolicySnapshot: ...


class RBACAuthorizer:
    def __init__(self, source: PolicySource) -> None:
        self._source = source
        self._version: Hashable = object()
        self._snapshot = PolicySnapshot()
        self._memo: OrderedDict[tuple[object, ...], bool] = OrderedDict()

    def policy(self) -> PolicySnapshot:
        """The current snapshot (rebuilt first when a source changed)."""
        version = self._source.version()
        if version != self._version:
            self._snapshot = self._source.snapshot()
            self._version = version
            self._memo.clear()
        return self._snapshot

    def authorize(self, attrs: Attributes) -> Verdict:
        policy = self.policy()
        user = attrs.user
        key = (
            user.name,
            user.groups,
            attrs.verb,
            attrs.resource_request,
            attrs.namespace,
            attrs.api_group,
            attrs.combined_resource,
            attrs.name,
            "" if attrs.resource_request else attrs.path,
        )
        allowed = self._memo.get(key)
        if allowed is None:
            allowed = any_allows(policy.rules_for(user, attrs.namespace), attrs)
            self._memo[key] = allowed
            if len(self._memo) > _MEMO_SIZE:
                self._memo.popitem(last=False)
        return _ALLOW if allowed else NO_OPINION


class StaticPolicy:
    """A fixed snapshot: for tests, and for tools that evaluate policy files offline."""

    def __init__(self, snapshot: PolicySnapshot) -> None:
        self._snapshot = snapshot

    def version(self) -> Hashable:
        return 0

    def snapshot(self) -> PolicySnapshot:
        return self._snapshot


class Source(Protocol):
    """What `CachedPolicy` needs of a watch cache."""

    @property
    def generation(self) -> int: ...

    def objects(self) -> Iterator[dict[str, Any]]: ...


class CachedPolicy:
    """The snapshot of four live object sources (the RBAC watch caches)."""

    def __init__(
        self,
        cluster_roles: Source,
        roles: Source,
        cluster_role_bindings: Source,
        role_bindings: Source,
    ) -> None:
        self._sources = (cluster_roles, roles, cluster_role_bindings, role_bindings)

    def version(self) -> Hashable:
        a, b, c, d = self._sources  # every request asks: no generator here
        return (a.generation, b.generation, c.generation, d.generation)

    def snapshot(self) -> PolicySnapshot:
        cluster_roles, roles, crbs, rbs = (list(s.objects()) for s in self._sources)
        return PolicySnapshot(cluster_roles, roles, crbs, rbs)
