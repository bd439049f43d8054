"""Which writes a policy's `matchConstraints` (or a binding's `matchResources`) covers.

kube's semantics (admission/plugin/policy/matching and the webhook rule predicates): a
namespaced request matches when the namespace's labels match `namespaceSelector` (a
Namespace itself is matched by its own labels; other cluster-scoped objects always match);
`objectSelector` matches the new or the old object's labels; the request must match no
`excludeResourceRules` and one `resourceRules` entry (none listed: every resource).  A rule
matches on operation, group, version, resource (`*`, `*/*`, `pods/*`, `*/status`), scope and
`resourceNames`: the matcher is apiserver/admission/rules.py, the one webhooks use; what is
here is reading a policy's rules strictly (a malformed one is an error, not a rule matching
nothing).  This server serves one version of each resource, so `matchPolicy: Equivalent` finds
no other version to convert to and matches as `Exact` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.admission.interface import AdmissionRequest
from apiserver.admission.rules import Rule, Target, split_resource
from machinery.selectors import LabelSelector, SelectorError

OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT", "*")
SCOPES = ("*", "Cluster", "Namespaced")


class MatchError(ValueError):
    """A malformed rule or selector: `field` says where, as kube's validation would."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def _strings(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MatchError(field, "must be a list of strings")
    return tuple(value)


def parse_selector(value: Any, field: str) -> LabelSelector:
    """An absent selector is defaulted to `{}` (everything), as the API defaults it."""
    try:
        return LabelSelector.from_dict({} if value is None else value)
    except SelectorError as e:
        raise MatchError(field, str(e)) from None


def _is_namespace(request: AdmissionRequest) -> bool:
    return request.resource.group == "" and request.resource.plural == "namespaces"


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str] | None:
    if not isinstance(obj, Mapping):
        return None
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        return {}
    return {str(k): str(v) for k, v in labels.items()}


def parse_rule(value: Any, field: str) -> Rule:
    """One NamedRuleWithOperations, refused (MatchError) when it is not one."""
    if not isinstance(value, dict):
        raise MatchError(field, "must be an object")
    operations = _strings(value.get("operations"), f"{field}.operations")
    for i, op in enumerate(operations):
        if op not in OPERATIONS:
            raise MatchError(f"{field}.operations[{i}]", f"unsupported operation {op!r}")
    scope = value.get("scope") or "*"
    if scope not in SCOPES:
        raise MatchError(f"{field}.scope", f"unsupported scope {scope!r}")
    return Rule(
        operations=frozenset(operations),
        api_groups=frozenset(_strings(value.get("apiGroups"), f"{field}.apiGroups")),
        api_versions=frozenset(_strings(value.get("apiVersions"), f"{field}.apiVersions")),
        resources=tuple(split_resource(r) for r in _strings(value.get("resources"), f"{field}.resources")),
        scope=scope,
        resource_names=frozenset(_strings(value.get("resourceNames"), f"{field}.resourceNames")),
    )


def target_of(request: AdmissionRequest) -> Target:
    """The request as rules see it (a policy's scope reads the request's own namespace)."""
    res = request.resource
    return Target(
        request.operation,
        res.group,
        res.version,
        res.plural,
        request.subresource,
        request.namespace or "",
        request.name,
    )


@dataclass(frozen=True, slots=True)
class MatchResources:
    """A parsed MatchResources: `matches(request, namespace_labels)` says whether it covers
    the write; `namespace_labels(name)` is asked only when a namespace selector needs it."""

    namespace_selector: LabelSelector
    object_selector: LabelSelector
    rules: tuple[Rule, ...]
    excluded: tuple[Rule, ...]
    exact: bool

    @classmethod
    def parse(cls, value: Any, field: str) -> MatchResources:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise MatchError(field, "must be an object")

        def rules(key: str) -> tuple[Rule, ...]:
            items = value.get(key)
            if items is None:
                return ()
            if not isinstance(items, list):
                raise MatchError(f"{field}.{key}", "must be a list")
            return tuple(parse_rule(r, f"{field}.{key}[{i}]") for i, r in enumerate(items))

        policy = value.get("matchPolicy") or "Equivalent"
        if policy not in ("Exact", "Equivalent"):
            raise MatchError(f"{field}.matchPolicy", f"unsupported match policy {policy!r}")
        return cls(
            parse_selector(value.get("namespaceSelector"), f"{field}.namespaceSelector"),
            parse_selector(value.get("objectSelector"), f"{field}.objectSelector"),
            rules("resourceRules"),
            rules("excludeResourceRules"),
            policy == "Exact",
        )

    def matches(self, request: AdmissionRequest, namespace_labels: Callable[[str], Mapping[str, str]]) -> bool:
        if not self._namespace(request, namespace_labels) or not self._object(request):
            return False
        target = target_of(request)
        if any(r.matches(target) for r in self.excluded):
            return False
        return not self.rules or any(r.matches(target) for r in self.rules)

    def _namespace(self, request: AdmissionRequest, namespace_labels: Callable[[str], Mapping[str, str]]) -> bool:
        if self.namespace_selector.empty():
            return True
        if _is_namespace(request):
            own = request.old_object if request.operation == "DELETE" else request.object
            return self.namespace_selector.matches(_labels(own) or {})
        if not request.namespace:
            return True  # cluster-scoped objects are not in a namespace to select
        return self.namespace_selector.matches(namespace_labels(request.namespace))

    def _object(self, request: AdmissionRequest) -> bool:
        if self.object_selector.empty():
            return True
        for obj in (request.object, request.old_object):
            labels = _labels(obj)
            if labels is not None and self.object_selector.matches(labels):
                return True
        return False
