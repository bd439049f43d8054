"""What a reflector lists and watches: one resource (with optional selectors) on the apiserver.

`ListWatch` is the seam between the reflector and HTTP: the reflector's tests give it a
scripted source with drops, 410s, duplicates and reorderings; components give it
`RestListWatch`, which pages through LISTs and opens watches with bookmarks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from components.client.rest import RestClient, WatchEvent, path_of
from machinery.objects import Obj

PAGE_SIZE = 500


@dataclass(frozen=True)
class ListResult:
    items: list[Obj]
    resource_version: str


class ListWatch(Protocol):
    async def list(self, resource_version: str) -> ListResult:
        """Every object, at least as new as `resource_version` ("" = the newest, a quorum read)."""
        ...

    def watch(
        self, resource_version: str, *, timeout_s: int, send_initial_events: bool = False
    ) -> AsyncIterator[WatchEvent]:
        """Events after `resource_version`; with `send_initial_events`, first the state at it as
        ADDED events and a BOOKMARK annotated `k8s.io/initial-events-end`.  Raises GoneError
        when the version is compacted away, TransportError when the connection breaks."""
        ...


@dataclass(frozen=True)
class Resource:
    """A resource as the apiserver serves it."""

    group: str
    version: str
    plural: str
    namespaced: bool = True
    kind: str = ""

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
        return path_of(self.group, self.version, self.plural, namespace if self.namespaced else None, name, sub)


class RestListWatch:
    """LIST (paged) and WATCH of one resource over the REST client."""

    def __init__(
        self,
        client: RestClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str = "",
        field_selector: str = "",
        page_size: int = PAGE_SIZE,
    ) -> None:
        self.client = client
        self.resource = resource
        self.path = resource.path(namespace)
        self.selectors = {k: v for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v}
        self.page_size = page_size

    async def list(self, resource_version: str) -> ListResult:
        items: list[Obj] = []
        params: dict[str, str | int | bool] = {**self.selectors, "limit": self.page_size}
        if resource_version:
            params["resourceVersion"] = resource_version
        while True:
            page = await self.client.get(self.path, params)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return ListResult(items, str(meta.get("resourceVersion") or ""))
            # later pages come from the first page's snapshot (the token carries it)
            params = {**self.selectors, "limit": self.page_size, "continue": token}

    def watch(
        self, resource_version: str, *, timeout_s: int, send_initial_events: bool = False
    ) -> AsyncIterator[WatchEvent]:
        params: dict[str, str | int | bool] = {
            **self.selectors,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_s,
            "resourceVersion": resource_version,
        }
        if send_initial_events:
            params["sendInitialEvents"] = True
            params["resourceVersionMatch"] = "NotOlderThan"
        return self.client.watch(self.path, params)
