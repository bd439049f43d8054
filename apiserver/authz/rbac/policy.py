"""A snapshot of every Role, ClusterRole and binding, indexed for the question RBAC asks:
which rules apply to this user in this namespace?

Built from plain object dicts (the watch caches' current objects), so it is pure and
testable.  Aggregated ClusterRoles (`aggregationRule`) get the union of the rules of the
ClusterRoles their selectors pick, computed here, so a new aggregated rule applies as soon
as the snapshot is rebuilt, without a controller round trip.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.auth.user import User
from apiserver.authz.rbac.rules import Rule, parse_rules
from machinery.objects import metadata
from machinery.selectors import LabelSelector, SelectorError

Obj = Mapping[str, Any]
SA_PREFIX = "system:serviceaccount:"


@dataclass(frozen=True, slots=True)
class RoleRef:
    kind: str  # Role or ClusterRole
    name: str


@dataclass(frozen=True, slots=True)
class Binding:
    namespace: str  # "" for a ClusterRoleBinding
    name: str
    role: RoleRef


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _subject_keys(subject: Any, binding_namespace: str) -> list[tuple[str, str]]:
    """The index keys a binding subject matches: ("user", name), ("group", name)."""
    if not isinstance(subject, Mapping):
        return []
    kind, name = _str(subject.get("kind")), _str(subject.get("name"))
    if not name:
        return []
    if kind == "User":
        return [("user", name)]
    if kind == "Group":
        return [("group", name)]
    if kind == "ServiceAccount":
        namespace = _str(subject.get("namespace")) or binding_namespace
        return [("user", f"{SA_PREFIX}{namespace}:{name}")] if namespace else []
    return []


def user_keys(user: User) -> list[tuple[str, str]]:
    return [("user", user.name), *(("group", g) for g in user.groups)]


class PolicySnapshot:
    """Immutable once built; the authorizer swaps in a new one when a cache changed."""

    def __init__(
        self,
        cluster_roles: Iterable[Obj] = (),
        roles: Iterable[Obj] = (),
        cluster_role_bindings: Iterable[Obj] = (),
        role_bindings: Iterable[Obj] = (),
    ) -> None:
        self._cluster_roles: dict[str, Obj] = {}
        for role in cluster_roles:
            name = _str(metadata(role).get("name"))
            if name:
                self._cluster_roles[name] = role
        self._roles: dict[tuple[str, str], list[Rule]] = {}
        for role in roles:
            meta = metadata(role)
            self._roles[(_str(meta.get("namespace")), _str(meta.get("name")))] = parse_rules(role.get("rules"))
        self._cluster_rules: dict[str, list[Rule]] = {}
        # subject key -> bindings: a user's bindings are a few dict lookups, not a scan
        self._cluster_bindings: dict[tuple[str, str], list[Binding]] = {}
        self._namespace_bindings: dict[str, dict[tuple[str, str], list[Binding]]] = {}
        for obj in cluster_role_bindings:
            self._index(obj, "", self._cluster_bindings)
        for obj in role_bindings:
            namespace = _str(metadata(obj).get("namespace"))
            if namespace:
                self._index(obj, namespace, self._namespace_bindings.setdefault(namespace, {}))

    @staticmethod
    def _index(obj: Obj, namespace: str, into: dict[tuple[str, str], list[Binding]]) -> None:
        ref = obj.get("roleRef")
        if not isinstance(ref, Mapping):
            return
        kind, role_name = _str(ref.get("kind")), _str(ref.get("name"))
        if kind not in ("Role", "ClusterRole") or not role_name or (kind == "Role" and not namespace):
            return
        binding = Binding(namespace, _str(metadata(obj).get("name")), RoleRef(kind, role_name))
        subjects = obj.get("subjects")
        for subject in subjects if isinstance(subjects, list) else []:
            for key in _subject_keys(subject, namespace):
                into.setdefault(key, []).append(binding)

    # ---- roles ------------------------------------------------------------------------------

    def cluster_role_rules(self, name: str) -> list[Rule]:
        """A ClusterRole's rules, aggregated ones included; [] for a missing role."""
        cached = self._cluster_rules.get(name)
        if cached is None:
            cached = self._resolve(name, set())
            self._cluster_rules[name] = cached
        return cached

    def _resolve(self, name: str, visiting: set[str]) -> list[Rule]:
        role = self._cluster_roles.get(name)
        if role is None or name in visiting:
            return []
        aggregation = role.get("aggregationRule")
        if not isinstance(aggregation, Mapping):
            return parse_rules(role.get("rules"))
        visiting.add(name)
        rules: list[Rule] = []
        seen: set[Rule] = set()
        for other_name, _ in picked_by(aggregation, name, sorted(self._cluster_roles.items())):
            for rule in self._resolve(other_name, visiting):
                if rule not in seen:
                    seen.add(rule)
                    rules.append(rule)
        visiting.discard(name)
        return rules

    def role_rules(self, ref: RoleRef, namespace: str) -> list[Rule]:
        if ref.kind == "ClusterRole":
            return self.cluster_role_rules(ref.name)
        return self._roles.get((namespace, ref.name), [])

    # ---- bindings ---------------------------------------------------------------------------

    def bindings_for(self, user: User, namespace: str) -> list[Binding]:
        """The ClusterRoleBindings, then the RoleBindings of `namespace`, naming the user."""
        keys = user_keys(user)
        found: list[Binding] = []
        for key in keys:
            found.extend(self._cluster_bindings.get(key, ()))
        if namespace:
            by_subject = self._namespace_bindings.get(namespace, {})
            for key in keys:
                found.extend(by_subject.get(key, ()))
        return found

    def rules_for(self, user: User, namespace: str) -> list[Rule]:
        """Every rule that applies to `user` in `namespace` ("" = cluster-wide rules only)."""
        rules: list[Rule] = []
        seen: set[Rule] = set()
        for binding in self.bindings_for(user, namespace):
            for rule in self.role_rules(binding.role, binding.namespace):
                if rule not in seen:
                    seen.add(rule)
                    rules.append(rule)
        return rules


def picked_by(aggregation: Mapping[str, Any], name: str, roles: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """The cluster roles (from `roles`, in their order, per selector in turn) that the
    aggregationRule of role `name` picks: kube's aggregation semantics, once for the authorizer
    (PolicySnapshot) and the aggregation writer.  A malformed or empty selector picks nothing,
    and a role never picks itself."""
    candidates = list(roles)
    selectors = aggregation.get("clusterRoleSelectors")
    for raw in selectors if isinstance(selectors, list) else []:
        try:
            selector = LabelSelector.from_dict(raw if isinstance(raw, dict) else None)
        except SelectorError:
            continue
        if selector.empty():
            continue  # an empty selector picks nothing, as kube's aggregation controller does
        for other_name, other in candidates:
            labels = metadata(other).get("labels")
            if other_name != name and selector.matches(labels if isinstance(labels, Mapping) else {}):
                yield other_name, other
