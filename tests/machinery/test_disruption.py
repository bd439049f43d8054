"""Which PodDisruptionBudgets guard a pod: one rule for the eviction subresource and the
disruption controller."""

from __future__ import annotations

from typing import Any

from machinery.disruption import budget_selects
from machinery.objects import Obj


def pod(labels: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"name": "a", "namespace": "ns", "labels": labels if labels is not None else {"app": "web"}}}


def pdb(selector: Any = None, **_: Any) -> Obj:
    return {"metadata": {"name": "b", "namespace": "ns"}, "spec": {"selector": selector}}


WEB = {"matchLabels": {"app": "web"}}


def test_selectors_of_policy_v1() -> None:
    assert budget_selects(pdb(WEB), pod())
    assert not budget_selects(pdb(WEB), pod({"app": "db"}))
    assert budget_selects(pdb({}), pod({}))  # empty: every pod of the namespace
    assert not budget_selects(pdb(None), pod())  # null: none
    bad = {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["web"]}]}
    assert not budget_selects(pdb(bad), pod())  # invalid: none (never "all")
    assert not budget_selects(pdb("app=web"), pod())
    assert not budget_selects({"spec": "x"}, pod())


def test_expressions_and_invalid_keys() -> None:
    exists = {"matchExpressions": [{"key": "app", "operator": "Exists"}]}
    assert budget_selects(pdb(exists), pod())
    assert not budget_selects(pdb(exists), pod({}))
    assert not budget_selects(pdb({"matchLabels": {"bad key": "web"}}), pod({"bad key": "web"}))
    assert not budget_selects(pdb({"matchExpressions": [{"key": "app", "operator": "In", "values": []}]}), pod())


def test_a_pod_without_labels_is_selected_only_by_the_empty_selector() -> None:
    unlabelled: Obj = {"metadata": {"name": "a"}}
    assert budget_selects(pdb({}), unlabelled)
    assert not budget_selects(pdb(WEB), unlabelled)
