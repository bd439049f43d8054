"""The namespace controller's pure parts: which discovered resources it empties, and the
status conditions kube's namespace deleter reports while content remains."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from machinery.objects import Obj

FINALIZER = "kubernetes"

DISCOVERY = "NamespaceDeletionDiscoveryFailure"
PARSING = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"
CONDITION_TYPES = (DISCOVERY, PARSING, CONTENT_FAILURE, CONTENT_REMAINING, FINALIZERS_REMAINING)
OK_REASONS = {
    DISCOVERY: "ResourcesDiscovered",
    PARSING: "ParsedGroupVersions",
    CONTENT_FAILURE: "ContentDeleted",
    CONTENT_REMAINING: "ContentRemoved",
    FINALIZERS_REMAINING: "ContentHasNoFinalizers",
}
OK_MESSAGES = {
    DISCOVERY: "All resources successfully discovered",
    PARSING: "All legacy kube types successfully parsed",
    CONTENT_FAILURE: "All content successfully deleted, may be waiting on finalization",
    CONTENT_REMAINING: "All content successfully removed",
    FINALIZERS_REMAINING: "All content-preserving finalizers finished",
}
FAIL_REASONS = {
    DISCOVERY: "DiscoveryFailed",
    PARSING: "GroupVersionParsingFailed",
    CONTENT_FAILURE: "ContentDeletionFailed",
    CONTENT_REMAINING: "SomeResourcesRemain",
    FINALIZERS_REMAINING: "SomeFinalizersRemain",
}


@dataclass(frozen=True)
class Target:
    """One namespaced resource to empty."""

    group: str
    version: str
    plural: str
    deletecollection: bool

    @property
    def group_resource(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


def active(namespace: Mapping[str, Any] | None) -> bool:
    """Whether a namespace takes new content: it exists and is not being deleted (controllers
    that put something in every namespace leave a terminating one alone)."""
    if namespace is None or (namespace.get("status") or {}).get("phase") == "Terminating":
        return False
    return not (namespace.get("metadata") or {}).get("deletionTimestamp")


def targets(group_version: str, resource_list: Mapping[str, Any]) -> list[Target]:
    """The resources of one discovery document the controller deletes: namespaced, no
    subresources, with the verbs list and delete."""
    group, _, version = group_version.rpartition("/")
    out = []
    for r in resource_list.get("resources") or []:
        if not isinstance(r, Mapping):
            continue
        name, verbs = str(r.get("name", "")), set(r.get("verbs") or [])
        if "/" in name or not r.get("namespaced") or not {"list", "delete"} <= verbs:
            continue
        out.append(Target(group, version, name, "deletecollection" in verbs))
    return out


def preferred_once(found: Iterable[Target]) -> list[Target]:
    """One group/version per group resource (the first found: discovery lists preferred first)."""
    seen: dict[str, Target] = {}
    for t in found:
        seen.setdefault(t.group_resource, t)
    return list(seen.values())


@dataclass
class Outcome:
    """What one pass over the namespace's content found."""

    discovery_failures: list[str] = field(default_factory=list)
    delete_failures: list[str] = field(default_factory=list)  # group resources
    remaining: dict[str, int] = field(default_factory=dict)  # group resource -> instances
    finalizers: dict[str, int] = field(default_factory=dict)  # finalizer -> instances

    @property
    def done(self) -> bool:
        return not (self.discovery_failures or self.delete_failures or self.remaining)

    def messages(self) -> dict[str, str]:
        """The failing conditions' messages (kube's wording); absent types are fine."""
        out = {}
        if self.discovery_failures:
            failed = sorted(self.discovery_failures)
            out[DISCOVERY] = f"Discovery failed for some groups, {len(failed)} failing: {', '.join(failed)}"
        if self.delete_failures:
            failed = sorted(self.delete_failures)
            out[CONTENT_FAILURE] = f"Failed to delete all resource types, {len(failed)} remaining: {', '.join(failed)}"
        if self.remaining:
            parts = [f"{gr} has {n} resource instances" for gr, n in sorted(self.remaining.items())]
            out[CONTENT_REMAINING] = "Some resources are remaining: " + ", ".join(parts)
        if self.finalizers:
            parts = [f"{f} in {n} resource instances" for f, n in sorted(self.finalizers.items())]
            out[FINALIZERS_REMAINING] = "Some content in the namespace has finalizers remaining: " + ", ".join(parts)
        return out


def conditions(old: Iterable[Mapping[str, Any]], outcome: Outcome, now: str) -> list[Obj]:
    """The namespace's status conditions after a pass: each of kube's five types True with its
    failure, or False with its ok reason; lastTransitionTime kept unless the status flips."""
    failing = outcome.messages()
    held = {c.get("type"): c for c in old if isinstance(c, Mapping)}
    out: list[Obj] = [dict(c) for t, c in held.items() if t not in CONDITION_TYPES]
    for t in CONDITION_TYPES:
        status = "True" if t in failing else "False"
        before = held.get(t)
        c: Obj = {
            "type": t,
            "status": status,
            "lastTransitionTime": before.get("lastTransitionTime")
            if before is not None and before.get("status") == status
            else now,
            "reason": FAIL_REASONS[t] if t in failing else OK_REASONS[t],
            "message": failing.get(t, OK_MESSAGES[t]),
        }
        out.append(c)
    return out
