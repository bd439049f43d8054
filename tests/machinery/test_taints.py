"""Tolerations and taints as kube's Toleration.ToleratesTaint decides.  The scheduler's copy and the
node lifecycle controller's copy agreed on every valid toleration; both read an unknown operator
(which validation refuses) as Equal, where kube tolerates nothing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from machinery.taints import tolerates

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "value": "gpu"}, True),  # no operator is Equal, no effect is every effect
        ({"key": "dedicated", "operator": "Equal", "value": "cpu"}, False),
        ({"key": "dedicated", "operator": "Exists"}, True),
        ({"key": "other", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),  # empty key + Exists: every taint
        ({"operator": "Exists", "effect": "NoExecute"}, False),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "operator": "Gt", "value": "gpu"}, False),  # unknown operator: nothing
        ({"key": "", "operator": "Equal", "value": "gpu"}, False),  # kube's validation refuses it; see taints.py
        ({"operator": "Equal", "value": ""}, False),
        ({"key": "dedicated", "operator": "Equal"}, False),
    ],
)
def test_tolerates(toleration: dict[str, Any], expected: bool) -> None:
    assert tolerates(toleration, TAINT) is expected


def test_absent_taint_value_is_empty() -> None:
    assert tolerates({"key": "k", "operator": "Equal", "value": ""}, {"key": "k", "effect": "NoExecute"})
    assert tolerates({"key": "k"}, {"key": "k", "effect": "NoExecute"})


words = st.sampled_from(["", "a", "b"])
toleration_st = st.fixed_dictionaries(
    {},
    optional={
        "key": words,
        "operator": st.sampled_from(["", "Equal", "Exists", "Lt"]),
        "value": words,
        "effect": st.sampled_from(["", "NoSchedule", "NoExecute"]),
    },
)
taint_st = st.fixed_dictionaries(
    {"key": words, "effect": st.sampled_from(["NoSchedule", "NoExecute"])}, optional={"value": words}
)


def _model(toleration: dict[str, str], taint: dict[str, str]) -> bool:
    """ToleratesTaint read straight off kube's source, as a truth table."""
    effect_ok = toleration.get("effect", "") in ("", taint["effect"])
    key_ok = toleration.get("key", "") in ("", taint["key"])
    operator = toleration.get("operator", "") or "Equal"
    value_ok = {"Exists": True, "Equal": toleration.get("value", "") == taint.get("value", "")}.get(operator, False)
    valid = operator == "Exists" or toleration.get("key", "") != ""  # kube's ValidateTolerations
    return effect_ok and key_ok and value_ok and valid


@settings(max_examples=300, deadline=None)
@given(toleration_st, taint_st)
def test_matches_the_model(toleration: dict[str, str], taint: dict[str, str]) -> None:
    assert tolerates(toleration, taint) == _model(toleration, taint)
