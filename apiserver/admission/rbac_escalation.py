"""RBAC escalation prevention: nobody grants, through a role or a binding, a permission they
do not hold themselves, unless allowed to `escalate` (roles) or `bind` (bindings).

As kube does it: writing a Role or ClusterRole needs every one of its rules to be covered by
the writer's own rules in that namespace (or `escalate` on it); an `aggregationRule` needs
full authority; writing a binding needs `bind` on the role it names, or every rule of that
role.  system:masters passes.  The refusal is kube's 403, listing what is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver import errors
from apiserver.admission.interface import AdmissionRequest
from apiserver.auth.user import User
from apiserver.authz.attributes import Attributes
from apiserver.authz.interface import MASTERS_GROUP
from apiserver.authz.rbac.policy import PolicySnapshot, RoleRef
from apiserver.authz.rbac.rules import Rule, parse_rules, uncovered

RBAC = "rbac.authorization.k8s.io"
_ROLES = {"roles", "clusterroles"}
_BINDINGS = {"rolebindings", "clusterrolebindings"}
FULL_AUTHORITY = [
    Rule(frozenset({"*"}), frozenset({"*"}), frozenset({"*"})),
    Rule(frozenset({"*"}), non_resource_urls=frozenset({"*"})),
]


def _describe(rule: Rule) -> str:
    if rule.non_resource_urls:
        return f"{{NonResourceURLs:{sorted(rule.non_resource_urls)}, Verbs:{sorted(rule.verbs)}}}"
    parts = [f"APIGroups:{sorted(rule.api_groups)}", f"Resources:{sorted(rule.resources)}"]
    if rule.resource_names:
        parts.append(f"ResourceNames:{sorted(rule.resource_names)}")
    parts.append(f"Verbs:{sorted(rule.verbs)}")
    return "{" + ", ".join(parts) + "}"


def _quoted(items: tuple[str, ...]) -> str:
    return "[" + " ".join(f'"{g}"' for g in items) + "]"


class RBACEscalation:
    name = "RBACEscalation"

    def __init__(self, policy: Callable[[], PolicySnapshot], allowed: Callable[[Attributes], bool]) -> None:
        self._policy = policy
        self._allowed = allowed

    def handles(self, request: AdmissionRequest) -> bool:
        return (
            request.resource.group == RBAC
            and request.operation in ("CREATE", "UPDATE")
            and request.resource.plural in _ROLES | _BINDINGS
            and MASTERS_GROUP not in request.user.groups
        )

    async def validate(self, request: AdmissionRequest) -> None:
        obj = request.object or {}
        plural = request.resource.plural
        namespace = request.namespace or ""
        if plural in _ROLES:
            if self._may(request.user, "escalate", plural, namespace, request.name):
                return
            wanted = parse_rules(obj.get("rules"))
            if plural == "clusterroles" and isinstance(obj.get("aggregationRule"), dict):
                wanted = [*wanted, *FULL_AUTHORITY]
        else:
            ref = obj.get("roleRef") or {}
            kind = str(ref.get("kind", "")) if isinstance(ref, dict) else ""
            role_name = str(ref.get("name", "")) if isinstance(ref, dict) else ""
            role_plural = "clusterroles" if kind == "ClusterRole" else "roles"
            role_ns = "" if kind == "ClusterRole" and plural == "clusterrolebindings" else namespace
            if self._may(request.user, "bind", role_plural, role_ns, role_name):
                return
            wanted = self._policy().role_rules(RoleRef(kind, role_name), namespace)
        have = self._policy().rules_for(request.user, namespace)
        missing = uncovered(have, wanted)
        if missing:
            raise self._refusal(request, missing)

    def _may(self, user: User, verb: str, plural: str, namespace: str, name: str) -> bool:
        return self._allowed(
            Attributes(
                user=user,
                verb=verb,
                resource_request=True,
                namespace=namespace,
                api_group=RBAC,
                resource=plural,
                name=name,
            )
        )

    def _refusal(self, request: AdmissionRequest, missing: list[Rule]) -> errors.StatusError:
        user = request.user
        shown = "\n".join(_describe(r) for r in missing[:50])
        more = f"\n... and {len(missing) - 50} more" if len(missing) > 50 else ""
        message = (
            f'{request.resource.plural}.{RBAC} "{request.name}" is forbidden: user "{user.name}" '
            f"(groups={_quoted(user.groups)}) is attempting to grant RBAC permissions not currently held:\n"
            f"{shown}{more}"
        )
        details: dict[str, Any] = {"name": request.name, "group": RBAC, "kind": request.resource.plural}
        return errors.StatusError(403, "Forbidden", message, details)
