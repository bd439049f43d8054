"""NodeResourcesFit and NodeResourcesBalancedAllocation: the fit filter, the two scores, their memos."""

from __future__ import annotations

from components.scheduler.nodeinfo import NodeInfo, PodInfo
from components.scheduler.plugins import noderesources, pre_filter, score_nodes
from tests.components.scheduler.support import infos, node, pod, verdict


def test_resources_fit() -> None:
    n = node("n", cpu="1", memory="1Gi", pods=2)
    assert verdict(pod("p", cpu="1"), n) == ""
    assert verdict(pod("p", cpu="1001m"), n) == "Insufficient cpu"
    assert verdict(pod("p", cpu="2", memory="2Gi"), n) == "Insufficient cpu; Insufficient memory"
    placed = [pod("a", cpu="600m", node_name="n"), pod("b", node_name="n")]
    assert verdict(pod("p", cpu="500m"), n, placed) == "Too many pods; Insufficient cpu"
    assert verdict(pod("p"), n, placed[:1]) == ""  # requests nothing: only the pod count matters


FAKE = "example.com/fakecpu"


def test_extended_resources_fit_what_allocatable_leaves() -> None:
    n = node("n", extra={FAKE: "1000"})
    assert verdict(pod("p", extra={FAKE: "1000"}), n) == ""
    assert verdict(pod("p", extra={FAKE: "1001"}), n) == f"Insufficient {FAKE}"
    placed = [pod("a", extra={FAKE: "200"}, node_name="n"), pod("b", extra={FAKE: "300"}, node_name="n")]
    assert verdict(pod("p", extra={FAKE: "500"}), n, placed) == ""
    assert verdict(pod("p", extra={FAKE: "501"}), n, placed) == f"Insufficient {FAKE}"
    # a node that does not list the resource has none of it; asking for zero asks for nothing
    assert verdict(pod("p", extra={FAKE: "1"}), node("m")) == f"Insufficient {FAKE}"
    assert verdict(pod("p", extra={FAKE: "0"}), node("m")) == ""
    # limits stand in for unset requests, as the apiserver defaults them
    only_limits = pod("p")
    only_limits["spec"]["containers"][0]["resources"] = {"limits": {FAKE: "2k"}}
    assert verdict(only_limits, n) == f"Insufficient {FAKE}"
    two = pod("p", cpu="5", extra={FAKE: "2k", "hugepages-2Mi": "2Mi"})
    assert verdict(two, n) == f"Insufficient cpu; Insufficient {FAKE}; Insufficient hugepages-2Mi"


def test_scores_least_allocated_and_balanced() -> None:
    empty, busy = infos(node("a"), node("b"), placed={"b": [pod("x", cpu="3", memory="1Gi", node_name="b")]})
    state = pre_filter(PodInfo.of(pod("p", cpu="100m", memory="100Mi")), [empty, busy])
    assert noderesources.least_allocated(state, empty) > noderesources.least_allocated(state, busy)
    assert noderesources.balanced_allocation(state, empty) > noderesources.balanced_allocation(state, busy)
    scores = score_nodes(state, [empty, busy])
    assert scores[0] > scores[1]


def test_the_fused_resource_scores_are_the_two_plugins_scores() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=200, deadline=None)
    @given(
        st.integers(0, 64_000),
        st.integers(0, 2**37),
        st.lists(st.tuples(st.integers(0, 8_000), st.integers(0, 2**34)), max_size=5),
        st.integers(0, 4_000),
        st.integers(0, 2**33),
    )
    def check(cap_cpu: int, cap_mem: int, placed: list[tuple[int, int]], cpu: int, mem: int) -> None:
        ni = NodeInfo.of(node("n", cpu=f"{cap_cpu}m", memory=str(cap_mem)))
        for i, (c, m) in enumerate(placed):
            ni.add_pod(PodInfo.of(pod(f"x{i}", cpu=f"{c}m", memory=str(m), node_name="n")))
        state = pre_filter(PodInfo.of(pod("p", cpu=f"{cpu}m", memory=str(mem))), [ni])
        assert noderesources.resource_scores(state, ni) == (
            noderesources.least_allocated(state, ni),
            noderesources.balanced_allocation(state, ni),
        )

    check()


def test_the_memoized_fit_and_score_always_equal_a_fresh_computation() -> None:
    """Whatever happens to a node (pods placed and removed, its allocatable changed), the
    verdict and score kept from an earlier cycle are the ones a fresh computation gives."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    ops = st.lists(
        st.tuples(
            st.sampled_from(["place", "remove", "resize", "ask"]),
            st.sampled_from([100, 250, 1000, 2000]),  # millicores (resize: the node's)
            st.sampled_from([64, 512, 4096]),  # MiB; which pod to remove
            st.sampled_from([0, 1, 3]),  # example.com/fakecpu (resize: the node's, times 2)
        ),
        max_size=30,
    )

    @settings(max_examples=150, deadline=None)
    @given(ops)
    def check(steps: list[tuple[str, int, int, int]]) -> None:
        ni = NodeInfo.of(node("n", cpu="2", memory="2Gi", pods=4, extra={FAKE: "4"}))
        placed: list[str] = []
        for i, (op, cpu, mem, fake) in enumerate(steps):
            if op == "place":
                ni.add_pod(
                    PodInfo.of(pod(f"x{i}", cpu=f"{cpu}m", memory=f"{mem}Mi", extra={FAKE: fake}, node_name="n"))
                )
                placed.append(f"default/x{i}")
            elif op == "remove" and placed:
                ni.remove_pod(placed.pop(mem % len(placed)))
            elif op == "resize":
                ni.set_node(node("n", cpu=f"{2 * cpu}m", memory="2Gi", pods=4, extra={FAKE: str(2 * fake)}))
            else:
                state = pre_filter(PodInfo.of(pod("p", cpu=f"{cpu}m", memory=f"{mem}Mi", extra={FAKE: fake})), [ni])
                assert noderesources.node_resources_fit(state, ni) == noderesources._resources_fit(state, ni)
                assert noderesources.resource_scores(state, ni) == noderesources._resource_scores(state, ni)

    check()
