"""System metadata: what the server fills in on create and carries over on update.

Pure functions over dicts, given the time, so the rules are testable without a server:
uid, creationTimestamp, generateName, generation (bumped when anything outside metadata and
status changes), and the status/spec split of resources with a /status subresource.
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Callable
from typing import Any

from apiserver import errors
from apiserver.errors import Cause
from apiserver.registry.strategy import UpdateStrategy
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj
from machinery.timestamps import format_time

# generateName suffixes use kube's alphabet: no vowels, no look-alike digits
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def generated_name(prefix: str) -> str:
    return prefix + "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))


def metadata(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata: expected an object")
    return meta


def spec_part(obj: Obj) -> Obj:
    """Everything a generation counts: the object without metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


# ObjectMeta fields Go omits when empty: `kubectl label x a-` removing the last label leaves no
# `labels: {}` behind in kube, so neither may we (clients compare, diff and print them)
_OMITTED_WHEN_EMPTY = ("labels", "annotations", "finalizers", "ownerReferences", "generateName")


def drop_empty(meta: Obj) -> None:
    for key in _OMITTED_WHEN_EMPTY:
        if key in meta and meta[key] in ({}, [], "", None):
            del meta[key]


def check_namespace(resource: ResourceDef, obj: Obj, namespace: str | None) -> None:
    """Set the namespace from the URL; a body naming another namespace is refused as kube does."""
    meta = metadata(obj)
    if not resource.namespaced:
        meta.pop("namespace", None)
        return
    given = meta.get("namespace")
    if given not in (None, "", namespace):
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    meta["namespace"] = namespace


def prepare_create(
    resource: ResourceDef, obj: Obj, namespace: str | None, clock: Callable[[], float] = time.time
) -> None:
    check_namespace(resource, obj, namespace)
    meta = metadata(obj)
    if not meta.get("name"):
        prefix = meta.get("generateName")
        if isinstance(prefix, str) and prefix:
            meta["name"] = generated_name(prefix)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = format_time(clock())
    for server_owned in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        meta.pop(server_owned, None)
    if resource.bumps_generation:
        meta["generation"] = 1
    else:
        meta.pop("generation", None)
    if resource.status_subresource:
        obj.pop("status", None)
    drop_empty(meta)


def prepare_update(resource: ResourceDef, new: Obj, old: Obj, subresource: UpdateStrategy | None = None) -> Obj:
    """The object to store when `new` replaces `old` through the main resource or a subresource.

    Returns a new dict; `new` may be reused by the caller.  Server-owned metadata comes from
    `old` (a client cannot change uid or creationTimestamp: it gets 422 if it tries).  A
    subresource's strategy says which part of `new` it takes (the rest is `old`'s), or which
    parts of `new` it resets to `old`'s (the rest, but for the server-owned metadata, is `new`'s:
    kube's BeforeUpdate runs around every strategy's PrepareForUpdate)."""
    old_meta = old.get("metadata") or {}
    if subresource is not None and not subresource.from_request:
        prepared = subresource.prepare(new, old)
        if subresource.moves_generation:
            _move_generation(resource, prepared, old, prepared)
        return prepared
    sent = new if subresource is None else subresource.prepare(new, old)
    result = dict(sent)
    meta = dict(metadata(sent))
    result["metadata"] = meta
    causes: list[Cause] = []
    # kube restores creationTimestamp silently (clients re-serialize times in other formats)
    # and refuses only a uid that names another object.
    given_uid = meta.get("uid")
    if given_uid and given_uid != old_meta.get("uid"):
        causes.append(Cause("FieldValueInvalid", "field is immutable", "metadata.uid"))
    for server_set in ("uid", "creationTimestamp"):
        if server_set in old_meta:
            meta[server_set] = old_meta[server_set]
    if meta.get("name") != old_meta.get("name"):
        causes.append(Cause("FieldValueInvalid", "field is immutable", "metadata.name"))
    if causes:
        raise errors.invalid(resource.kind, str(old_meta.get("name", "")), causes, resource.group)
    drop_empty(meta)
    for server_owned in ("deletionTimestamp", "deletionGracePeriodSeconds"):
        if server_owned in old_meta:
            meta[server_owned] = old_meta[server_owned]
        else:
            meta.pop(server_owned, None)
    if subresource is not None:
        # the subresource's own reset fields are all it keeps of `old` besides system metadata
        _move_generation(resource, result, old, sent if subresource.moves_generation else old)
        return result
    if resource.status_subresource:
        if "status" in old:
            result["status"] = old["status"]
        else:
            result.pop("status", None)
    if resource.spec_finalizers:
        # only /finalize changes a namespace's spec.finalizers (the namespace controller's list)
        spec = result.get("spec")
        result["spec"] = {**(spec if isinstance(spec, dict) else {}), "finalizers": _spec_finalizers(old)}
    _move_generation(resource, result, old, new)
    return result


def _move_generation(resource: ResourceDef, result: Obj, old: Obj, sent: Obj) -> None:
    """`result`'s metadata.generation: one more than `old`'s when `sent` changed the spec (all but
    metadata and status)."""
    if resource.bumps_generation:
        generation = int((old.get("metadata") or {}).get("generation") or 1)
        if spec_part(sent) != spec_part(old):
            generation += 1
        metadata(result)["generation"] = generation


def _spec_finalizers(obj: Obj) -> list[Any]:
    spec = obj.get("spec")
    found = spec.get("finalizers") if isinstance(spec, dict) else None
    return list(found) if isinstance(found, list) else []
