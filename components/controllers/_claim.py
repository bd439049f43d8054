"""kube's ClaimPods, for every controller that owns pods by a selector (ReplicaSet, RC, Job):
an owner adopts the orphans its selector matches and releases the pods it owns that no longer
match; a pod another controller owns is never touched.

Each change is a JSON patch guarded by the pod's uid and resourceVersion, so a pod changed or
re-created since the informer saw it is left for the next reconcile; a pod gone meanwhile is
simply not claimed.  An owner being deleted adopts and releases nothing (kube's rule).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from components.client.listwatch import Resource
from components.client.rest import NotFoundError, RestClient
from components.controllers._workload_pods import selector_matches
from machinery.objects import Obj, controller_ref, labels, metadata

PODS = Resource("", "v1", "pods", kind="Pod")


async def set_owners(client: RestClient, pod: Obj, refs: list[Any]) -> bool:
    """Replace the pod's ownerReferences if it is still the version we saw; False if it is gone."""
    m = metadata(pod)
    patch = [
        {"op": "test", "path": "/metadata/uid", "value": m.get("uid")},
        {"op": "test", "path": "/metadata/resourceVersion", "value": m.get("resourceVersion")},
        {"op": "add", "path": "/metadata/ownerReferences", "value": refs},
    ]
    try:
        await client.patch(PODS.path(m.get("namespace"), m.get("name")), patch, patch_type="json")
    except NotFoundError:
        return False
    return True


async def claim_pods(
    client: RestClient,
    owner: Obj,
    selector: Mapping[str, Any],
    candidates: Iterable[Obj],
    owner_ref: Obj,
    eligible: Callable[[Obj], bool],
) -> list[Obj]:
    """The pods of `candidates` (the owner's namespace) that `owner` owns once orphans matching
    `selector` are adopted (with `owner_ref`) and owned pods that no longer match are released.
    `eligible`: which pods count at all (a ReplicaSet's active ones; all of a Job's)."""
    m = metadata(owner)
    uid, deleting = m.get("uid"), bool(m.get("deletionTimestamp"))
    owned: list[Obj] = []
    for pod in candidates:
        if not eligible(pod):
            continue
        ref = controller_ref(pod)
        matches = selector_matches(selector, labels(pod))
        refs = list(metadata(pod).get("ownerReferences") or ())
        if ref is not None and ref.get("uid") == uid:
            if matches:
                owned.append(pod)
            elif not deleting:
                await set_owners(client, pod, [r for r in refs if r.get("uid") != uid])
        elif ref is None and matches and not deleting and not metadata(pod).get("deletionTimestamp"):
            if await set_owners(client, pod, [*refs, owner_ref]):
                owned.append(pod)
    return owned
