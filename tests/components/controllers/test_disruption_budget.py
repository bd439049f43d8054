"""The disruption controller's arithmetic (pure): expectedPods and
desiredHealthy for each kind of budget, the healthy count with evictions not yet seen, the
condition, and the safe answer when the budget cannot be worked out."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components.controllers._disruption_budget import (
    DELETION_TIMEOUT_S,
    BudgetError,
    compute,
    current_healthy,
    disruptions_allowed,
    expected_and_desired,
    live_disruptions,
    scaled,
    with_condition,
)
from machinery.objects import Obj
from machinery.timestamps import format_time

NOW = 1_700_000_000.0


def pod(name: str, *, ready: bool = True, deleting: bool = False, labels: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": "ns", "labels": labels if labels is not None else {"app": "web"}}
    if deleting:
        meta["deletionTimestamp"] = format_time(NOW)
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pdb(generation: int = 1, status: Any = None, **spec: Any) -> Obj:
    spec.setdefault("selector", {"matchLabels": {"app": "web"}})
    return {
        "metadata": {"name": "b", "namespace": "ns", "generation": generation},
        "spec": spec,
        "status": status or {},
    }


def no_scale(_pods: list[Obj]) -> int:
    raise AssertionError("an integer minAvailable needs no controller")


def test_scaled_rounds_a_percent_up() -> None:
    assert scaled("34%", 3, "f") == 2
    assert scaled("50%", 3, "f") == 2
    assert scaled("0%", 3, "f") == 0
    assert scaled("100%", 7, "f") == 7
    assert scaled(2, 10, "f") == 2
    for bad in ("5", "x%", "-1%", 1.5, True, None, [1], -1):
        with pytest.raises(BudgetError, match=r"^f: invalid value"):
            scaled(bad, 3, "f")


def test_expected_and_desired() -> None:
    assert expected_and_desired({"minAvailable": 2}, 3, lambda: 99) == (3, 2)
    assert expected_and_desired({"minAvailable": "50%"}, 3, lambda: 5) == (5, 3)
    assert expected_and_desired({"maxUnavailable": 1}, 3, lambda: 5) == (5, 4)
    assert expected_and_desired({"maxUnavailable": "30%"}, 3, lambda: 5) == (5, 3)  # 30% of 5 -> 2
    assert expected_and_desired({"maxUnavailable": 9}, 3, lambda: 5) == (5, 0)  # floored at 0
    assert expected_and_desired({}, 3, lambda: 5) == (0, 0)  # neither: kube's zero values


def test_disrupted_pods_expire_and_keep_their_pods_out_of_the_count() -> None:
    fresh, old = format_time(NOW - 10), format_time(NOW - DELETION_TIMEOUT_S - 1)
    held = {"a": fresh, "b": old, "c": fresh, "gone": fresh, "d": "not a time"}
    pods = [pod("a"), pod("b"), pod("c", deleting=True), pod("d"), pod("e")]
    kept, recheck = live_disruptions(held, pods, NOW)
    assert kept == {"a": fresh}
    assert recheck == NOW - 10 + DELETION_TIMEOUT_S
    assert current_healthy(pods, kept) == 3  # b, d, e: a is evicted, c is deleting
    assert live_disruptions("junk", pods, NOW) == ({}, None)


def test_nothing_is_allowed_while_no_pod_is_expected() -> None:
    assert disruptions_allowed(3, 2, 3) == 1
    assert disruptions_allowed(1, 2, 3) == 0
    assert disruptions_allowed(3, 0, 0) == 0


def test_compute_min_available_int() -> None:
    got = compute(pdb(minAvailable=2), [pod("a"), pod("b"), pod("c")], NOW, no_scale)
    assert got.recheck_at is None
    assert got.status == {
        "observedGeneration": 1,
        "disruptionsAllowed": 1,
        "currentHealthy": 3,
        "desiredHealthy": 2,
        "expectedPods": 3,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True",
                "observedGeneration": 1,
                "lastTransitionTime": format_time(NOW),
                "reason": "SufficientPods",
                "message": "",
            }
        ],
    }
    # a recount an hour later that changes nothing keeps the transition time (no write needed)
    again = compute(pdb(minAvailable=2, status=got.status), [pod("a"), pod("b"), pod("c")], NOW + 3600, no_scale)
    assert again.status == got.status


def test_compute_after_an_eviction() -> None:
    held = {"disruptedPods": {"a": format_time(NOW - 5)}, "observedGeneration": 1}
    got = compute(pdb(minAvailable=2, status=held), [pod("a"), pod("b"), pod("c")], NOW, no_scale)
    assert got.status["disruptedPods"] == {"a": format_time(NOW - 5)}
    assert (got.status["currentHealthy"], got.status["disruptionsAllowed"]) == (2, 0)
    cond = got.status["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", "InsufficientPods")
    assert got.recheck_at == NOW - 5 + DELETION_TIMEOUT_S


def test_compute_with_controllers_scale() -> None:
    got = compute(pdb(maxUnavailable="25%"), [pod("a"), pod("b", ready=False)], NOW, lambda pods: 4)
    assert (got.status["expectedPods"], got.status["desiredHealthy"], got.status["currentHealthy"]) == (4, 3, 1)
    assert got.status["disruptionsAllowed"] == 0


def test_a_budget_that_cannot_be_worked_out_allows_nothing() -> None:
    def unknown(_pods: list[Obj]) -> int:
        raise BudgetError('found no controllers for pod "a"')

    held = {"observedGeneration": 1, "disruptionsAllowed": 3, "currentHealthy": 4, "expectedPods": 4}
    got = compute(pdb(minAvailable="50%", status=held), [pod("a")], NOW, unknown)
    assert got.status["disruptionsAllowed"] == 0
    assert got.status["currentHealthy"] == 4  # the rest is kept, as kube's failSafe
    cond = got.status["conditions"][0]
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False",
        "SyncFailed",
        'found no controllers for pod "a"',
    )
    hostile = compute(pdb(minAvailable=["x"], status="junk"), [pod("a")], NOW, lambda pods: 1)
    assert hostile.status["disruptionsAllowed"] == 0
    assert hostile.status["conditions"][0]["message"].startswith("spec.minAvailable: invalid value")


def test_condition_transition_time_moves_only_with_its_status() -> None:
    first = with_condition(None, "True", "SufficientPods", "", 1, NOW)
    other = {"type": "Other", "status": "True"}
    same = with_condition([other, *first, "junk"], "True", "SufficientPods", "", 2, NOW + 60)
    assert same[0] == other and same[1]["lastTransitionTime"] == format_time(NOW) and same[1]["observedGeneration"] == 2
    flipped = with_condition(same, "False", "InsufficientPods", "", 2, NOW + 60)
    assert flipped[1]["lastTransitionTime"] == format_time(NOW + 60)


@given(
    readiness=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), max_size=12),
    budget=st.one_of(
        st.builds(lambda n: {"minAvailable": n}, st.integers(0, 15)),
        st.builds(lambda p: {"minAvailable": f"{p}%"}, st.integers(0, 100)),
        st.builds(lambda n: {"maxUnavailable": n}, st.integers(0, 15)),
        st.builds(lambda p: {"maxUnavailable": f"{p}%"}, st.integers(0, 100)),
    ),
    replicas=st.integers(0, 15),
)
def test_allowed_is_never_negative_nor_more_than_healthy_minus_desired(
    readiness: list[tuple[bool, bool, bool]], budget: Obj, replicas: int
) -> None:
    pods = [pod(f"p{i}", ready=r, deleting=d) for i, (r, d, _) in enumerate(readiness)]
    held = {"disruptedPods": {f"p{i}": format_time(NOW - 1) for i, (_, _, e) in enumerate(readiness) if e}}
    status = compute(pdb(status=held, **budget), pods, NOW, lambda _p: replicas).status
    allowed, healthy, desired = status["disruptionsAllowed"], status["currentHealthy"], status["desiredHealthy"]
    assert 0 <= allowed <= max(0, healthy - desired)
    assert 0 <= healthy <= sum(1 for r, d, e in readiness if r and not d)
    assert desired >= 0 and status["expectedPods"] >= 0
    assert (allowed > 0) == (status["conditions"][0]["status"] == "True")
