"""A Deployment's rollout arithmetic, pure (kube's pkg/controller/deployment/util): surge and
unavailability fenceposts, how far the new ReplicaSet may grow and the old ones shrink,
proportional scaling, the pod-template hash, revisions, status and conditions.

ReplicaSets and Deployments are the JSON objects the informers hold; nothing here writes."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from machinery.objects import Obj, metadata, spec, status
from machinery.timestamps import parse_time

HASH_LABEL = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
SKIP_COPY = {
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
}
# Progressing reasons
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
RS_UPDATED = "ReplicaSetUpdated"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
# Available reasons
MIN_AVAILABLE = "MinimumReplicasAvailable"
MIN_UNAVAILABLE = "MinimumReplicasUnavailable"


def replicas_of(obj: Obj) -> int:
    r = spec(obj).get("replicas")
    return int(r) if isinstance(r, int) else 1


def status_int(obj: Obj | None, field: str) -> int:
    if obj is None:
        return 0
    v = status(obj).get(field)
    return int(v) if isinstance(v, int) else 0


# -- fenceposts -------------------------------------------------------------------------------


def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """An int-or-percent against `total` (kube's GetScaledValueFromIntOrPercent)."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%") and text[:-1].isdigit():
        exact = int(text[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(text)


def is_rolling(d: Obj) -> bool:
    return ((spec(d).get("strategy") or {}).get("type") or "RollingUpdate") == "RollingUpdate"


def fenceposts(d: Obj) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) as pod counts: surge rounds up, unavailability down; both 0
    would never progress, so unavailability becomes 1 (kube's ResolveFenceposts)."""
    rolling = (spec(d).get("strategy") or {}).get("rollingUpdate") or {}
    desired = replicas_of(d)
    surge = scaled_value(rolling.get("maxSurge", "25%"), desired, True)
    unavailable = scaled_value(rolling.get("maxUnavailable", "25%"), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: Obj) -> int:
    return fenceposts(d)[0] if is_rolling(d) else 0


def max_unavailable(d: Obj) -> int:
    if not is_rolling(d) or replicas_of(d) == 0:
        return 0
    return min(fenceposts(d)[1], replicas_of(d))


# -- sets of replicasets ----------------------------------------------------------------------


def by_creation(rss: Iterable[Obj]) -> list[Obj]:
    return sorted(rss, key=lambda rs: (str(metadata(rs).get("creationTimestamp") or ""), str(metadata(rs).get("name"))))


def active(rss: Iterable[Obj | None]) -> list[Obj]:
    return [rs for rs in rss if rs is not None and replicas_of(rs) > 0]


def spec_total(rss: Iterable[Obj | None]) -> int:
    return sum(replicas_of(rs) for rs in rss if rs is not None)


def pods_total(rss: Iterable[Obj | None]) -> int:
    """Pods the replicasets want or still have, whichever is more: a scale-down is asynchronous,
    and counting the pods not yet deleted keeps the surge bound true at every moment."""
    return sum(max(replicas_of(rs), status_int(rs, "replicas")) for rs in rss if rs is not None)


def revision(obj: Obj | None) -> int:
    raw = (metadata(obj).get("annotations") or {}).get(REVISION) if obj is not None else None
    try:
        return int(raw) if raw is not None else 0
    except (TypeError, ValueError):
        return 0


def _drop_nulls(value: Any) -> Any:
    """JSON null is absent (Go decodes both to the zero value; kubectl sends
    `creationTimestamp: null` in templates it writes, as on `rollout undo`)."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def strip_hash(template: Any) -> Obj:
    t = _drop_nulls(template) if isinstance(template, dict) else {}
    found = (t.get("metadata") or {}).get("labels")
    if isinstance(found, dict):
        found.pop(HASH_LABEL, None)
        if not found:
            t["metadata"].pop("labels")
    return t


def equal_ignore_hash(a: Any, b: Any) -> bool:
    return strip_hash(a) == strip_hash(b)


def find_new(d: Obj, rss: Sequence[Obj]) -> Obj | None:
    """The oldest replicaset whose template is the deployment's (kube's FindNewReplicaSet)."""
    for rs in by_creation(rss):
        if equal_ignore_hash(spec(rs).get("template"), spec(d).get("template")):
            return rs
    return None


# -- the pod-template hash --------------------------------------------------------------------

_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"


def safe_encode(text: str) -> str:
    """kube's rand.SafeEncodeString: each byte to a letter or digit that cannot spell words."""
    return "".join(_ALPHANUMS[b % len(_ALPHANUMS)] for b in text.encode())


def fnv32a(data: bytes, h: int = 0x811C9DC5) -> int:
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def template_hash(template: Any, collision_count: int | None) -> str:
    """FNV-32a, as kube, but over the template's canonical JSON (sorted keys, no spaces) rather
    than Go's spew dump of the struct (which cannot be reproduced outside Go), nulls dropped; then, as kube,
    the collision count as 8 little-endian bytes and SafeEncodeString of the decimal sum."""
    h = fnv32a(json.dumps(_drop_nulls(template), sort_keys=True, separators=(",", ":")).encode())
    if collision_count is not None:
        h = fnv32a((collision_count & 0xFFFFFFFF).to_bytes(4, "little") + bytes(4), h)
    return safe_encode(str(h))


# -- how far to scale -------------------------------------------------------------------------


def new_rs_replicas(d: Obj, all_rss: Sequence[Obj | None], new_rs: Obj | None) -> int:
    """What the new replicaset should want now (kube's NewRSNewReplicas)."""
    desired = replicas_of(d)
    if not is_rolling(d):
        return desired
    current = replicas_of(new_rs) if new_rs is not None else 0
    surge = max_surge(d)
    room = desired + surge - pods_total(all_rss)
    if room <= 0:
        return current
    return current + max(0, min(room, desired - current))


def old_scale_down(d: Obj, old_rss: Sequence[Obj], new_rs: Obj | None) -> list[tuple[Obj, int]]:
    """(replicaset, new size) for the old replicasets during a rolling update: unhealthy pods
    first, then available ones as far as maxUnavailable allows (kube's reconcileOldReplicaSets)."""
    if spec_total(old_rss) == 0:
        return []
    all_rss: list[Obj | None] = [*old_rss, new_rs]
    min_available = replicas_of(d) - max_unavailable(d)
    new_unavailable = (replicas_of(new_rs) - status_int(new_rs, "availableReplicas")) if new_rs is not None else 0
    max_scaled_down = spec_total(all_rss) - min_available - new_unavailable
    if max_scaled_down <= 0:
        return []
    plan: dict[str, int] = {}
    olds = by_creation(old_rss)
    size = {str(metadata(rs).get("name")): replicas_of(rs) for rs in olds}
    cleaned = 0
    for rs in olds:  # unhealthy pods first
        name = str(metadata(rs).get("name"))
        unhealthy = size[name] - status_int(rs, "availableReplicas")
        if cleaned >= max_scaled_down or size[name] == 0 or unhealthy <= 0:
            continue
        cut = min(max_scaled_down - cleaned, unhealthy)
        size[name] -= cut
        plan[name] = size[name]
        cleaned += cut
    available = sum(status_int(rs, "availableReplicas") for rs in all_rss)
    budget = available - min_available
    scaled = 0
    for rs in olds:
        name = str(metadata(rs).get("name"))
        if scaled >= budget:
            break
        if size[name] == 0:
            continue
        cut = min(size[name], budget - scaled)
        size[name] -= cut
        plan[name] = size[name]
        scaled += cut
    return [(rs, plan[str(metadata(rs).get("name"))]) for rs in olds if str(metadata(rs).get("name")) in plan]


def is_scaling_event(d: Obj, rss: Sequence[Obj]) -> bool:
    """Some active replicaset was sized for another deployment size (kube's isScalingEvent)."""
    for rs in active(rss):
        desired = (metadata(rs).get("annotations") or {}).get(DESIRED_REPLICAS)
        if desired is not None and str(desired) != str(replicas_of(d)):
            return True
    return False


def proportional_sizes(d: Obj, new_rs: Obj | None, old_rss: Sequence[Obj]) -> list[tuple[Obj, int]]:
    """(replicaset, size) after the deployment's size changed (kube's DeploymentController.scale):
    a lone active replicaset takes the size; a saturated new one leaves the old ones at 0;
    otherwise the change is spread in proportion to each replicaset's share."""
    desired = replicas_of(d)
    olds = sorted(old_rss, key=lambda rs: str(metadata(rs).get("creationTimestamp") or ""), reverse=True)
    everything = active([*olds, new_rs])
    if len(everything) <= 1:
        lone = everything[0] if everything else new_rs if new_rs is not None else (olds[0] if olds else None)
        return [] if lone is None else [(lone, desired)]
    if new_rs is not None and is_saturated(d, new_rs):
        return [(rs, 0) for rs in active(olds)]
    if not is_rolling(d):
        return []
    allowed = desired + max_surge(d) if desired > 0 else 0
    to_add = allowed - spec_total(everything)
    if to_add > 0:  # bigger first, then newer
        ordered = sorted(everything, key=lambda rs: (-replicas_of(rs), _neg_time(rs)))
    elif to_add < 0:  # bigger first, then older
        ordered = sorted(
            everything, key=lambda rs: (-replicas_of(rs), str(metadata(rs).get("creationTimestamp") or ""))
        )
    else:
        ordered = everything
    sizes: list[int] = []
    added = 0
    for rs in ordered:
        part = _proportion(rs, d, to_add, added) if to_add else 0
        sizes.append(replicas_of(rs) + part)
        added += part
    if ordered and to_add:
        sizes[0] = max(0, sizes[0] + to_add - added)  # the rounding leftover goes to the biggest
    return list(zip(ordered, sizes, strict=True))


def _neg_time(rs: Obj) -> tuple[int, ...]:
    return tuple(-ord(c) for c in str(metadata(rs).get("creationTimestamp") or ""))


def _proportion(rs: Obj, d: Obj, to_add: int, added: int) -> int:
    if replicas_of(rs) == 0 or to_add == 0:
        return 0
    allowed = to_add - added
    fraction = _fraction(rs, d)
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def _fraction(rs: Obj, d: Obj) -> int:
    if replicas_of(d) == 0:
        return -replicas_of(rs)
    deployment_replicas = replicas_of(d) + max_surge(d)
    raw = (metadata(rs).get("annotations") or {}).get(MAX_REPLICAS)
    try:
        annotated = int(raw) if raw is not None else status_int(d, "replicas")
    except ValueError:
        annotated = status_int(d, "replicas")
    if annotated == 0:
        return 0
    exact = replicas_of(rs) * deployment_replicas / annotated
    return math.floor(exact + 0.5) - replicas_of(rs)  # Go's math.Round for positive values


def is_saturated(d: Obj, rs: Obj) -> bool:
    desired = (metadata(rs).get("annotations") or {}).get(DESIRED_REPLICAS)
    return (
        replicas_of(rs) == replicas_of(d)
        and str(desired) == str(replicas_of(d))
        and status_int(rs, "availableReplicas") == replicas_of(d)
    )


def replicas_annotations(d: Obj) -> dict[str, str]:
    return {DESIRED_REPLICAS: str(replicas_of(d)), MAX_REPLICAS: str(replicas_of(d) + max_surge(d))}


def new_rs_annotations(d: Obj, rs_annotations: dict[str, str], new_revision: int, exists: bool) -> dict[str, str]:
    """The new replicaset's annotations: the deployment's (less the controller's own), the
    revision (raised, never lowered; the old one kept in revision-history), and, on a
    replicaset being made, the replica annotations (kube's SetNewReplicaSetAnnotations)."""
    out = dict(rs_annotations)
    for k, v in (metadata(d).get("annotations") or {}).items():
        if k not in SKIP_COPY:
            out[k] = v
    old = out.get(REVISION)
    old_number = int(old) if old is not None and old.isdigit() else 0
    if old_number < new_revision:
        out[REVISION] = str(new_revision)
        if old is not None and exists:
            history = [h for h in (out.get(REVISION_HISTORY) or "").split(",") if h]
            out[REVISION_HISTORY] = ",".join([*history, old])
    if not exists:
        out.update(replicas_annotations(d))
    return out


# -- status and conditions --------------------------------------------------------------------


def calculate_status(d: Obj, all_rss: Sequence[Obj | None], new_rs: Obj | None, now_text: str) -> Obj:
    rss = [rs for rs in all_rss if rs is not None]
    available = sum(status_int(rs, "availableReplicas") for rs in rss)
    total = spec_total(rss)
    out: Obj = {
        "observedGeneration": metadata(d).get("generation") or 0,
        "replicas": sum(status_int(rs, "replicas") for rs in rss),
        "updatedReplicas": status_int(new_rs, "replicas"),
        "readyReplicas": sum(status_int(rs, "readyReplicas") for rs in rss),
        "availableReplicas": available,
        "unavailableReplicas": max(total - available, 0),
        "conditions": copy.deepcopy(status(d).get("conditions") or []),
    }
    if status(d).get("collisionCount") is not None:
        out["collisionCount"] = status(d)["collisionCount"]
    if available >= replicas_of(d) - max_unavailable(d):
        set_condition(out, "Available", "True", MIN_AVAILABLE, "Deployment has minimum availability.", now_text)
    else:
        set_condition(
            out, "Available", "False", MIN_UNAVAILABLE, "Deployment does not have minimum availability.", now_text
        )
    return out


def get_condition(st: Obj, kind: str) -> Obj | None:
    for c in st.get("conditions") or ():
        if c.get("type") == kind:
            return dict(c)
    return None


def set_condition(
    st: Obj, kind: str, value: str, reason: str, message: str, now_text: str, transition: str | None = None
) -> None:
    """kube's SetDeploymentCondition: the same status and reason is no change; the same status
    keeps its lastTransitionTime."""
    current = get_condition(st, kind)
    if current is not None and current.get("status") == value and current.get("reason") == reason:
        return
    cond = {
        "type": kind,
        "status": value,
        "lastUpdateTime": now_text,
        "lastTransitionTime": transition or now_text,
        "reason": reason,
        "message": message,
    }
    if current is not None and current.get("status") == value and transition is None:
        cond["lastTransitionTime"] = current.get("lastTransitionTime") or now_text
    st["conditions"] = [c for c in st.get("conditions") or () if c.get("type") != kind] + [cond]


def remove_condition(st: Obj, kind: str) -> None:
    st["conditions"] = [c for c in st.get("conditions") or () if c.get("type") != kind]


def has_deadline(d: Obj) -> bool:
    deadline = spec(d).get("progressDeadlineSeconds")
    return isinstance(deadline, int) and deadline < 2**31 - 1


def complete(d: Obj, st: Obj) -> bool:
    """kube's DeploymentComplete: every replica updated and available, none old, generation seen."""
    desired = replicas_of(d)
    return (
        st.get("updatedReplicas") == desired
        and st.get("replicas") == desired
        and st.get("availableReplicas") == desired
        and int(st.get("observedGeneration") or 0) >= int(metadata(d).get("generation") or 0)
    )


def progressing(d: Obj, st: Obj) -> bool:
    old = status(d)
    return (
        int(st.get("updatedReplicas") or 0) > int(old.get("updatedReplicas") or 0)
        or int(st.get("replicas") or 0) < int(old.get("replicas") or 0)
        or int(st.get("readyReplicas") or 0) > int(old.get("readyReplicas") or 0)
        or int(st.get("availableReplicas") or 0) > int(old.get("availableReplicas") or 0)
    )


def rollout_status(
    d: Obj, all_rss: Sequence[Obj | None], new_rs: Obj | None, now: float, now_text: str
) -> tuple[Obj, float | None]:
    """The status after a rollout step and when to look again for the progress deadline
    (kube's syncRolloutStatus and requeueStuckDeployment)."""
    st = calculate_status(d, all_rss, new_rs, now_text)
    name = metadata(new_rs).get("name") if new_rs is not None else None
    if not has_deadline(d):
        remove_condition(st, "Progressing")
        return st, None
    current = get_condition(status(d), "Progressing")
    done = (
        st.get("replicas") == st.get("updatedReplicas")
        and current is not None
        and current.get("reason") == NEW_RS_AVAILABLE
    )
    if not done:
        if complete(d, st):
            msg = (
                f'ReplicaSet "{name}" has successfully progressed.'
                if name
                else "Deployment has successfully progressed."
            )
            set_condition(st, "Progressing", "True", NEW_RS_AVAILABLE, msg, now_text)
        elif progressing(d, st):
            msg = f'ReplicaSet "{name}" is progressing.' if name else "Deployment is progressing."
            transition = None
            if current is not None and current.get("status") == "True":
                transition = current.get("lastTransitionTime")
            remove_condition(st, "Progressing")
            set_condition(st, "Progressing", "True", RS_UPDATED, msg, now_text, transition)
        elif timed_out(d, now):
            msg = f'ReplicaSet "{name}" has timed out progressing.' if name else "Deployment has timed out progressing."
            set_condition(st, "Progressing", "False", TIMED_OUT, msg, now_text)
    cond = get_condition(st, "Progressing")
    if cond is None or complete(d, st) or cond.get("reason") in (TIMED_OUT, NEW_RS_AVAILABLE):
        return st, None
    since = parse_time(cond.get("lastUpdateTime"))
    if since is None:
        return st, None
    after = since + int(spec(d)["progressDeadlineSeconds"]) - now
    return st, max(after, 0.0) + 1.0


def timed_out(d: Obj, now: float) -> bool:
    cond = get_condition(status(d), "Progressing")
    if cond is None or not has_deadline(d) or cond.get("reason") == NEW_RS_AVAILABLE:
        return False
    if cond.get("reason") == TIMED_OUT:
        return True
    since = parse_time(cond.get("lastUpdateTime"))
    return since is not None and since + int(spec(d)["progressDeadlineSeconds"]) < now
