"""Revision history of a workload's pod template, kept in ControllerRevisions (DaemonSets and
StatefulSets; Deployments keep theirs in ReplicaSets).

A revision's `data` is the patch that puts the template back (`{"spec": {"template": {...,
"$patch": "replace"}}}`), written as Go's encoding/json writes that map: keys sorted, no
spaces, so a client comparing it byte for byte with its own (kube's `daemon.Match`) finds the
current revision.  Its name is `<owner>-<hash>`, its hash label the template hash pods carry
(`controller-revision-hash`), and `revision` orders the history: the template the owner has
now is the newest, an old template come back (a rollback) takes its old revision object with
a new number, so pods still on it are kept.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Sequence
from typing import Any

from components.controllers._workload_rollout import template_hash
from machinery.objects import Obj, metadata, spec

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
    return {"spec": {"template": template}}


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
            "ownerReferences": [
                {
                    "apiVersion": api_version,
                    "kind": kind,
                    "name": m.get("name"),
                    "uid": m.get("uid"),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
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
