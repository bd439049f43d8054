"""Node selection, FitError wording, preemption, queue and cache of the pure core."""

from __future__ import annotations

import random

import pytest

from components.scheduler.cache import Cache
from components.scheduler.framework import Algorithm, Diagnosis, FitError, feasible_nodes_to_find
from components.scheduler.nodeinfo import PodInfo
from components.scheduler.plugins.cycle import Status
from components.scheduler.preemption import disruption_condition, preempt
from components.scheduler.queue import SchedulingQueue
from tests.components.scheduler.support import infos, node, pod


def test_fit_error_message_is_kube_schedulers() -> None:
    taint = Status("TaintToleration", ("node(s) had untolerated taint {key: value}",), True)
    cpu = Status("NodeResourcesFit", ("Insufficient cpu",))
    d = Diagnosis({"a": cpu, "b": taint, "c": taint})
    e = FitError(PodInfo.of(pod("p")), 3, d)
    assert e.message() == "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {key: value}."
    d.post_filter_msg = "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    assert e.message().endswith(
        "{key: value}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    # kube sorts the "count reason" strings, counts included
    many = {f"n{i}": cpu for i in range(10)} | {"x": Status("NodePorts", ("a reason",)), "y": taint, "z": taint}
    assert FitError(PodInfo.of(pod("p")), 13, Diagnosis(many)).message() == (
        "0/13 nodes are available: 1 a reason, 10 Insufficient cpu, 2 node(s) had untolerated taint {key: value}."
    )


def test_schedule_picks_a_fitting_node_and_reports_every_other() -> None:
    nodes = infos(
        node("a", cpu="1"), node("b", cpu="4"), node("c", cpu="1", taints=[{"key": "k", "effect": "NoSchedule"}])
    )
    alg = Algorithm(random.Random(1))
    assert alg.schedule(PodInfo.of(pod("p", cpu="2")), nodes).node == "b"
    with pytest.raises(FitError) as e:
        alg.schedule(PodInfo.of(pod("p", cpu="8")), nodes)
    assert e.value.message() == "0/3 nodes are available: 1 node(s) had untolerated taint {k: }, 2 Insufficient cpu."


def test_feasible_nodes_to_find() -> None:
    assert feasible_nodes_to_find(50) == 50
    assert feasible_nodes_to_find(1000) == 420
    assert feasible_nodes_to_find(5000) == 500
    assert feasible_nodes_to_find(200) == 100


def test_preemption_picks_the_cheapest_victims() -> None:
    low = [pod("l1", cpu="1", node_name="a", priority=1), pod("l2", cpu="1", node_name="a", priority=1)]
    mid = [pod("m1", cpu="2", node_name="b", priority=5)]
    nodes = infos(node("a", cpu="2"), node("b", cpu="2"), placed={"a": low, "b": mid})
    alg = Algorithm(random.Random(1))
    pi = PodInfo.of(pod("p", cpu="1", priority=10))
    with pytest.raises(FitError) as e:
        alg.schedule(pi, nodes)
    cand, msg = preempt(alg, pi, nodes, e.value)
    assert cand is not None and msg == ""
    assert cand.node == "a"
    assert len(cand.victims) == 1 and cand.victims[0].key in ("default/l1", "default/l2")

    never = PodInfo.of(pod("p", cpu="1", priority=10, preemptionPolicy="Never"))
    cand, msg = preempt(alg, never, nodes, e.value)
    assert cand is None and msg == "preemption: not eligible due to preemptionPolicy=Never."

    lower = PodInfo.of(pod("p", cpu="1", priority=0))
    with pytest.raises(FitError) as e2:
        alg.schedule(lower, nodes)
    cand, msg = preempt(alg, lower, nodes, e2.value)
    assert cand is None
    assert msg == "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."


def test_preemption_counts_extended_resources() -> None:
    """kube's PreemptionExecutionPath conformance case: 1000 of a fake resource, pods of 200, 300
    and 450 at rising priorities; a pod of 500 above them all evicts the two cheapest and keeps
    the 450, which still leaves it room."""
    fake = "example.com/fakecpu"
    placed = [
        pod(f"p{i}", extra={fake: amount}, node_name="a", priority=i)
        for i, amount in ((1, "200"), (2, "300"), (3, "450"))
    ]
    nodes = infos(node("a", extra={fake: "1000"}), placed={"a": placed})
    alg = Algorithm(random.Random(1))
    pi = PodInfo.of(pod("p4", extra={fake: "500"}, priority=4))
    with pytest.raises(FitError) as e:
        alg.schedule(pi, nodes)
    assert e.value.message() == f"0/1 nodes are available: 1 Insufficient {fake}."
    cand, msg = preempt(alg, pi, nodes, e.value)
    assert cand is not None and msg == ""
    assert sorted(v.key for v in cand.victims) == ["default/p1", "default/p2"]


def test_a_victim_is_marked_a_disruption_target_once() -> None:
    victim, preemptor = pod("v"), pod("p", schedulerName="other")
    cond = disruption_condition(victim, preemptor, "t0")
    assert cond is not None
    assert (cond["type"], cond["status"], cond["reason"]) == ("DisruptionTarget", "True", "PreemptionByScheduler")
    assert cond["message"] == "other: preempting to accommodate a higher priority pod"
    victim["status"]["conditions"] = [cond]
    assert disruption_condition(victim, preemptor, "t1") is None  # already says so: no second write


def test_queue_orders_by_priority_then_time_and_backs_off() -> None:
    q = SchedulingQueue()
    q.add(pod("low", priority=1), 0.0)
    q.add(pod("high", priority=9), 1.0)
    q.add(pod("low2", priority=1), 2.0)
    popped = [q.pop(3.0) for _ in range(3)]
    assert [p.key for p in popped if p] == ["default/high", "default/low", "default/low2"]
    assert q.pop(3.0) is None
    first = popped[0]
    assert first is not None
    q.add_unschedulable(first, 3.0, set())  # an error: backoff 1 s after the first attempt
    assert q.pending()["backoff"] == 1 and q.pop(3.5) is None
    again = q.pop(4.0)
    assert again is not None and again.attempts == 2
    q.add_unschedulable(again, 4.0, {"NodeResourcesFit"})
    assert q.pending()["unschedulable"] == 1
    q.move_all(5.0)  # backoff after 2 attempts is 2 s from the failure
    assert q.pending()["backoff"] == 1 and q.pop(5.5) is None
    assert q.pop(6.0) is not None


def test_unschedulable_pods_come_back_after_five_minutes_and_moves_during_a_cycle_count() -> None:
    q = SchedulingQueue()
    q.add(pod("p"), 0.0)
    qp = q.pop(0.0)
    assert qp is not None
    q.add_unschedulable(qp, 0.0, {"TaintToleration"})
    assert q.pop(299.0) is None
    assert q.pop(300.0) is not None
    q2 = SchedulingQueue()
    q2.add(pod("p"), 0.0)
    qp = q2.pop(0.0)
    assert qp is not None
    q2.move_all(0.5)  # a node was added while the pod was being scheduled
    q2.add_unschedulable(qp, 0.5, {"NodeResourcesFit"})
    assert q2.pending() == {"active": 0, "backoff": 1, "unschedulable": 0}


def test_queue_ignores_status_only_updates_of_unschedulable_pods() -> None:
    q = SchedulingQueue()
    p = pod("p")
    q.add(p, 0.0)
    qp = q.pop(0.0)
    assert qp is not None
    q.add_unschedulable(qp, 0.0, {"NodeAffinity"})
    q.update(p, {**p, "status": {"conditions": [{"type": "PodScheduled"}]}}, 1.0)
    assert q.pending()["unschedulable"] == 1
    q.update(p, {**p, "spec": {**p["spec"], "nodeSelector": {"a": "b"}}}, 20.0)
    assert q.pending()["active"] == 1


def test_cache_assume_forget_confirm() -> None:
    c = Cache()
    c.add_node(node("a", cpu="1"))
    p = pod("p", cpu="600m")
    c.assume(p, "a")
    ni = c.node("a")
    assert ni is not None and ni.requested.milli_cpu == 600 and c.is_assumed("default/p")
    c.forget("default/p")
    assert ni.requested.milli_cpu == 0 and not c.has_pod("default/p")
    c.assume(p, "a")
    c.add_pod({**p, "spec": {**p["spec"], "nodeName": "a"}})
    assert not c.is_assumed("default/p") and ni.requested.milli_cpu == 600
    c.remove_pod("default/p")
    assert ni.requested.milli_cpu == 0 and not ni.pods
