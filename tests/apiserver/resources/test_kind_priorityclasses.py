"""scheduling.k8s.io/v1 PriorityClass: defaults, reserved names, the user ceiling, immutability."""

from __future__ import annotations

import copy

from tests.apiserver.kinds_support import causes, cells, create, find, headers, rejected

PC = find("scheduling.k8s.io", "priorityclasses")


def test_create_defaults_the_preemption_policy() -> None:
    got = create(PC, {"metadata": {"name": "batch"}, "value": 100}, namespace=None)
    assert got["preemptionPolicy"] == "PreemptLowerPriority" and "namespace" not in got["metadata"]


def test_reserved_names_and_the_user_ceiling() -> None:
    assert rejected(PC, {"metadata": {"name": "system-mine"}, "value": 5}, namespace=None) == [
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
        "error: system-mine is not a known system priority class"
    ]
    assert causes(PC, {"metadata": {"name": "system-node-critical"}, "value": 2000001000}) == []
    assert causes(PC, {"metadata": {"name": "system-node-critical"}, "value": 1}) == [
        "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
        "error: value of system-node-critical PriorityClass must be 2000001000"
    ]
    assert causes(PC, {"metadata": {"name": "vip"}, "value": 1000000001, "preemptionPolicy": "Sometimes"}) == [
        "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
        'preemptionPolicy: Unsupported value: "Sometimes": supported values: "Never", "PreemptLowerPriority"',
    ]


def test_value_and_policy_are_immutable() -> None:
    old = {"metadata": {"name": "batch"}, "value": 100, "preemptionPolicy": "Never"}
    new = copy.deepcopy(old)
    new["value"], new["preemptionPolicy"], new["description"] = 200, "PreemptLowerPriority", "now allowed"
    assert causes(PC, new, old) == [
        "value: Forbidden: may not be changed in an update.",
        'preemptionPolicy: Invalid value: "PreemptLowerPriority": field is immutable',
    ]


def test_table() -> None:
    assert headers(PC) == [("Name", 0), ("Value", 0), ("Global-Default", 0), ("Age", 0), ("PreemptionPolicy", 0)]
    obj = {
        "metadata": {"name": "batch", "creationTimestamp": "2023-11-14T22:13:00Z"},
        "value": 100,
        "globalDefault": True,
        "preemptionPolicy": "Never",
    }
    assert cells(PC, obj) == ["batch", 100, True, "20s", "Never"]
