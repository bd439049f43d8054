"""The authorizer chain a server runs, assembled from `--authorization-mode` and its caches.

Modes as kube-apiserver names them: `Node,RBAC` (the default), `RBAC`, or `AlwaysAllow`
(every authenticated request allowed: a benchmark's baseline, never a cluster's setting).
system:masters is always allowed first, whatever the mode.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from apiserver.authz.attributes import Attributes
from apiserver.authz.interface import AllowAll, Authorizer, Chain, PrivilegedGroups
from apiserver.authz.node import NodeAuthorizer
from apiserver.authz.rbac.authorizer import CachedPolicy, RBACAuthorizer, StaticPolicy
from apiserver.authz.rbac.policy import PolicySnapshot

MODES = ("Node", "RBAC", "AlwaysAllow")
DEFAULT_MODE = "Node,RBAC"
RBAC = "rbac.authorization.k8s.io"


class ObjectCache(Protocol):
    @property
    def generation(self) -> int: ...

    def objects(self) -> Iterator[dict[str, Any]]: ...

    def get_object(self, namespace: str | None, name: str) -> dict[str, Any] | None: ...


def parse_mode(text: str) -> tuple[str, ...]:
    """`Node,RBAC` -> ("Node", "RBAC"); ValueError naming what is wrong."""
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    if not modes:
        raise ValueError("give at least one mode")
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; the modes are {', '.join(MODES)}")
    if len(set(modes)) != len(modes):
        raise ValueError("a mode is given twice")
    return modes


def _node_authorizer(pods: ObjectCache, claims: ObjectCache | None = None) -> NodeAuthorizer:
    def pods_on_node(node: str) -> Iterator[dict[str, Any]]:
        # a scan of the cached pods: fine for the kubelets' occasional secret and config map
        # reads; an index by node name belongs in the cache if this shows up in profiles
        return (p for p in pods.objects() if (p.get("spec") or {}).get("nodeName") == node)

    return NodeAuthorizer(pods_on_node, pods.get_object, claims.get_object if claims is not None else None)


class Authorization:
    """The chain, and the RBAC policy that reviews list rules from."""

    def __init__(self, modes: tuple[str, ...], caches: Mapping[tuple[str, str], ObjectCache]) -> None:
        members: list[Authorizer] = [PrivilegedGroups()]
        self._rbac = RBACAuthorizer(StaticPolicy(PolicySnapshot()))
        for mode in modes:
            if mode == "AlwaysAllow":
                members.append(AllowAll())
            elif mode == "Node":
                members.append(_node_authorizer(caches[("", "pods")], caches.get(("", "persistentvolumeclaims"))))
            elif mode == "RBAC":
                self._rbac = RBACAuthorizer(
                    CachedPolicy(
                        caches[(RBAC, "clusterroles")],
                        caches[(RBAC, "roles")],
                        caches[(RBAC, "clusterrolebindings")],
                        caches[(RBAC, "rolebindings")],
                    )
                )
                members.append(self._rbac)
        self.chain = Chain(members)

    def policy(self) -> PolicySnapshot:
        return self._rbac.policy()

    def allowed(self, attrs: Attributes) -> bool:
        return self.chain.authorize(attrs).allowed
