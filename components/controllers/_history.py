"""Revision history of a workload's pod template, kept in ControllerRevisions (DaemonSets and
StatefulSets; Deployments keep theirs in ReplicaSets).

A revision's `data` is the patch that puts the template back (`{"spec": {"template": {...,
"$patch": "replace"}}}`), its keys in the order Go's encoding/json writes that map (sorted), so
that the bytes the apiserver serves are the bytes a client compares with its own encoding of
the patch (kube's `daemon.Match`) and it finds the current revision.  Its name is
`<owner>-<hash>`, its hash label the template hash (a DaemonSet's pods carry the hash, a
StatefulSet's the revision's name, in `controller-revision-hash`), and `revision` orders the
history: the template the owner has now is the newest, an old template come back (a
rollback) takes its old revision object with a new number, so pods still on it are kept.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Sequence
from typing import Any

from components.client.listwatch import Resource
from components.client.rest import AlreadyExistsError, RestClient
from components.controllers._workload_pods import owner_ref
from components.controllers._workload_rollout import template_hash
from machinery.objects import Obj, metadata, spec, status

REVISIONS = Resource("apps", "v1", "controllerrevisions", kind="ControllerRevision")

REVISION_HASH_LABEL = "controller-revision-hash"


def _go_json(value: Any) -> str:
    """encoding/json of a map[string]interface{}: sorted keys, compact, <, > and & escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def template_patch(owner: Obj) -> dict[str, Any]:
    """The revision data of the owner's current template."""
    template = copy.deepcopy(spec(owner).get("template") or {})
    # Go writes a template's ObjectMeta with `"creationTimestamp": null` (a struct is never
    # omitted), so a client's own patch of the template has it whatever the server sent
    meta = template.get("metadata")
    template["metadata"] = {"creationTimestamp": None, **(meta if isinstance(meta, dict) else {})}
    template["$patch"] = "replace"
    # keys in Go's order (sorted): the revision is served back as stored, and a client compares
    # those bytes with its own encoding of the patch
    sorted_copy: dict[str, Any] = json.loads(_go_json({"spec": {"template": template}}))
    return sorted_copy


def data_text(data: Any) -> str:
    return _go_json(data)


def matches(owner: Obj, revision: Obj) -> bool:
    """Whether the revision holds the owner's current template (kube's Match)."""
    return data_text(revision.get("data")) == data_text(template_patch(owner))


def current_hash(owner: Obj) -> str:
    collisions = (owner.get("status") or {}).get("collisionCount")
    return template_hash(spec(owner).get("template"), collisions if isinstance(collisions, int) else None)


def revision_number(revision: Obj) -> int:
    value = revision.get("revision")
    return value if isinstance(value, int) else 0


def newest_number(revisions: Iterable[Obj]) -> int:
    return max((revision_number(r) for r in revisions), default=0)


def new_revision(owner: Obj, kind: str, api_version: str, number: int) -> Obj:
    """The ControllerRevision of the owner's current template, numbered `number`."""
    m = metadata(owner)
    hashed = current_hash(owner)
    template_labels = ((spec(owner).get("template") or {}).get("metadata") or {}).get("labels") or {}
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": f"{m.get('name')}-{hashed}",
            "namespace": m.get("namespace"),
            "labels": {**template_labels, REVISION_HASH_LABEL: hashed},
            "ownerReferences": [owner_ref(owner, kind, api_version)],
        },
        "data": template_patch(owner),
        "revision": number,
    }


def to_prune(revisions: Sequence[Obj], in_use: set[str], current: str, limit: int) -> list[Obj]:
    """The oldest revisions past `limit` that neither the owner nor any live pod uses."""
    old = [
        r
        for r in revisions
        if metadata(r).get("name") != current
        and (metadata(r).get("labels") or {}).get(REVISION_HASH_LABEL) not in in_use
    ]
    old.sort(key=revision_number)
    return old[: max(0, len(old) - max(limit, 0))]


async def sync_revision(client: RestClient, owner: Obj, owners: Resource, revisions: list[Obj]) -> Obj:
    """The revision of the template the owner has now: found (renumbered as the newest when an
    older template came back), or made.  A name taken by another template is a hash collision:
    the owner's status.collisionCount goes up (the next pass hashes differently), as kube's."""
    newest = newest_number(revisions)
    found = sorted((r for r in revisions if matches(owner, r)), key=revision_number)
    ns = metadata(owner).get("namespace")
    if found:
        current = found[-1]
        if revision_number(current) < newest:
            body = {**copy.deepcopy(current), "revision": newest + 1}
            current = await client.replace(REVISIONS.path(ns, metadata(current).get("name")), body)
        return current
    body = new_revision(owner, owners.kind, owners.group_version, newest + 1)
    try:
        return await client.create(REVISIONS.path(ns), body)
    except AlreadyExistsError:
        existing = await client.get(REVISIONS.path(ns, metadata(body).get("name")))
        if matches(owner, existing):
            return existing
        collisions = int(status(owner).get("collisionCount") or 0) + 1
        await client.patch(
            owners.path(ns, metadata(owner).get("name"), "status"), {"status": {"collisionCount": collisions}}
        )
        raise
