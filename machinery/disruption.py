"""Which PodDisruptionBudgets guard a pod (policy/v1).

The eviction subresource refuses an eviction the pod's budget does not allow, and the
disruption controller works out each budget's allowance from the pods it selects: the two must
select the same pods, or the controller would allow disruptions of pods the eviction then charges
to no budget (or the reverse).  So the selection rule lives here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from machinery.objects import get, labels
from machinery.selectors import LabelSelector, SelectorError


def budget_selects(pdb: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """Whether `pdb` guards `pod` (kube's GetPodPodDisruptionBudgets for policy/v1): a null
    selector selects nothing, an empty one every pod, and one that is not a valid
    metav1.LabelSelector nothing (kube skips a budget whose selector does not convert)."""
    try:
        selector = LabelSelector.from_dict(get(pdb, "spec.selector"))
    except SelectorError:
        return False
    return selector.matches({str(k): v for k, v in labels(pod).items()})
