"""InterPodAffinity: the pod's required (anti-)affinity and the placed pods' anti-affinity."""

from __future__ import annotations

from components.scheduler.nodeinfo import PodInfo
from components.scheduler.plugins import pre_filter, run_filters
from tests.components.scheduler.support import infos, node, pod


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


def test_a_term_selects_its_namespaces_and_an_empty_namespace_selector_selects_all() -> None:
    n1, n2 = node("n1"), node("n2")
    db = pod("db", labels={"app": "db"}, node_name="n1", ns="data")
    nodes = infos(n1, n2, placed={"n1": [db]})

    def anti(**namespaces: object) -> PodInfo:
        term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
        affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term | namespaces]}}
        return PodInfo.of(pod("web", affinity=affinity))

    # the pod's own namespace ("default") by default: the db in "data" is not its business
    assert run_filters(pre_filter(anti(), nodes), nodes[0]) is None
    assert run_filters(pre_filter(anti(namespaces=["data"]), nodes), nodes[0]) is not None
    assert run_filters(pre_filter(anti(namespaceSelector={}), nodes), nodes[0]) is not None
    # names and an empty selector: the union, so every namespace
    assert run_filters(pre_filter(anti(namespaces=["other"], namespaceSelector={}), nodes), nodes[0]) is not None
    assert run_filters(pre_filter(anti(namespaces=["other"]), nodes), nodes[0]) is None


def test_a_namespace_selector_adds_the_namespaces_whose_labels_it_selects() -> None:
    n1, n2 = node("n1"), node("n2")
    db = pod("db", labels={"app": "db"}, node_name="n1", ns="data")
    cache = pod("cache", labels={"app": "db"}, node_name="n2", ns="scratch")
    nodes = infos(n1, n2, placed={"n1": [db], "n2": [cache]})
    labels = {"data": {"tier": "storage"}, "scratch": {"tier": "tmp"}, "default": {}}

    def anti(**namespaces: object) -> PodInfo:
        term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
        affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term | namespaces]}}
        return PodInfo.of(pod("web", affinity=affinity))

    def barred(pi: PodInfo) -> list[bool]:
        state = pre_filter(pi, nodes, labels.get)
        return [run_filters(state, ni) is not None for ni in nodes]

    storage = {"matchLabels": {"tier": "storage"}}
    assert barred(anti(namespaceSelector=storage)) == [True, False]
    # the union with the listed names
    assert barred(anti(namespaceSelector=storage, namespaces=["scratch"])) == [True, True]
    # expressions select too; a selector that selects no namespace adds nothing
    not_storage = {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["storage"]}]}
    assert barred(anti(namespaceSelector=not_storage)) == [False, True]
    assert barred(anti(namespaceSelector={"matchLabels": {"tier": "none"}})) == [False, False]
    # a namespace the scheduler does not know is not selected by labels
    assert [run_filters(pre_filter(anti(namespaceSelector=storage), nodes), ni) for ni in nodes] == [None, None]


def test_a_placed_pods_anti_affinity_reads_the_labels_of_the_incoming_pods_namespace() -> None:
    n1 = node("n1")
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "kubernetes.io/hostname",
        "namespaceSelector": {"matchLabels": {"team": "shop"}},
    }
    loner = pod(
        "loner",
        node_name="n1",
        ns="data",
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
    )
    nodes = infos(n1, placed={"n1": [loner]})
    web = PodInfo.of(pod("web", labels={"app": "web"}, ns="front"))
    assert run_filters(pre_filter(web, nodes, {"front": {"team": "shop"}}.get), nodes[0]) is not None
    assert run_filters(pre_filter(web, nodes, {"front": {"team": "blog"}}.get), nodes[0]) is None
