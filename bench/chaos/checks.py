"""The checks of a cluster chaos run, over what the workload recorded and the store's history.

Each returns the violations it found (empty: passed), each a sentence a reader can act on.
The store's history (bench.chaos.history) is the truth the apiservers' answers are held to.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bench.chaos.history import Change
from bench.chaos.workload import NAMESPACE, Op, Segment, WatchRecord

CM_PREFIX = f"/registry/configmaps/{NAMESPACE}/"
LEASES = ("/registry/leases/kube-system/kube-controller-manager", "/registry/leases/kube-system/kube-scheduler")
MAX_SHOWN = 10


@dataclass(frozen=True)
class Check:
    name: str
    violations: list[str]
    checked: int
    """How many things it looked at (writes, events, transitions): a check of nothing passes nothing."""

    @property
    def passed(self) -> bool:
        return not self.violations and self.checked > 0


def _seq(c: Change) -> str:
    return "" if c.obj is None else str((c.obj.get("data") or {}).get("seq", ""))


def _name(key: str) -> str:
    return key[len(CM_PREFIX) :]


def configmap_changes(history: list[Change]) -> dict[str, list[Change]]:
    by_key: dict[str, list[Change]] = defaultdict(list)
    for c in history:
        if c.key.startswith(CM_PREFIX):
            by_key[_name(c.key)].append(c)
    return by_key


def acknowledged_writes(ops: list[Op], history: list[Change]) -> Check:
    """Every acknowledged write is in the store at the revision it was acknowledged with, right
    after the state its precondition named; no refused write was applied; nothing was applied
    that no client sent, or twice."""
    by_key = configmap_changes(history)
    at: dict[tuple[str, int], tuple[int, Change]] = {}
    for key, changes in by_key.items():
        for i, c in enumerate(changes):
            at[(key, c.revision)] = (i, c)
    applied: dict[str, list[Change]] = defaultdict(list)
    for changes in by_key.values():
        for c in changes:
            if (s := _seq(c)) and s.startswith("w"):
                applied[s].append(c)
    bad: list[str] = []
    sent = {o.seq: o for o in ops}
    checked = 0
    for o in ops:
        if o.outcome == "ok" and o.kind != "delete":
            checked += 1
            found = at.get((o.key, o.rv))
            if found is None or _seq(found[1]) != o.seq:
                bad.append(f"{o.kind} {o.key} seq {o.seq} acknowledged at rv {o.rv}: the store has no such write there")
        elif o.outcome == "refused" and o.seq in applied:
            checked += 1
            bad.append(
                f"{o.kind} {o.key} seq {o.seq} was refused ({o.detail}) but applied at rv {applied[o.seq][0].revision}"
            )
    for seq, changes in applied.items():
        checked += 1
        if len(changes) > 1:
            bad.append(f"seq {seq} applied {len(changes)} times (rv {[c.revision for c in changes]})")
        if seq not in sent:
            bad.append(f"seq {seq} at rv {changes[0].revision} was never sent")
    written = {o.key for o in ops}
    deletes_sent: dict[str, int] = defaultdict(int)
    for o in ops:
        if o.kind == "delete" and o.outcome in ("ok", "unknown"):
            deletes_sent[o.key] += 1
    for key, changes in by_key.items():
        done = sum(1 for c in changes if c.deleted)
        if key in written and done > deletes_sent[key]:
            bad.append(
                f"{key} deleted {done} times in the store, but only {deletes_sent[key]} deletes may have gone through"
            )
    return Check("acknowledged writes kept, refused ones never applied", bad, checked)


def _history_events(by_key: dict[str, list[Change]], lo: int, hi: int) -> list[tuple[int, str, str, str]]:
    """(rv, key, type, seq) of the ConfigMap changes with lo < rv <= hi, in order."""
    out: list[tuple[int, str, str, str]] = []
    for key, changes in by_key.items():
        present, last_seq = False, ""
        for c in changes:
            if lo < c.revision <= hi:
                kind = "DELETED" if c.deleted else ("MODIFIED" if present else "ADDED")
                out.append((c.revision, key, kind, last_seq if c.deleted else _seq(c)))  # a delete shows the last state
            present, last_seq = not c.deleted, _seq(c)
    return sorted(out)


def _state_at(by_key: dict[str, list[Change]], rv: int) -> dict[str, str]:
    state: dict[str, str] = {}
    for key, changes in by_key.items():
        for c in changes:
            if c.revision > rv:
                break
            if c.deleted:
                state.pop(key, None)
            else:
                state[key] = _seq(c)
    return state


def watch_streams(records: list[WatchRecord], history: list[Change]) -> Check:
    """Every apiserver's stream: each LIST is the store's state at its resourceVersion, and the
    events after it are exactly the store's changes since, in order, none missing, none twice,
    across broken streams (resumed from the last resourceVersion); only a 410 may end a segment."""
    by_key = configmap_changes(history)
    bad: list[str] = []
    checked = 0
    for r in records:
        for n, s in enumerate(r.segments):
            where = f"{r.apiserver} segment {n}"
            checked += 1 + len(s.events)
            if _state_at(by_key, s.list_rv) != s.listed:
                bad.append(f"{where}: the LIST at rv {s.list_rv} differs from the store's state there")
            bad += _segment(where, s, by_key)
    return Check("every apiserver's watch stream whole and in order", bad, checked)


def _segment(where: str, s: Segment, by_key: dict[str, list[Change]]) -> list[str]:
    bad: list[str] = []
    rvs = [e.rv for e in s.events]
    if any(b <= a for a, b in itertools.pairwise(rvs)) or (rvs and rvs[0] <= s.list_rv):
        bad.append(f"{where}: events out of order or repeated: {rvs[:20]}")
    last = rvs[-1] if rvs else s.list_rv
    want = _history_events(by_key, s.list_rv, last)
    got = [(e.rv, e.key, e.type, e.seq) for e in s.events]
    if got != want:
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        bad.append(
            f"{where} (after {s.breaks} resumed breaks): {len(missing)} events missing {missing[:3]},"
            f" {len(extra)} not in the store {extra[:3]}"
        )
    return bad


def final_lists(finals: dict[str, tuple[int, dict[str, str]]], history: list[Change]) -> Check:
    """After the run every apiserver's LIST is the store's state at its resourceVersion."""
    by_key = configmap_changes(history)
    bad = [
        f"{server}: the final LIST at rv {rv} differs from the store's state there"
        for server, (rv, listed) in finals.items()
        if _state_at(by_key, rv) != listed
    ]
    return Check("every apiserver's final LIST is the store's", bad, len(finals))


def _time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def lease_safety(history: list[Change]) -> Check:
    """No controller-manager or scheduler took a Lease its holder still held: a new holder's
    acquireTime is never before the last renewTime of the one before plus its duration (unless
    that one released it)."""
    bad: list[str] = []
    checked = 0
    for key in LEASES:
        holder, renewed, duration = "", None, 0.0
        for c in (c for c in history if c.key == key and c.obj is not None):
            spec = c.obj.get("spec") or {}  # type: ignore[union-attr]
            new = spec.get("holderIdentity") or ""
            if new and holder and new != holder and renewed is not None:
                checked += 1
                acquired = _time(spec.get("acquireTime"))
                free_at = renewed + dt.timedelta(seconds=duration)
                if acquired is None or acquired + dt.timedelta(milliseconds=10) < free_at:
                    bad.append(
                        f"{key}: {new} took it at {acquired} while {holder} held it until {free_at} (rv {c.revision})"
                    )
            if new != holder:
                checked += 1
            holder = new
            renewed = _time(spec.get("renewTime")) or renewed
            duration = float(spec.get("leaseDurationSeconds") or 0)
    return Check("leader election: no two holders of one Lease at once", bad, checked)


def pods_bound_once(history: list[Change]) -> Check:
    """A pod, once bound to a node, is never bound to another."""
    bound: dict[str, str] = {}
    bad: list[str] = []
    for c in history:
        if not c.key.startswith("/registry/pods/") or c.obj is None:
            continue
        uid = (c.obj.get("metadata") or {}).get("uid", c.key)
        node = (c.obj.get("spec") or {}).get("nodeName") or ""
        if not node:
            continue
        if bound.setdefault(uid, node) != node:
            bad.append(f"{c.key} bound to {bound[uid]} and then to {node} (rv {c.revision})")
    return Check("no pod bound twice", bad, len(bound))


def show(violations: Iterable[str]) -> list[str]:
    v = list(violations)
    return v[:MAX_SHOWN] + ([f"... and {len(v) - MAX_SHOWN} more"] if len(v) > MAX_SHOWN else [])


def _owner(obj: dict[str, Any]) -> str:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return next((r.get("uid", "") for r in refs if r.get("controller")), "")


def deployment_surge(history: list[Change]) -> Check:
    """A Deployment's ReplicaSets never ask for more pods than it may have: the sum of their
    spec.replicas stays within its replicas (the larger of the last two, while a scale-down is
    carried out) plus maxSurge."""
    wanted: dict[str, list[int]] = defaultdict(list)  # deployment uid -> its spec.replicas values
    surge: dict[str, int] = {}
    names: dict[str, str] = {}
    sets: dict[str, tuple[str, int]] = {}  # replicaset key -> (deployment uid, spec.replicas)
    bad: list[str] = []
    checked = 0
    for c in history:
        if c.key.startswith("/registry/deployments/") and c.obj is not None:
            uid = c.obj["metadata"].get("uid", c.key)
            spec = c.obj.get("spec") or {}
            replicas = int(spec.get("replicas", 1))
            if not wanted[uid] or wanted[uid][-1] != replicas:
                wanted[uid].append(replicas)
            max_surge = ((spec.get("strategy") or {}).get("rollingUpdate") or {}).get("maxSurge", 1)
            surge[uid] = max_surge if isinstance(max_surge, int) else 1  # the workload's are integers
            names[uid] = c.key
        elif c.key.startswith("/registry/replicasets/"):
            if c.obj is None:
                sets.pop(c.key, None)
                continue
            sets[c.key] = (_owner(c.obj), int((c.obj.get("spec") or {}).get("replicas", 0)))
            owner = sets[c.key][0]
            if owner not in wanted:
                continue
            checked += 1
            total = sum(n for d, n in sets.values() if d == owner)
            bound = max(wanted[owner][-2:]) + surge[owner]
            if total > bound:
                bad.append(f"{names[owner]}: its ReplicaSets ask for {total} pods, more than {bound} (rv {c.revision})")
    return Check("Deployments within their surge", bad, checked)


def jobs_within_completions(history: list[Change]) -> Check:
    """A Job never counts more succeeded pods than its completions."""
    bad: list[str] = []
    checked = 0
    for c in history:
        if not c.key.startswith("/registry/jobs/") or c.obj is None:
            continue
        completions = (c.obj.get("spec") or {}).get("completions")
        succeeded = (c.obj.get("status") or {}).get("succeeded", 0)
        checked += 1
        if isinstance(completions, int) and succeeded > completions:
            bad.append(f"{c.key}: {succeeded} succeeded of {completions} completions (rv {c.revision})")
    return Check("no Job beyond its completions", bad, checked)


SCHEDULER_LEASE = "/registry/leases/kube-system/kube-scheduler"
EVENT_SLACK = dt.timedelta(seconds=1)
"""Events carry whole seconds; a binding's event is written just after the binding."""


def _terms(history: list[Change], key: str) -> list[tuple[str, dt.datetime, dt.datetime]]:
    """(holder, from, until) of each term of a Lease: from its acquireTime to its last
    renewTime plus its duration (what any other holder had to wait for)."""
    terms: list[tuple[str, dt.datetime, dt.datetime]] = []
    for c in history:
        if c.key != key or c.obj is None:
            continue
        spec = c.obj.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        acquired, renewed = _time(spec.get("acquireTime")), _time(spec.get("renewTime"))
        if not holder or acquired is None or renewed is None:
            continue
        until = renewed + dt.timedelta(seconds=float(spec.get("leaseDurationSeconds") or 0))
        if terms and terms[-1][0] == holder and terms[-1][1] == acquired:
            terms[-1] = (holder, acquired, until)
        else:
            terms.append((holder, acquired, until))
    return terms


def scheduling_by_the_leader(history: list[Change]) -> Check:
    """Every binding was made by the scheduler that held the Lease then: each `Scheduled`
    event's reportingInstance (the scheduler's identity, the Lease's holderIdentity) had a term
    covering the event's time."""
    terms = _terms(history, SCHEDULER_LEASE)
    bad: list[str] = []
    checked = 0
    for c in history:
        if not c.key.startswith("/registry/events/") or c.obj is None:
            continue
        if c.obj.get("reason") != "Scheduled" or c.obj.get("reportingComponent") != "default-scheduler":
            continue
        who, at = c.obj.get("reportingInstance", ""), _time(c.obj.get("firstTimestamp"))
        if at is None or (c.obj.get("count") or 1) > 1:
            continue  # a repeat of an event already judged
        checked += 1
        if not any(h == who and start - EVENT_SLACK <= at <= end + EVENT_SLACK for h, start, end in terms):
            involved = (c.obj.get("involvedObject") or {}).get("name", "?")
            bad.append(f"{who or 'an unnamed scheduler'} bound {involved} at {at} without holding the Lease then")
    return Check("every binding made by the scheduler holding the Lease", bad, checked)
