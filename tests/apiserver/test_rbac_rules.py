"""RBAC's pure parts: rule matching, coverage (escalation checks), the policy snapshot with
aggregation and service-account subjects, request attributes, and bootstrap reconciliation."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.auth.user import User
from apiserver.authz.attributes import Attributes, request_attributes
from apiserver.authz.bootstrap_policy import AUTOUPDATE, bootstrap_objects, reconcile
from apiserver.authz.rbac.policy import PolicySnapshot
from apiserver.authz.rbac.rules import Rule, allows, uncovered

ANN = User("ann", ("devs",))


def res(verb: str, resource: str, *, group: str = "", sub: str = "", name: str = "", ns: str = "web") -> Attributes:
    return Attributes(ANN, verb, True, namespace=ns, api_group=group, resource=resource, subresource=sub, name=name)


def rule(verbs: list[str], groups: list[str], resources: list[str], names: tuple[str, ...] = ()) -> Rule:
    return Rule(frozenset(verbs), frozenset(groups), frozenset(resources), frozenset(names))


def test_matching() -> None:
    r = rule(["get", "list"], [""], ["pods", "*/scale"])
    assert allows(r, res("get", "pods"))
    assert not allows(r, res("delete", "pods"))
    assert not allows(r, res("get", "pods", sub="log"))
    assert allows(r, res("get", "deployments", sub="scale"))
    assert not allows(r, res("get", "pods", group="apps"))
    named = rule(["get"], [""], ["secrets"], ("s1",))
    assert allows(named, res("get", "secrets", name="s1"))
    assert not allows(named, res("get", "secrets", name="s2"))
    assert not allows(named, res("list", "secrets"))
    assert allows(rule(["*"], ["*"], ["*"]), res("escalate", "roles", group="rbac.authorization.k8s.io"))
    urls = Rule(frozenset({"get"}), non_resource_urls=frozenset({"/healthz", "/apis/*"}))
    assert allows(urls, Attributes(ANN, "get", False, path="/apis/apps/v1"))
    assert not allows(urls, Attributes(ANN, "get", False, path="/metrics"))
    assert not allows(urls, res("get", "pods"))


def test_coverage() -> None:
    mine = [rule(["get", "list"], [""], ["pods", "configmaps"]), rule(["*"], ["apps"], ["deployments"])]
    assert uncovered(mine, [rule(["get"], [""], ["pods"])]) == []
    assert uncovered(mine, [rule(["create", "get"], ["apps"], ["deployments"], ("d",))]) == []
    missing = uncovered(mine, [rule(["get", "delete"], [""], ["pods"])])
    assert missing == [rule(["delete"], [""], ["pods"])]
    # a named grant does not cover every name; `*/scale` covers each resource's scale
    assert uncovered([rule(["get"], [""], ["pods"], ("a",))], [rule(["get"], [""], ["pods"])])
    assert uncovered([rule(["get"], ["apps"], ["*/scale"])], [rule(["get"], ["apps"], ["deployments/scale"])]) == []


_words = st.sampled_from(["get", "list", "*"])
_groups = st.sampled_from(["", "apps", "*"])
_resources = st.sampled_from(["pods", "pods/log", "deployments", "*", "*/scale", "deployments/scale"])
_names = st.sampled_from(["a", "b"])
_rules = st.builds(
    lambda v, g, r, n: rule(v, g, r, tuple(n)),
    st.lists(_words, min_size=1, max_size=2),
    st.lists(_groups, min_size=1, max_size=2),
    st.lists(_resources, min_size=1, max_size=2),
    st.lists(_names, max_size=2),
)
_requests = st.builds(
    lambda v, g, r, n: res(v, r.split("/")[0], group=g, sub=r.split("/")[1] if "/" in r else "", name=n),
    st.sampled_from(["get", "list", "watch"]),
    st.sampled_from(["", "apps", "batch"]),
    st.sampled_from(["pods", "pods/log", "deployments", "deployments/scale", "jobs"]),
    st.sampled_from(["", "a", "b", "c"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_rules, max_size=3), _rules, _requests)
def test_covered_rules_never_allow_more_than_their_owner(owner: list[Rule], wanted: Rule, request: Attributes) -> None:
    if not uncovered(owner, [wanted]) and allows(wanted, request):
        assert any(allows(o, request) for o in owner)


def _binding(name: str, kind: str, role: str, subjects: list[dict[str, str]], ns: str = "") -> dict[str, object]:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"metadata": meta, "roleRef": {"kind": kind, "name": role}, "subjects": subjects}


def test_policy_bindings_aggregation_and_service_accounts() -> None:
    pods = {
        "metadata": {"name": "pods", "labels": {"agg": "yes"}},
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}],
    }
    jobs = {
        "metadata": {"name": "jobs", "labels": {"agg": "yes"}},
        "rules": [{"verbs": ["list"], "apiGroups": ["batch"], "resources": ["jobs"]}],
    }
    agg = {"metadata": {"name": "agg"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]}}
    loop = {
        "metadata": {"name": "loop", "labels": {"agg": "yes"}},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]},
    }
    local = {
        "metadata": {"name": "cm", "namespace": "web"},
        "rules": [{"verbs": ["*"], "apiGroups": [""], "resources": ["configmaps"]}],
    }
    snap = PolicySnapshot(
        [pods, jobs, agg, loop],
        [local],
        [_binding("g", "ClusterRole", "agg", [{"kind": "Group", "name": "devs"}])],
        [
            _binding("sa", "Role", "cm", [{"kind": "ServiceAccount", "name": "bot"}], ns="web"),
            _binding("bad", "Role", "cm", [{"kind": "Robot", "name": "x"}], ns="web"),
        ],
    )
    assert {r.verbs for r in snap.cluster_role_rules("agg")} == {frozenset({"get"}), frozenset({"list"})}
    assert len(snap.cluster_role_rules("loop")) == 2  # a cycle ends, it does not recurse forever
    assert len(snap.rules_for(ANN, "")) == 2
    bot = User("system:serviceaccount:web:bot")
    assert [r.resources for r in snap.rules_for(bot, "web")] == [frozenset({"configmaps"})]
    assert snap.rules_for(bot, "other") == []
    assert snap.rules_for(User("x"), "web") == []


def test_request_attributes() -> None:
    def verb(method: str, path: str, **query: str) -> tuple[str, str, str]:
        a = request_attributes(ANN, method, path, query)
        return a.verb, a.namespace, a.name

    assert verb("GET", "/api/v1/namespaces/web/pods") == ("list", "web", "")
    assert verb("GET", "/api/v1/namespaces/web/pods", watch="true") == ("watch", "web", "")
    assert verb("GET", "/api/v1/namespaces/web/pods", fieldSelector="metadata.name=p") == ("list", "web", "p")
    assert verb("GET", "/api/v1/namespaces/web/pods/p") == ("get", "web", "p")
    assert verb("DELETE", "/api/v1/namespaces/web/pods") == ("deletecollection", "web", "")
    assert verb("PATCH", "/api/v1/nodes/n1/status") == ("patch", "", "n1")
    assert verb("GET", "/api/v1/namespaces/web") == ("get", "web", "web")  # a namespace is inside itself
    a = request_attributes(ANN, "GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=n1,status.phase!=Failed"})
    assert a.node_name_selector == "n1"
    assert (
        request_attributes(ANN, "GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName!=n1"}).node_name_selector
        is None
    )
    path = request_attributes(ANN, "GET", "/healthz", {})
    assert (path.resource_request, path.verb, path.path) == (False, "get", "/healthz")


def test_bootstrap_reconcile_extends_and_respects_autoupdate_false() -> None:
    roles, bindings = bootstrap_objects()
    view = next(r for r in roles if r["metadata"]["name"] == "system:aggregate-to-view")
    assert reconcile(None, view) is view
    assert reconcile(view, view) is None
    trimmed = {**view, "rules": [*view["rules"][:1], {"verbs": ["get"], "apiGroups": ["x"], "resources": ["y"]}]}
    fixed = reconcile(trimmed, view)
    assert fixed is not None and all(r in fixed["rules"] for r in view["rules"])
    assert {"verbs": ["get"], "apiGroups": ["x"], "resources": ["y"]} in fixed["rules"]  # never narrowed
    frozen = {**trimmed, "metadata": {**view["metadata"], "annotations": {AUTOUPDATE: "false"}}}
    assert reconcile(frozen, view) is None
    names = {b["metadata"]["name"] for b in bindings}
    assert {"cluster-admin", "system:basic-user", "system:discovery", "system:kube-scheduler"} <= names
