"""Each filter and score of the pure core, and kube-scheduler's reasons."""

from __future__ import annotations

from components.scheduler import plugins
from components.scheduler.nodeinfo import NodeInfo, PodInfo
from components.scheduler.plugins import pre_filter, run_filters
from components.scheduler.resources import pod_requests
from tests.components.scheduler.support import infos, node, pod


def verdict(p: dict, n: dict, placed: list[dict] | None = None, others: list[NodeInfo] | None = None) -> str:
    ni = NodeInfo.of(n, [PodInfo.of(x) for x in placed or []])
    state = pre_filter(PodInfo.of(p), [ni, *(others or [])])
    s = run_filters(state, ni)
    return "" if s is None else "; ".join(s.reasons)


def test_init_containers_take_the_max_of_init_and_the_sum_of_app_containers() -> None:
    p = pod("p", cpu="100m", memory="64Mi")
    p["spec"]["containers"].append({"name": "d", "resources": {"requests": {"cpu": "200m"}}})
    p["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}]
    r = pod_requests(p)
    assert (r.milli_cpu, r.memory) == (300, 1024**3)
    p["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] = "1"
    assert pod_requests(p).milli_cpu == 1000


def test_limits_stand_in_for_missing_requests() -> None:
    p = pod("p")
    p["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2", "memory": "1Gi"}}
    assert pod_requests(p).milli_cpu == 2000


def test_ready_and_unschedulable() -> None:
    assert (
        verdict(pod("p"), node("n", ready="False")) == "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    )
    assert verdict(pod("p"), node("n", ready="Unknown")) == (
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
    )
    assert verdict(pod("p"), node("n", unschedulable=True)) == "node(s) were unschedulable"
    tolerant = pod("p", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert verdict(tolerant, node("n", unschedulable=True)) == ""


def test_taints_and_tolerations() -> None:
    n = node("n", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    assert verdict(pod("p"), n) == "node(s) had untolerated taint {k: v}"
    assert verdict(pod("p", tolerations=[{"key": "k", "value": "v"}]), n) == ""
    assert verdict(pod("p", tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]), n) == ""
    assert verdict(pod("p", tolerations=[{"operator": "Exists"}]), n) == ""
    assert verdict(pod("p", tolerations=[{"key": "k", "value": "w"}]), n) != ""
    assert verdict(pod("p", tolerations=[{"key": "k", "value": "v", "effect": "NoExecute"}]), n) != ""
    no_exec = node("n", taints=[{"key": "k", "effect": "NoExecute"}])
    assert verdict(pod("p"), no_exec) == "node(s) had untolerated taint {k: }"
    prefer = node("n", taints=[{"key": "k", "effect": "PreferNoSchedule"}])
    assert verdict(pod("p"), prefer) == ""


def test_resources_fit() -> None:
    n = node("n", cpu="1", memory="1Gi", pods=2)
    assert verdict(pod("p", cpu="1"), n) == ""
    assert verdict(pod("p", cpu="1001m"), n) == "Insufficient cpu"
    assert verdict(pod("p", cpu="2", memory="2Gi"), n) == "Insufficient cpu; Insufficient memory"
    placed = [pod("a", cpu="600m", node_name="n"), pod("b", node_name="n")]
    assert verdict(pod("p", cpu="500m"), n, placed) == "Too many pods; Insufficient cpu"
    assert verdict(pod("p"), n, placed[:1]) == ""  # requests nothing: only the pod count matters


def test_node_selector_and_required_affinity_operators() -> None:
    n = node("n", labels={"zone": "a", "size": "5"})
    assert verdict(pod("p", nodeSelector={"zone": "a"}), n) == ""
    assert verdict(pod("p", nodeSelector={"zone": "b"}), n) == "node(s) didn't match Pod's node affinity/selector"

    def req(*exprs: dict, fields: list[dict] | None = None) -> dict:
        term: dict = {"matchExpressions": list(exprs)}
        if fields:
            term["matchFields"] = fields
        return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}

    cases = [
        ({"key": "zone", "operator": "In", "values": ["a", "b"]}, True),
        ({"key": "zone", "operator": "In", "values": ["b"]}, False),
        ({"key": "zone", "operator": "NotIn", "values": ["b"]}, True),
        ({"key": "zone", "operator": "NotIn", "values": ["a"]}, False),
        ({"key": "zone", "operator": "Exists"}, True),
        ({"key": "gpu", "operator": "Exists"}, False),
        ({"key": "gpu", "operator": "DoesNotExist"}, True),
        ({"key": "zone", "operator": "DoesNotExist"}, False),
        ({"key": "size", "operator": "Gt", "values": ["4"]}, True),
        ({"key": "size", "operator": "Gt", "values": ["5"]}, False),
        ({"key": "size", "operator": "Lt", "values": ["6"]}, True),
        ({"key": "size", "operator": "Lt", "values": ["5"]}, False),
        ({"key": "zone", "operator": "Gt", "values": ["1"]}, False),  # not a number
    ]
    for expr, fits in cases:
        assert (verdict(pod("p", affinity=req(expr)), n) == "") is fits, expr
    by_name = {"key": "metadata.name", "operator": "In", "values": ["n"]}
    assert verdict(pod("p", affinity=req(fields=[by_name])), n) == ""
    other = {"key": "metadata.name", "operator": "In", "values": ["m"]}
    assert verdict(pod("p", affinity=req(fields=[other])), n) != ""
    empty = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}
    assert verdict(pod("p", affinity=empty), n) != ""


def test_host_ports() -> None:
    n = node("n")
    used = [pod("a", node_name="n", ports=[{"containerPort": 80, "hostPort": 8080}])]
    want = pod("p", ports=[{"containerPort": 80, "hostPort": 8080}])
    assert verdict(want, n, used) == "node(s) didn't have free ports for the requested pod ports"
    assert verdict(pod("p", ports=[{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]), n, used) == ""
    assert verdict(pod("p", ports=[{"containerPort": 80, "hostPort": 8081}]), n, used) == ""


def _anti(labels: dict, key: str = "kubernetes.io/hostname") -> dict:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def _aff(labels: dict, key: str = "kubernetes.io/hostname") -> dict:
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_pod_affinity_and_anti_affinity() -> None:
    n1, n2 = node("n1"), node("n2")
    db = pod("db", labels={"app": "db"}, node_name="n1")
    nodes = infos(n1, n2, placed={"n1": [db]})
    p = PodInfo.of(pod("web", affinity=_aff({"app": "db"})))
    state = pre_filter(p, nodes)
    assert run_filters(state, nodes[0]) is None
    s = run_filters(state, nodes[1])
    assert s is not None and s.reasons == ("node(s) didn't match pod affinity rules",) and s.unresolvable
    # nobody matches anywhere, but the pod matches its own term: it may go anywhere
    lone = PodInfo.of(pod("x", labels={"app": "x"}, affinity=_aff({"app": "x"})))
    assert run_filters(pre_filter(lone, nodes), nodes[1]) is None

    q = PodInfo.of(pod("web", affinity=_anti({"app": "db"})))
    state = pre_filter(q, nodes)
    s = run_filters(state, nodes[0])
    assert s is not None and s.reasons == ("node(s) didn't match pod anti-affinity rules",)
    assert run_filters(state, nodes[1]) is None

    # an existing pod's anti-affinity keeps matching pods away from its node
    guard = pod("guard", labels={"app": "guard"}, node_name="n1", affinity=_anti({"app": "web"}))
    nodes = infos(n1, n2, placed={"n1": [guard]})
    state = pre_filter(PodInfo.of(pod("web", labels={"app": "web"})), nodes)
    s = run_filters(state, nodes[0])
    assert s is not None and s.reasons == ("node(s) didn't satisfy existing pods anti-affinity rules",)
    assert run_filters(state, nodes[1]) is None


def test_topology_spread_do_not_schedule() -> None:
    c = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"g": "1"}},
        }
    ]
    placed = {"n1": [pod("a", labels={"g": "1"}, node_name="n1")]}
    nodes = infos(node("n1"), node("n2"), placed=placed)
    state = pre_filter(PodInfo.of(pod("p", labels={"g": "1"}, topologySpreadConstraints=c)), nodes)
    s = run_filters(state, nodes[0])
    assert s is not None and s.reasons == ("node(s) didn't match pod topology spread constraints",)
    assert run_filters(state, nodes[1]) is None
    c[0]["topologyKey"] = "zone"
    nodes = infos(node("n1", labels={"zone": "a"}), node("n2"))
    state = pre_filter(PodInfo.of(pod("p", labels={"g": "1"}, topologySpreadConstraints=c)), nodes)
    s = run_filters(state, nodes[1])
    assert s is not None and s.reasons == (plugins.ERR_SPREAD_MISSING_LABEL,)


def test_scores_least_allocated_and_balanced() -> None:
    empty, busy = infos(node("a"), node("b"), placed={"b": [pod("x", cpu="3", memory="1Gi", node_name="b")]})
    state = pre_filter(PodInfo.of(pod("p", cpu="100m", memory="100Mi")), [empty, busy])
    assert plugins.least_allocated(state, empty) > plugins.least_allocated(state, busy)
    assert plugins.balanced_allocation(state, empty) > plugins.balanced_allocation(state, busy)
    scores = plugins.score_nodes(state, [empty, busy])
    assert scores[0] > scores[1]


def test_scores_preferred_affinity_prefer_no_schedule_and_owner_spreading() -> None:
    a, b = infos(node("a", labels={"disk": "ssd"}), node("b"))
    pref = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]},
                }
            ]
        }
    }
    state = pre_filter(PodInfo.of(pod("p", affinity=pref)), [b, a])
    assert plugins.preferred_node_affinity(state, a) == 50
    s = plugins.score_nodes(state, [b, a])
    assert s[1] > s[0]

    a, b = infos(node("a", taints=[{"key": "k", "effect": "PreferNoSchedule"}]), node("b"))
    state = pre_filter(PodInfo.of(pod("p")), [a, b])
    s = plugins.score_nodes(state, [a, b])
    assert s[1] > s[0]

    a, b = infos(node("a"), node("b"), placed={"a": [pod("x", owner="rs1", node_name="a")]})
    state = pre_filter(PodInfo.of(pod("p", owner="rs1")), [a, b])
    s = plugins.score_nodes(state, [a, b])
    assert s[1] > s[0]

    soft = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"g": "1"}},
        }
    ]
    a, b = infos(node("a"), node("b"), placed={"a": [pod("x", labels={"g": "1"}, node_name="a")]})
    state = pre_filter(PodInfo.of(pod("p", labels={"g": "1"}, topologySpreadConstraints=soft)), [a, b])
    assert run_filters(state, a) is None  # soft: never a filter
    s = plugins.score_nodes(state, [a, b])
    assert s[1] > s[0]


def test_the_fused_resource_score_is_the_two_plugins_weighted() -> None:
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
        weights = plugins.WEIGHTS
        assert plugins.resource_scores(state, ni) == (
            weights["NodeResourcesFit"] * plugins.least_allocated(state, ni)
            + weights["NodeResourcesBalancedAllocation"] * plugins.balanced_allocation(state, ni)
        )

    check()


def test_filters_a_pod_cannot_fail_are_skipped_without_changing_a_verdict() -> None:
    """A cycle runs only the filters that can reject its pod; running every filter agrees."""
    plain = PodInfo.of(pod("p", cpu="100m"))
    nodes = infos(
        node("a"),
        node("b", unschedulable=True),
        node("c", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
        node("d", ready="False"),
        node("e", cpu="50m"),
    )
    state = pre_filter(plain, nodes)
    assert plugins.node_ports not in state.filters and plugins.node_affinity not in state.filters
    for ni in nodes:
        everything = next((s for f in plugins.FILTERS if (s := f(state, ni)) is not None), None)
        assert run_filters(state, ni) == everything, ni.name


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
        ),
        max_size=30,
    )

    @settings(max_examples=150, deadline=None)
    @given(ops)
    def check(steps: list[tuple[str, int, int]]) -> None:
        ni = NodeInfo.of(node("n", cpu="2", memory="2Gi", pods=4))
        placed: list[str] = []
        for i, (op, cpu, mem) in enumerate(steps):
            if op == "place":
                ni.add_pod(PodInfo.of(pod(f"x{i}", cpu=f"{cpu}m", memory=f"{mem}Mi", node_name="n")))
                placed.append(f"default/x{i}")
            elif op == "remove" and placed:
                ni.remove_pod(placed.pop(mem % len(placed)))
            elif op == "resize":
                ni.set_node(node("n", cpu=f"{2 * cpu}m", memory="2Gi", pods=4))
            else:
                state = pre_filter(PodInfo.of(pod("p", cpu=f"{cpu}m", memory=f"{mem}Mi")), [ni])
                assert plugins.node_resources_fit(state, ni) == plugins._resources_fit(state, ni)
                assert plugins.resource_scores(state, ni) == plugins._resource_scores(state, ni)

    check()
