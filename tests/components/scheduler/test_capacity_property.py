"""Hypothesis: however node sizes and pod requests are drawn, and in whatever order pods are
assumed, binding-confirmed or forgotten, no node's requests ever exceed its allocatable, and a
pod is refused only when no node has room for it (a scheduler that places nothing fails)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from components.scheduler.cache import Cache
from components.scheduler.framework import Algorithm, FitError
from components.scheduler.nodeinfo import NodeInfo, PodInfo
from tests.components.scheduler.support import node, pod

nodes_st = st.lists(st.tuples(st.integers(1, 8000), st.integers(1, 64), st.integers(1, 20)), min_size=1, max_size=8)
pods_st = st.lists(
    st.tuples(st.integers(0, 3000), st.integers(0, 16), st.sampled_from(["bind", "forget", "keep"])), max_size=60
)


def has_room(ni: NodeInfo, pi: PodInfo) -> bool:
    """The reference fit: free cpu, memory and a pod slot (these nodes are Ready and untainted,
    and the pods ask for nothing else)."""
    return (
        ni.requested.milli_cpu + pi.requests.milli_cpu <= ni.allocatable.milli_cpu
        and ni.requested.memory + pi.requests.memory <= ni.allocatable.memory
        and len(ni.pods) < ni.allowed_pods
    )


@settings(max_examples=150, deadline=None)
@given(nodes_st, pods_st, st.integers(0, 2**32))
def test_requests_never_exceed_allocatable(sizes: list, requests: list, seed: int) -> None:
    cache = Cache()
    for i, (cpu, mem, n_pods) in enumerate(sizes):
        cache.add_node(node(f"n{i}", cpu=f"{cpu}m", memory=f"{mem}Gi", pods=n_pods))
    alg = Algorithm(random.Random(seed))
    rng = random.Random(seed)
    assumed: list[tuple[dict, str]] = []
    for j, (cpu, mem, fate) in enumerate(requests):
        p = pod(f"p{j}", cpu=f"{cpu}m" if cpu else "", memory=f"{mem}Gi" if mem else "")
        pi = PodInfo.of(p)
        try:
            chosen = alg.schedule(pi, cache.nodes()).node
        except FitError:
            roomy = [ni.name for ni in cache.nodes() if has_room(ni, pi)]
            assert not roomy, f"p{j} ({cpu}m, {mem}Gi) refused though {roomy} have room"
            continue
        cache.assume(p, chosen)
        assumed.append((p, chosen))
        # bindings answer in any order, some fail
        if assumed and rng.random() < 0.5:
            q, where = assumed.pop(rng.randrange(len(assumed)))
            if fate == "bind":
                cache.add_pod({**q, "spec": {**q["spec"], "nodeName": where}})
            elif fate == "forget":
                cache.forget(f"default/{q['metadata']['name']}")
        for ni in cache.nodes():
            assert ni.requested.milli_cpu <= ni.allocatable.milli_cpu
            assert ni.requested.memory <= ni.allocatable.memory
            assert len(ni.pods) <= ni.allowed_pods
            assert ni.requested.milli_cpu == sum(q.requests.milli_cpu for q in ni.pods.values())
