"""Policy rules: what one rule allows, and whether one set of rules covers another.

Pure functions over `Rule`, the parsed form of an rbac/v1 PolicyRule.  The semantics are
kube's: `*` matches anything in its list; a rule naming `*/scale` matches the scale
subresource of every resource; an empty resourceNames means every name; a nonResourceURL
ending in `*` matches by prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from apiserver.authz.attributes import Attributes

ALL = "*"


@dataclass(frozen=True, slots=True)
class Rule:
    verbs: frozenset[str]
    api_groups: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    resource_names: frozenset[str] = frozenset()
    non_resource_urls: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, rule: Any) -> Rule | None:
        """The rule of a stored PolicyRule dict; None for a malformed one (it grants nothing)."""
        if not isinstance(rule, Mapping):
            return None

        def strings(name: str) -> frozenset[str]:
            value = rule.get(name)
            if not isinstance(value, list):
                return frozenset()
            return frozenset(v for v in value if isinstance(v, str))

        return cls(
            verbs=strings("verbs"),
            api_groups=strings("apiGroups"),
            resources=strings("resources"),
            resource_names=strings("resourceNames"),
            non_resource_urls=strings("nonResourceURLs"),
        )

    def to_dict(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {"verbs": sorted(self.verbs)}
        if self.non_resource_urls:
            out["nonResourceURLs"] = sorted(self.non_resource_urls)
            return out
        out["apiGroups"] = sorted(self.api_groups)
        out["resources"] = sorted(self.resources)
        if self.resource_names:
            out["resourceNames"] = sorted(self.resource_names)
        return out


def parse_rules(rules: Any) -> list[Rule]:
    if not isinstance(rules, list):
        return []
    return [r for r in (Rule.parse(x) for x in rules) if r is not None]


def verb_matches(rule: Rule, verb: str) -> bool:
    return ALL in rule.verbs or verb in rule.verbs


def group_matches(rule: Rule, group: str) -> bool:
    return ALL in rule.api_groups or group in rule.api_groups


def resource_matches(rule: Rule, combined: str, subresource: str) -> bool:
    if ALL in rule.resources or combined in rule.resources:
        return True
    return bool(subresource) and f"*/{subresource}" in rule.resources


def name_matches(rule: Rule, name: str) -> bool:
    return not rule.resource_names or name in rule.resource_names


def url_matches(rule: Rule, path: str) -> bool:
    for url in rule.non_resource_urls:
        if url in (ALL, path):
            return True
        if url.endswith("*") and path.startswith(url[:-1]):
            return True
    return False


def allows(rule: Rule, attrs: Attributes) -> bool:
    if attrs.resource_request:
        return (
            verb_matches(rule, attrs.verb)
            and group_matches(rule, attrs.api_group)
            and resource_matches(rule, attrs.combined_resource, attrs.subresource)
            and name_matches(rule, attrs.name)
        )
    return verb_matches(rule, attrs.verb) and url_matches(rule, attrs.path)


def any_allows(rules: Iterable[Rule], attrs: Attributes) -> bool:
    return any(allows(rule, attrs) for rule in rules)


# ---------------------------------------------------------------- coverage (escalation checks)
def _atoms(rule: Rule) -> Iterator[Rule]:
    """A rule split into rules of one verb, one group, one resource, one name (or one URL)."""
    if rule.non_resource_urls:
        for verb in rule.verbs:
            for url in rule.non_resource_urls:
                yield Rule(frozenset({verb}), non_resource_urls=frozenset({url}))
        return
    names: Iterable[frozenset[str]] = [frozenset({n}) for n in rule.resource_names] or [frozenset()]
    for verb in rule.verbs:
        for group in rule.api_groups:
            for resource in rule.resources:
                for name in names:
                    yield Rule(frozenset({verb}), frozenset({group}), frozenset({resource}), name)


def _covers_atom(owner: Rule, atom: Rule) -> bool:
    """Whether `owner` allows everything the one-of-each rule `atom` allows."""
    (verb,) = atom.verbs
    if not (ALL in owner.verbs or verb in owner.verbs):
        return False
    if atom.non_resource_urls:
        (url,) = atom.non_resource_urls
        for mine in owner.non_resource_urls:
            if mine in (ALL, url):
                return True
            if mine.endswith("*") and url.startswith(mine[:-1]):
                return True  # `/api/*` covers `/api/v1` and `/api/*`; `/ap*` covers `/api/*`
        return False
    (group,) = atom.api_groups
    (resource,) = atom.resources
    if not (ALL in owner.api_groups or group in owner.api_groups):
        return False
    if not (ALL in owner.resources or resource in owner.resources):
        _, slash, sub = resource.partition("/")
        if not (slash and sub != ALL and f"*/{sub}" in owner.resources):
            return False
    if not owner.resource_names:
        return True
    return bool(atom.resource_names) and atom.resource_names <= owner.resource_names


def uncovered(owner: Iterable[Rule], wanted: Iterable[Rule]) -> list[Rule]:
    """The parts of `wanted` that no rule of `owner` allows (empty: `owner` covers `wanted`)."""
    mine = list(owner)
    missing: list[Rule] = []
    for rule in wanted:
        for atom in _atoms(rule):
            if not any(_covers_atom(o, atom) for o in mine):
                missing.append(atom)
    return missing
