"""Webhook rule matching (admissionregistration/v1 RuleWithOperations), compiled configurations,
the AdmissionReview answer checks, and the warning headers: pure pieces, no server."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.admission.rules import Rule, Target, parse_rule
from apiserver.admission.webhook.config import CompiledHooks, TLSContexts, compile_configurations
from apiserver.admission.webhook.failures import CallFailure, rejected
from apiserver.admission.webhook.review import parse_answer
from apiserver.warnings import header_values

OPS = ["CREATE", "UPDATE", "DELETE", "CONNECT"]
GROUPS = ["", "apps", "batch"]
VERSIONS = ["v1", "v1beta1"]
RESOURCES = ["pods", "deployments", "namespaces", "configmaps"]
SUBS = ["", "status", "scale"]


def target(
    op: str = "CREATE", group: str = "", version: str = "v1", res: str = "pods", sub: str = "", ns: str = "d"
) -> Target:
    return Target(op, group, version, res, sub, ns)


def rule(**fields: Any) -> Rule:
    raw = {"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], **fields}
    return parse_rule(raw)


targets = st.builds(
    Target,
    st.sampled_from(OPS),
    st.sampled_from(GROUPS),
    st.sampled_from(VERSIONS),
    st.sampled_from(RESOURCES),
    st.sampled_from(SUBS),
    st.sampled_from(["", "default"]),
)
patterns = st.sampled_from(["*", "*/*", "pods", "pods/*", "pods/status", "*/status", "*/scale", "deployments/scale"])


def _oracle(pattern: str, t: Target) -> bool:
    """What a resources entry means, written from the API documentation."""
    if pattern == "*/*":
        return True
    if pattern == "*":
        return t.subresource == ""
    if "/" not in pattern:
        return t.resource == pattern and t.subresource == ""
    res, sub = pattern.split("/")
    return (res == "*" or res == t.resource) and (sub == "*" or sub == t.subresource)


@settings(max_examples=300, deadline=None)
@given(targets, st.lists(patterns, min_size=1, max_size=3))
def test_resources_match_as_documented(t: Target, resources: list[str]) -> None:
    assert rule(resources=resources).matches(t) == any(_oracle(p, t) for p in resources)


@settings(max_examples=300, deadline=None)
@given(
    targets,
    st.lists(st.sampled_from([*OPS, "*"]), max_size=3),
    st.lists(st.sampled_from([*GROUPS, "*"]), max_size=3),
    st.lists(st.sampled_from([*VERSIONS, "*"]), max_size=3),
)
def test_operations_groups_and_versions_are_exact_or_wildcard(
    t: Target, ops: list[str], groups: list[str], versions: list[str]
) -> None:
    expected = (
        ("*" in ops or t.operation in ops)
        and ("*" in groups or t.group in groups)
        and ("*" in versions or t.version in versions)
    )
    assert rule(operations=ops, apiGroups=groups, apiVersions=versions).matches(t) == expected


def test_scope() -> None:
    namespaced, cluster = rule(scope="Namespaced"), rule(scope="Cluster")
    assert namespaced.matches(target(ns="default")) and not namespaced.matches(target(ns=""))
    assert cluster.matches(target(res="nodes", ns="")) and not cluster.matches(target(ns="default"))
    ns_object = target(res="namespaces", ns="team-a")  # a namespace's own requests carry its name
    assert cluster.matches(ns_object) and not namespaced.matches(ns_object)
    assert rule(scope="*").matches(ns_object) and rule().matches(ns_object)


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=4),
        max_leaves=12,
    )
)
def test_odd_rules_parse_to_rules_that_match_nothing_odd(raw: Any) -> None:
    parsed = parse_rule(raw)  # never raises
    assert isinstance(parsed.matches(target()), bool)


# -- configurations ---------------------------------------------------------------------------


def _config(name: str, *hooks: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "webhooks": list(hooks)}


def _hook(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "clientConfig": {"url": "https://127.0.0.1:9443/x"}, "rules": [], **fields}


def test_configurations_compile_in_kubes_order_with_v1_defaults() -> None:
    hooks = compile_configurations(
        [_config("b", _hook("b1")), _config("a", _hook("a1"), _hook("a2", timeoutSeconds=3))], TLSContexts(), True
    )
    assert [h.name for h in hooks] == ["a1", "a2", "b1"]
    a1 = hooks[0]
    assert (a1.failure_policy, a1.match_policy, a1.timeout, a1.reinvoke) == ("Fail", "Equivalent", 10, False)
    assert a1.namespace_selector.empty() and a1.object_selector.empty()
    assert hooks[1].timeout == 3 and a1.uid == "a/a1/0"


def test_unusable_client_configs_are_kept_as_problems() -> None:
    cases = {
        "http": {"url": "http://127.0.0.1/x"},
        "query": {"url": "https://127.0.0.1/x?a=b"},
        "bundle": {"url": "https://127.0.0.1/x", "caBundle": "not base64!"},
        "pem": {"url": "https://127.0.0.1/x", "caBundle": base64.b64encode(b"no certificates").decode()},
        "none": {},
    }
    hooks = compile_configurations(
        [_config("c", *(_hook(k, clientConfig=v) for k, v in cases.items()))], TLSContexts(), False
    )
    for h in hooks:
        assert h.endpoint.problem, h.name
    bad_selector = compile_configurations(
        [_config("c", _hook("s", namespaceSelector={"matchLabels": {"bad key!": "x"}}))], TLSContexts(), False
    )
    assert bad_selector[0].selector_problem


def test_hooks_recompile_only_when_the_generation_moves() -> None:
    class Source:
        generation = 1
        compiled = 0

        def objects(self) -> list[dict[str, Any]]:
            Source.compiled += 1
            return [_config("a", _hook("a1"))]

    source = Source()
    hooks = CompiledHooks(lambda: source, mutating=False)
    first = hooks.current()
    assert hooks.current() is first and Source.compiled == 1
    source.generation = 2
    assert hooks.current() is not first and Source.compiled == 2
    assert CompiledHooks(lambda: None, mutating=False).current() == ()


# -- answers ----------------------------------------------------------------------------------


def _answer(response: Any, api_version: str = "admission.k8s.io/v1") -> bytes:
    return orjson.dumps({"apiVersion": api_version, "kind": "AdmissionReview", "response": response})


def test_answers_are_checked_as_kube_checks_them() -> None:
    ok = parse_answer("w", _answer({"uid": "u", "allowed": True, "warnings": ["x"]}), "u", "v1", False)
    assert ok.allowed and ok.warnings == ("x",) and ok.patch is None
    patch = base64.b64encode(b"[]").decode()
    assert (
        parse_answer(
            "w", _answer({"uid": "u", "allowed": True, "patchType": "JSONPatch", "patch": patch}), "u", "v1", True
        ).patch
        == b"[]"
    )
    bad = {
        "uid": ({"uid": "other", "allowed": True}, 'expected response.uid="u", got "other"'),
        "kind": (None, "webhook response was absent"),
        "no type": ({"uid": "u", "allowed": True, "patch": patch}, "response.patch but not response.patchType"),
        "validating patch": ({"uid": "u", "allowed": True, "patch": patch, "patchType": "JSONPatch"}, "may not return"),
        "allowed": ({"uid": "u", "allowed": "yes"}, "response.allowed must be a boolean"),
        "other type": (
            {"uid": "u", "allowed": True, "patch": patch, "patchType": "Merge"},
            'unsupported patch type "Merge"',
        ),
    }
    for case, (response, words) in bad.items():
        mutating = case in ("no type", "other type")
        with pytest.raises(CallFailure) as e:
            parse_answer("w", _answer(response), "u", "v1", mutating)
        assert words in str(e.value), case
        assert str(e.value).startswith('failed calling webhook "w": '), case
    with pytest.raises(CallFailure, match=r"expected webhook response of admission\.k8s\.io/v1"):
        parse_answer("w", _answer({"uid": "u", "allowed": True}, "admission.k8s.io/v2"), "u", "v1", False)


_words = st.sampled_from(["admission.k8s.io/v1", "AdmissionReview", "u", "JSONPatch", "W10="]) | st.text(max_size=5)
_fields = st.sampled_from(["uid", "allowed", "patch", "patchType", "status", "warnings"])
_values = st.none() | st.booleans() | _words | st.integers(-1000, 1000) | st.lists(_words, max_size=2)
_reviews = st.fixed_dictionaries(
    {},
    optional={"apiVersion": _words, "kind": _words, "response": _values | st.dictionaries(_fields, _values)},
)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64) | st.builds(orjson.dumps, _reviews))
def test_any_answer_is_parsed_or_refused_with_a_call_failure(body: bytes) -> None:
    try:
        parse_answer("w", body, "u", "v1", True)
    except CallFailure as e:
        assert str(e).startswith('failed calling webhook "w": ')


def test_rejections_take_the_webhooks_status() -> None:
    e = rejected("w", {"code": 422, "message": "no", "reason": "Invalid"})
    assert (e.code, e.reason, e.message) == (422, "Invalid", 'admission webhook "w" denied the request: no')
    assert rejected("w", {"code": 200}).code == 400
    assert rejected("w", {"reason": "Because"}).message == 'admission webhook "w" denied the request: Because'
    assert rejected("w", None).message == 'admission webhook "w" denied the request without explanation'


def test_warning_headers_are_quoted_and_truncated_as_kube_does() -> None:
    assert header_values(['a "b"\n', "é"]) == ['299 - "a \\"b\\"\\n"', '299 - "\\u00e9"']
    many = [f"{i}:" + "x" * 1000 for i in range(5)]
    assert all(len(v) <= len('299 - ""') + 256 for v in header_values(many))
