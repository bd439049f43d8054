"""The cluster chaos checks on hand-made histories: each passes a true record and catches the
violation it is for (a lost acknowledged write, a refused write applied, a write applied twice,
a watch gap, a repeated or reordered event, a stale LIST, a Lease taken while held, a pod bound
twice).  The end-to-end canary (tests/bench/chaos/test_cluster_chaos.py) shows the same against
a real broken apiserver."""

from __future__ import annotations

from typing import Any

import pytest

from bench.chaos import checks, faults
from bench.chaos.history import Change
from bench.chaos.workload import Op, Segment, WatchEvent, WatchRecord

P = "/registry/configmaps/chaos/"


def put(rv: int, name: str, seq: str) -> Change:
    return Change(rv, P + name, False, {"metadata": {"name": name}, "data": {"seq": seq}})


def delete(rv: int, name: str) -> Change:
    return Change(rv, P + name, True, None)


HISTORY = [put(10, "a", "w0-1"), put(11, "b", "w0-2"), put(12, "a", "w0-3"), delete(13, "b"), put(14, "a", "w0-5")]
OPS = [
    Op(0, "a", "create", "w0-1", 0, outcome="ok", rv=10),
    Op(0, "b", "create", "w0-2", 0, outcome="ok", rv=11),
    Op(0, "a", "update", "w0-3", 0, outcome="ok", rv=12),
    Op(0, "b", "delete", "w0-4", 0, outcome="ok"),
    Op(0, "a", "update", "w0-5", 0, outcome="unknown"),
    Op(0, "a", "update", "w0-6", 0, outcome="refused", detail="409 Conflict"),
]


def test_a_true_record_passes_every_check() -> None:
    assert checks.acknowledged_writes(OPS, HISTORY).passed
    events = [WatchEvent("ADDED", "b", 11, "w0-2"), WatchEvent("MODIFIED", "a", 12, "w0-3")]
    events += [WatchEvent("DELETED", "b", 13, "w0-2"), WatchEvent("MODIFIED", "a", 14, "w0-5")]
    record = WatchRecord("https://a", [Segment(10, {"a": "w0-1"}, events)])
    assert checks.watch_streams([record], HISTORY).passed
    assert checks.final_lists({"https://a": (14, {"a": "w0-5"})}, HISTORY).passed


def test_a_lost_acknowledged_write_is_caught() -> None:
    lost = [c for c in HISTORY if c.revision != 12]
    found = checks.acknowledged_writes(OPS, lost)
    assert not found.passed and "update a seq w0-3 acknowledged at rv 12" in found.violations[0]


def test_a_refused_write_applied_or_one_applied_twice_is_caught() -> None:
    found = checks.acknowledged_writes(OPS, [*HISTORY, put(15, "a", "w0-6"), put(16, "a", "w0-1")])
    said = "\n".join(found.violations)
    assert "seq w0-6 was refused (409 Conflict) but applied at rv 15" in said
    assert "seq w0-1 applied 2 times" in said


def test_a_delete_nobody_sent_is_caught() -> None:
    ops = [o for o in OPS if o.kind != "delete"]
    found = checks.acknowledged_writes(ops, HISTORY)
    assert any("deleted 1 times in the store, but only 0" in v for v in found.violations)


def watched(events: list[WatchEvent], listed: dict[str, str] | None = None) -> checks.Check:
    record = WatchRecord("https://a", [Segment(10, {"a": "w0-1"} if listed is None else listed, events)])
    return checks.watch_streams([record], HISTORY)


def test_a_watch_gap_a_repeat_or_a_stale_list_is_caught() -> None:
    gap = watched([WatchEvent("ADDED", "b", 11, "w0-2"), WatchEvent("DELETED", "b", 13, "w0-2")])
    assert "1 events missing [(12, 'a', 'MODIFIED', 'w0-3')]" in gap.violations[0]
    repeat = watched([WatchEvent("ADDED", "b", 11, "w0-2"), WatchEvent("ADDED", "b", 11, "w0-2")])
    assert "out of order or repeated" in repeat.violations[0]
    stale = watched([], listed={})
    assert "LIST at rv 10 differs" in stale.violations[0]
    assert not checks.final_lists({"https://a": (14, {"a": "w0-3"})}, HISTORY).passed


def lease(rv: int, holder: str, acquire: str, renew: str) -> Change:
    spec: dict[str, Any] = {"holderIdentity": holder, "acquireTime": acquire, "renewTime": renew}
    spec["leaseDurationSeconds"] = 4
    return Change(rv, "/registry/leases/kube-system/kube-scheduler", False, {"spec": spec})


def test_a_lease_taken_while_held_is_caught() -> None:
    fine = [
        lease(1, "a", "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:01.000000Z"),
        lease(2, "b", "2026-01-01T00:00:05.500000Z", "2026-01-01T00:00:05.500000Z"),
    ]
    assert checks.lease_safety(fine).passed
    early = [fine[0], lease(2, "b", "2026-01-01T00:00:03.000000Z", "2026-01-01T00:00:03.000000Z")]
    found = checks.lease_safety(early)
    assert not found.passed and "b took it at" in found.violations[0]


def test_a_pod_bound_twice_is_caught() -> None:
    def pod(rv: int, node: str) -> Change:
        return Change(rv, "/registry/pods/chaos/p", False, {"metadata": {"uid": "u1"}, "spec": {"nodeName": node}})

    assert checks.pods_bound_once([pod(1, ""), pod(2, "n1"), pod(3, "n1")]).passed
    assert not checks.pods_bound_once([pod(2, "n1"), pod(3, "n2")]).passed


def deployment(rv: int, replicas: int) -> Change:
    spec = {"replicas": replicas, "strategy": {"rollingUpdate": {"maxSurge": 1}}}
    return Change(rv, "/registry/deployments/chaos/web", False, {"metadata": {"uid": "d1"}, "spec": spec})


def replicaset(rv: int, name: str, replicas: int) -> Change:
    meta = {"name": name, "ownerReferences": [{"uid": "d1", "controller": True}]}
    return Change(rv, f"/registry/replicasets/chaos/{name}", False, {"metadata": meta, "spec": {"replicas": replicas}})


def test_replicasets_past_the_surge_are_caught_but_a_scale_down_under_way_is_not() -> None:
    rollout = [deployment(1, 2), replicaset(2, "old", 2), replicaset(3, "new", 1), replicaset(4, "old", 1)]
    assert checks.deployment_surge(rollout).passed
    scaled_down = [deployment(1, 4), replicaset(2, "old", 4), deployment(3, 1), replicaset(4, "new", 1)]
    assert checks.deployment_surge(scaled_down).passed  # the old set's 4 are still being scaled down
    over = [deployment(1, 2), replicaset(2, "old", 2), replicaset(3, "new", 2)]
    found = checks.deployment_surge(over)
    assert not found.passed and "ask for 4 pods, more than 3" in found.violations[0]


def test_a_job_past_its_completions_is_caught() -> None:
    def job(rv: int, succeeded: int) -> Change:
        return Change(
            rv, "/registry/jobs/chaos/j", False, {"spec": {"completions": 4}, "status": {"succeeded": succeeded}}
        )

    assert checks.jobs_within_completions([job(1, 0), job(2, 4)]).passed
    assert not checks.jobs_within_completions([job(1, 3), job(2, 5)]).passed


def test_fault_groups_expand_to_names_and_unknown_ones_are_refused() -> None:
    assert faults.expand("disk") == ["stall-store-leader", "stall-store-member"]
    assert "isolate-store-leader" in faults.expand("net") and "isolate-store-leader" not in faults.expand("store")
    assert faults.expand("kill-apiserver,kill") == faults.expand("kill-apiserver,kill")[:1] + [
        f for f in faults.GROUPS["kill"] if f != "kill-apiserver"
    ]
    with pytest.raises(ValueError, match="unknown fault 'nope'"):
        faults.expand("nope")


def test_a_binding_by_a_scheduler_without_the_lease_is_caught() -> None:
    held = lease(1, "a", "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:02.000000Z")

    def scheduled(rv: int, who: str, at: str) -> Change:
        obj = {"reason": "Scheduled", "reportingComponent": "default-scheduler", "reportingInstance": who}
        obj |= {"firstTimestamp": at, "involvedObject": {"name": "p"}}
        return Change(rv, f"/registry/events/chaos/p.{rv}", False, obj)

    assert checks.scheduling_by_the_leader([held, scheduled(2, "a", "2026-01-01T00:00:05Z")]).passed
    found = checks.scheduling_by_the_leader([held, scheduled(2, "b", "2026-01-01T00:00:01Z")])
    assert not found.passed and "b bound p" in found.violations[0]
    late = checks.scheduling_by_the_leader([held, scheduled(2, "a", "2026-01-01T00:00:08Z")])
    assert not late.passed  # after its term (renewed at 2 s, 4 s lease) and the slack
