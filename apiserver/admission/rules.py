"""Which writes an admission rule covers: admissionregistration/v1 RuleWithOperations (webhooks)
and NamedRuleWithOperations (ValidatingAdmissionPolicy match constraints), as kube reads them.

A rule matches when every part does: the operation (or `*`), the API group, the version, the
resource (`pods`, `*`, `pods/status`, `*/status`, `pods/*`, `*/*`: the part after the slash is
the subresource, and a plain `pods` matches only the main resource), the scope (`Cluster`,
`Namespaced`, `*`; namespace objects count as cluster-scoped) and, for policies, the
`resourceNames` (none: every name).  Webhooks and policies match by this one Rule (kube's
admission/plugin/webhook/predicates/rules serves both); how each reads its configuration
differs (a webhook's rule of an odd shape matches nothing, a policy's is an error), so the
parsers stay with them.  Pure: compiled once per configuration change, evaluated per request.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ANY = "*"


@dataclass(frozen=True, slots=True)
class Target:
    """What a request is about, in the terms rules speak."""

    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    group: str
    version: str
    resource: str  # the plural
    subresource: str  # "" for the main resource
    namespace: str  # "" for cluster-scoped objects; a namespace object's own name for namespaces
    name: str = ""  # the object's name, for `resourceNames`

    @property
    def is_namespace_object(self) -> bool:
        return self.group == "" and self.resource == "namespaces"


@dataclass(frozen=True, slots=True)
class Rule:
    operations: frozenset[str]
    api_groups: frozenset[str]
    api_versions: frozenset[str]
    resources: tuple[tuple[str, str], ...]  # (resource, subresource) pairs, either may be "*"
    scope: str = ANY  # "Cluster", "Namespaced" or "*"
    resource_names: frozenset[str] = frozenset()  # none: every name

    def matches(self, t: Target) -> bool:
        return (
            self._scope(t)
            and (ANY in self.operations or t.operation in self.operations)
            and (ANY in self.api_groups or t.group in self.api_groups)
            and (ANY in self.api_versions or t.version in self.api_versions)
            and any(
                (res == ANY or res == t.resource) and (sub == ANY or sub == t.subresource)
                for res, sub in self.resources
            )
            and (not self.resource_names or t.name in self.resource_names)
        )

    def _scope(self, t: Target) -> bool:
        if self.scope == ANY:
            return True
        if self.scope == "Namespaced":
            return not t.is_namespace_object and t.namespace != ""
        if self.scope == "Cluster":
            return t.is_namespace_object or t.namespace == ""
        return False


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, str)]


def split_resource(text: str) -> tuple[str, str]:
    """`pods/status` -> ("pods", "status"); `pods` -> ("pods", "")."""
    resource, _, sub = text.partition("/")
    return resource, sub


def parse_rule(raw: Any) -> Rule:
    """A RuleWithOperations as stored (validated on write; odd shapes here match nothing)."""
    if not isinstance(raw, dict):
        return Rule(frozenset(), frozenset(), frozenset(), ())
    scope = raw.get("scope")
    return Rule(
        operations=frozenset(_strings(raw.get("operations"))),
        api_groups=frozenset(_strings(raw.get("apiGroups"))),
        api_versions=frozenset(_strings(raw.get("apiVersions"))),
        resources=tuple(split_resource(r) for r in _strings(raw.get("resources"))),
        scope=scope if isinstance(scope, str) and scope else ANY,
    )


def any_matches(rules: Iterable[Rule], target: Target) -> bool:
    return any(rule.matches(target) for rule in rules)
