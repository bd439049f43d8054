"""What one list or watch asks for (namespace, labels, fields), and how a change looks to it.

The selector types are `machinery.selectors.LabelSelector` / `FieldSelector`; they are named
here by the methods the cache calls, so this package does not depend on the parser.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from apiserver.watchcache.events import CacheEvent, Entry, WatchEvent

# The fields a watcher may be indexed by, when its field selector requires one exact value.
INDEXED_FIELDS = ("metadata.name", "spec.nodeName")


class LabelMatcher(Protocol):
    def matches(self, labels: Mapping[str, str]) -> bool: ...

    def empty(self) -> bool: ...


class FieldMatcher(Protocol):
    def matches(self, fields: Mapping[str, str]) -> bool: ...

    def exact(self, field: str) -> str | None: ...

    def empty(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Filter:
    namespace: str | None = None  # None: every namespace (and cluster-scoped resources)
    labels: LabelMatcher | None = None
    fields: FieldMatcher | None = None

    @classmethod
    def of(cls, namespace: str | None, labels: LabelMatcher | None, fields: FieldMatcher | None) -> Filter:
        """Drops empty selectors, so that `selective` and the hot path see only real conditions."""
        return cls(
            namespace or None,
            None if labels is None or labels.empty() else labels,
            None if fields is None or fields.empty() else fields,
        )

    @property
    def selective(self) -> bool:
        """Whether a selector filters (Kubernetes then leaves remainingItemCount unset)."""
        return self.labels is not None or self.fields is not None

    def matches(self, entry: Entry) -> bool:
        if self.namespace is not None and entry.namespace != self.namespace:
            return False
        if self.labels is not None and not self.labels.matches(entry.labels):
            return False
        return self.fields is None or self.fields.matches(entry.fields)

    def transform(self, event: CacheEvent) -> WatchEvent | None:
        """The event this filter's watcher sees, or None.  A change that makes the object start
        matching is ADDED, stop matching is DELETED (the old state, at the change's revision)."""
        now = event.type != "DELETED" and self.matches(event.entry)
        before = event.prev is not None and self.matches(event.prev)
        if now and before:
            return event.as_is()
        if now:
            return event.as_added()
        if before:
            return event.as_deleted()
        return None

    def index_key(self) -> tuple[str, str] | None:
        """The bucket a watcher with this filter is found in: an exact field value, else its
        namespace; None = it must see every event."""
        if self.fields is not None:
            for name in INDEXED_FIELDS:
                value = self.fields.exact(name)
                if value is not None:
                    return (name, value)
        if self.namespace is not None:
            return ("namespace", self.namespace)
        return None


def entry_index_keys(entry: Entry) -> list[tuple[str, str]]:
    """The buckets whose watchers may care about this entry."""
    keys = [("namespace", entry.namespace)]
    for name in INDEXED_FIELDS:
        keys.append((name, entry.fields.get(name, "")))
    return keys
