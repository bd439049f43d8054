"""Consistent LISTs read straight from storage, for backends whose watch cache cannot prove it
is fresh (etcd before 3.4.31 gives no trustworthy progress notifications: kube-apiserver then
reads etcd too).  Pages carry the same continue tokens as the cache's, at one revision."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from apiserver.errors import gone
from apiserver.registry.storage_errors import as_status
from apiserver.resources.base import ResourceDef
from apiserver.storage.interface import CompactedError, Storage
from apiserver.watchcache import continuation
from apiserver.watchcache.cacher import CacheList
from machinery.objects import Obj
from machinery.selectors import FieldSelector, LabelSelector

PAGE = 500


async def list_from_storage(
    storage: Storage,
    resource: ResourceDef,
    decode: Callable[[bytes, int], Obj],
    fields_of: Callable[[Obj], Mapping[str, str]],
    *,
    namespace: str | None,
    labels: LabelSelector | None,
    fields: FieldSelector | None,
    limit: int,
    continue_token: str,
    served: Callable[[list[Obj]], Awaitable[list[Obj]]] | None = None,
) -> CacheList:
    root = resource.key_prefix()
    prefix = resource.key_prefix(namespace)
    revision, start = 0, prefix
    token: continuation.Continue | None = None
    if continue_token:
        token = continuation.decode(continue_token)
        revision, start = max(token.revision, 0), root + token.start  # LATEST (-1): now
    items: list[Obj] = []
    with as_status(f"list {resource.plural}"):
        while True:
            try:
                page = await storage.list(prefix, start_key=start, limit=PAGE, revision=revision)
            except CompactedError:
                if token is None:  # compacted between two of this request's own pages
                    raise gone("The list's revision was compacted while it was read; list again.") from None
                raise gone(continuation.TOO_OLD, continuation.encode(continuation.expired(token))) from None
            revision = page.revision
            decoded = [decode(stored.value, stored.revision) for stored in page.items]
            if served is not None and decoded:  # in the served version before any selector sees it
                decoded = await served(decoded)
            for stored, obj in zip(page.items, decoded, strict=True):
                if labels is not None and not labels.matches((obj.get("metadata") or {}).get("labels") or {}):
                    continue
                if fields is not None and not fields.matches(fields_of(obj)):
                    continue
                if limit and len(items) == limit:
                    token_text = continuation.encode(continuation.Continue(revision, stored.key[len(root) :]))
                    return CacheList(items, revision, token_text, None)
                items.append(obj)
            if not page.more or not page.items:
                return CacheList(items, revision, "", None)
            start = page.items[-1].key + "\x00"
