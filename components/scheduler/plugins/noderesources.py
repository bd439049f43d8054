"""NodeResourcesFit and NodeResourcesBalancedAllocation (kube's noderesources package).

The filter: the pod's requests fit what the node's allocatable leaves after the pods on it (cpu,
memory, ephemeral storage, every scalar resource by name, and the pod count), every shortfall a
reason of its own.  A scalar the node does not list is one it has none of: a pod asking for
`example.com/gpu` fits only where allocatable lists enough of it.  The scores,
on the non-zero requests (a container asking for nothing counts kube's defaults): least
allocated (the free share of cpu and memory, averaged) and balanced allocation (how close the
cpu and memory shares are).

Every node of every cycle comes through here, so the verdict and the two scores are memoized on
the node (`NodeInfo.fit_memo`, `score_memo`) with the pod shape they were for; `_resources_fit`
and `_resource_scores` are the fresh computations the memos must always equal.
"""

from __future__ import annotations

from components.scheduler.nodeinfo import NodeInfo
from components.scheduler.plugins.cycle import MAX_NODE_SCORE, CycleState, Status

FIT = "NodeResourcesFit"
BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"
ERR_TOO_MANY_PODS = "Too many pods"
ERR_INSUFFICIENT = "Insufficient {resource}"


def node_resources_fit(state: CycleState, ni: NodeInfo) -> Status | None:
    memo = ni.fit_memo
    key = state.pod.shape
    if memo is not None and memo[0] == key:
        return memo[1]  # type: ignore[no-any-return]
    status = _resources_fit(state, ni)
    ni.fit_memo = (key, status)
    return status


def _resources_fit(state: CycleState, ni: NodeInfo) -> Status | None:
    reasons = []
    if len(ni.pods) + 1 > ni.allowed_pods:
        reasons.append(ERR_TOO_MANY_PODS)
    want, used, alloc = state.pod.requests, ni.requested, ni.allocatable
    if want.milli_cpu > 0 and want.milli_cpu > alloc.milli_cpu - used.milli_cpu:
        reasons.append(ERR_INSUFFICIENT.format(resource="cpu"))
    if want.memory > 0 and want.memory > alloc.memory - used.memory:
        reasons.append(ERR_INSUFFICIENT.format(resource="memory"))
    if want.ephemeral_storage > 0 and want.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage:
        reasons.append(ERR_INSUFFICIENT.format(resource="ephemeral-storage"))
    for name, amount in want.scalars:  # sorted by name: the reasons come in one order
        if amount > alloc.scalar(name) - used.scalar(name):
            reasons.append(ERR_INSUFFICIENT.format(resource=name))
    return Status(FIT, tuple(reasons)) if reasons else None


def least_allocated(state: CycleState, ni: NodeInfo) -> int:
    cpu, mem = ni.non_zero_requested
    cpu += state.pod.non_zero[0]
    mem += state.pod.non_zero[1]
    total = 0
    for req, cap in ((cpu, ni.allocatable.milli_cpu), (mem, ni.allocatable.memory)):
        if cap > 0 and req <= cap:
            total += (cap - req) * MAX_NODE_SCORE // cap
    return total // 2


def balanced_allocation(state: CycleState, ni: NodeInfo) -> int:
    cpu, mem = ni.non_zero_requested
    cpu += state.pod.non_zero[0]
    mem += state.pod.non_zero[1]
    fc = min(1.0, cpu / ni.allocatable.milli_cpu) if ni.allocatable.milli_cpu > 0 else 1.0
    fm = min(1.0, mem / ni.allocatable.memory) if ni.allocatable.memory > 0 else 1.0
    std = abs(fc - fm) / 2
    return int((1 - std) * MAX_NODE_SCORE)


def resource_scores(state: CycleState, ni: NodeInfo) -> tuple[int, int]:
    """(least_allocated, balanced_allocation) in one pass over the node's numbers, memoized."""
    memo = ni.score_memo
    if memo is not None and memo[0] == state.pod.non_zero:
        return memo[1]
    scores = _resource_scores(state, ni)
    ni.score_memo = (state.pod.non_zero, scores)
    return scores


def _resource_scores(state: CycleState, ni: NodeInfo) -> tuple[int, int]:
    cpu, mem = ni.non_zero_requested
    cpu += state.pod.non_zero[0]
    mem += state.pod.non_zero[1]
    cap_cpu, cap_mem = ni.allocatable.milli_cpu, ni.allocatable.memory
    least = 0
    if cap_cpu > 0 and cpu <= cap_cpu:
        least += (cap_cpu - cpu) * MAX_NODE_SCORE // cap_cpu
    if cap_mem > 0 and mem <= cap_mem:
        least += (cap_mem - mem) * MAX_NODE_SCORE // cap_mem
    fc = min(1.0, cpu / cap_cpu) if cap_cpu > 0 else 1.0
    fm = min(1.0, mem / cap_mem) if cap_mem > 0 else 1.0
    return least // 2, int((1 - abs(fc - fm) / 2) * MAX_NODE_SCORE)
