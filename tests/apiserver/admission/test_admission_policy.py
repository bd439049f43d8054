"""ValidatingAdmissionPolicy: CEL compilation and evaluation, kube's matching, bindings'
actions, params, failure policies and the refusal's wording, without HTTP."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver.admission.cel import (
    Activation,
    CompileError,
    EvalError,
    compile_expression,
)
from apiserver.admission.policy.compiled import compile_errors, compile_policy
from apiserver.admission.policy.matching import MatchResources
from apiserver.admission.policy.plugin import ValidatingAdmissionPolicy
from apiserver.admission.policy.source import LivePolicies, NoObjects
from apiserver.admission.policy.wiring import from_caches, param_lookup
from apiserver.auth.user import User
from apiserver.errors import StatusError
from machinery.objects import Obj
from tests.apiserver.admission.policy_support import (
    CONFIGMAPS,
    NAMESPACES,
    PODS,
    RESOURCES,
    Objects,
    binding,
    deployment,
    policy,
    request,
)

REPLICAS = {"expression": "object.spec.replicas <= 5"}


class Setup:
    """A plugin over in-memory sources, collecting the warnings it sends."""

    def __init__(self, policies: list[Obj], bindings: list[Obj], namespaces: Sequence[Obj] = ()) -> None:
        self.policies = Objects(*policies)
        self.bindings = Objects(*bindings)
        self.namespaces = Objects(*namespaces)
        self.warnings: list[str] = []
        self.configmaps = Objects()
        self.configmaps_resource = CONFIGMAPS
        self.plugin = ValidatingAdmissionPolicy(
            LivePolicies(self.policies, self.bindings),
            lambda name: self.namespaces.get_object(None, name),
            self._params,
            self.warnings.append,
        )

    def _params(self, api_version: str, kind: str) -> Any:
        if (api_version, kind) == ("v1", "ConfigMap"):
            return self.configmaps, True
        return None

    def decide(self, req: Any) -> StatusError | None:
        return self.plugin.decide(req)


def namespace(name: str, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def run(source: str, **values: Any) -> Any:
    return compile_expression(source).run(Activation.of(values))


# --- CEL: the expressions of kube's documentation, and the spec's macros and functions


def test_typical_policies_from_the_kubernetes_docs() -> None:
    pod: Obj = {
        "metadata": {"labels": {"env": "prod"}},
        "spec": {
            "replicas": 3,
            "containers": [{"image": "registry.example.com/a:1"}, {"image": "registry.example.com/b"}],
        },
    }
    assert run("object.spec.replicas <= 5", object=pod) is True
    assert run("has(object.metadata.labels) && 'env' in object.metadata.labels", object=pod) is True
    assert run("has(object.metadata.annotations)", object=pod) is False
    assert run("object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))", object=pod) is True
    pod["spec"]["containers"].append({"image": "docker.io/evil"})
    assert run("object.spec.containers.all(c, c.image.startsWith('registry.example.com/'))", object=pod) is False


@pytest.mark.parametrize(
    "source",
    [
        "[1, 2, 3].exists(x, x > 2) && ![1, 2, 3].exists_one(x, x > 1)",
        "[1, 2, 3].map(x, x * 2) == [2, 4, 6] && [1, 2, 3].filter(x, x > 1).size() == 2",
        "'abc'.endsWith('c') && 'abc'.contains('b') && 'abc'.matches('^a.c$') && size('abc') == 3",
        "'a,b'.split(',') == ['a', 'b'] && 'ABC'.lowerAscii() == 'abc' && ['a', 'b'].join('-') == 'a-b'",
        "timestamp('2024-01-01T00:00:00Z') + duration('1h') == timestamp('2024-01-01T01:00:00Z')",
        "duration('1h') > duration('30m') && timestamp('2024-01-01T00:00:00Z').getFullYear() == 2024",
        "int('5') == 5 && string(5) == '5' && type(1) == int && dyn(1) == 1.0",
        "object.?spec.?missing.orValue(7) == 7",
    ],
)
def test_cel_spec_coverage(source: str) -> None:
    assert run(source, object={"spec": {}}) is True


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("object.spec.replicas > 1", "no such key: replicas"),
        ("1 / 0 == 1", "divide by zero"),
        ("9223372036854775807 + 1 > 0", "overflow"),
        ("[1][3] == 1", "index"),
    ],
)
def test_runtime_errors_are_eval_errors(source: str, why: str) -> None:
    with pytest.raises(EvalError, match=why):
        run(source, object={"spec": {}})


def test_compile_errors_name_the_field_as_kube_does() -> None:
    bad = policy(
        "p",
        [
            {"expression": "object.spec.("},
            {"expression": "1 + 2"},
            {"expression": "true", "messageExpression": "1"},
            {"expression": "authorizer.group('').resource('pods').check('get').allowed()"},
        ],
        variables=[{"name": "bad name", "expression": "object"}],
    )
    causes = compile_errors(bad)
    fields = [c.field for c in causes]
    assert fields == [
        "spec.validations[0].expression",
        "spec.validations[1].expression",
        "spec.validations[3].expression",
        "spec.validations[2].messageExpression",
        "spec.variables[0].name",
    ]
    assert causes[0].reason == "FieldValueInvalid"
    assert causes[0].message.startswith(
        'Invalid value: "object.spec.(": compilation failed: ERROR: <input>:1:13: Syntax'
    )
    assert "must evaluate to bool" in causes[1].message
    assert "undeclared reference to 'authorizer'" in causes[2].message
    assert compile_errors(policy("ok", [REPLICAS])) == []
    bad_rules = policy("r", [REPLICAS], rules=[{"operations": ["EXPLODE"], "resources": ["pods"]}])
    assert [c.field for c in compile_errors(bad_rules)] == ["spec.matchConstraints.resourceRules[0].operations[0]"]


def test_compile_rejects_non_strings_and_huge_expressions() -> None:
    with pytest.raises(CompileError):
        compile_expression(42)  # type: ignore[arg-type]
    with pytest.raises(CompileError, match="longer than"):
        compile_expression("true && " * 1000 + "true")


# --- the plugin: Deny, Warn, failure policy, wording


def test_deny_is_a_422_worded_as_kube() -> None:
    s = Setup([policy("max-replicas", [REPLICAS])], [binding("max-replicas-b", "max-replicas")])
    assert s.decide(request(deployment(replicas=3))) is None
    err = s.decide(request(deployment(replicas=10)))
    assert err is not None
    why = (
        "ValidatingAdmissionPolicy 'max-replicas' with binding 'max-replicas-b' denied request: "
        "failed expression: object.spec.replicas <= 5"
    )
    assert err.code == 422 and err.reason == "Invalid"
    assert err.message == f'deployments.apps "web" is forbidden: {why}'
    assert err.details == {"kind": "deployments", "name": "web", "group": "apps", "causes": [{"message": why}]}


def test_reason_message_and_message_expression() -> None:
    validations = [
        {"expression": "object.spec.replicas <= 5", "reason": "Forbidden", "message": "  too many  "},
        {"expression": "false", "messageExpression": "'replicas are ' + string(object.spec.replicas)"},
        {"expression": "false", "messageExpression": "'two\\nlines'", "message": "fallback"},
    ]
    s = Setup([policy("p", validations)], [binding("b", "p")])
    err = s.decide(request(deployment(replicas=10)))
    assert err is not None and err.code == 403 and err.reason == "Forbidden"
    assert err.message.endswith("denied request: too many")
    s.policies.put(policy("p", validations[1:]))
    err = s.decide(request(deployment(replicas=10)))
    assert err is not None and err.message.endswith("denied request: replicas are 10")
    s.policies.put(policy("p", validations[2:]))
    err = s.decide(request(deployment(replicas=10)))
    assert err is not None and err.message.endswith("denied request: fallback")


def test_runtime_error_under_fail_and_ignore() -> None:
    s = Setup([policy("p", [REPLICAS], failure="Fail")], [binding("b", "p")])
    err = s.decide(request(deployment(replicas=None) | {"spec": {}}))
    assert err is not None and err.code == 422
    assert err.message.endswith(
        "denied request: expression 'object.spec.replicas <= 5' resulted in error: no such key: replicas"
    )
    s.policies.put(policy("p", [REPLICAS], failure="Ignore"))
    assert s.decide(request(deployment() | {"spec": {}})) is None
    # a false result is a failure whatever the failure policy
    assert s.decide(request(deployment(replicas=9))) is not None


def test_an_expression_that_does_not_compile_fails_when_evaluated() -> None:
    s = Setup([policy("p", [{"expression": "object.spec.("}])], [binding("b", "p")])
    err = s.decide(request(deployment()))
    assert err is not None and "resulted in error: compilation error: ERROR: <input>:1:13" in err.message
    s.policies.put(policy("p", [{"expression": "object.spec.("}], failure="Ignore"))
    assert s.decide(request(deployment())) is None


def test_warn_and_audit_actions() -> None:
    s = Setup([policy("p", [REPLICAS])], [binding("b", "p", ["Warn", "Audit"])])
    assert s.decide(request(deployment(replicas=10))) is None
    assert s.warnings == [
        "Validation failed for ValidatingAdmissionPolicy 'p' with binding 'b': "
        "failed expression: object.spec.replicas <= 5"
    ]
    s.bindings.put(binding("b", "p", ["Deny", "Warn"]))
    assert s.decide(request(deployment(replicas=10))) is not None
    assert len(s.warnings) == 2


def test_only_bound_policies_run_and_the_first_denial_is_reported() -> None:
    s = Setup(
        [
            policy("a", [{"expression": "false", "message": "A"}]),
            policy("b", [{"expression": "false", "message": "B"}]),
        ],
        [binding("bind-b", "b"), binding("bind-missing", "nope")],
    )
    err = s.decide(request(deployment()))
    assert err is not None and "'b' with binding 'bind-b' denied request: B" in err.message
    s.bindings.remove("bind-b")
    assert not s.plugin.handles(request(deployment()))


def test_policy_configuration_resources_are_exempt() -> None:
    everything = [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]
    s = Setup([policy("p", [{"expression": "false"}], rules=everything)], [binding("b", "p")])
    assert s.decide(request({"metadata": {"name": "cm"}}, resource=CONFIGMAPS)) is not None
    vap = RESOURCES.get(("admissionregistration.k8s.io", "validatingadmissionpolicies"))
    if vap is not None:
        assert not s.plugin.handles(request(policy("x", []), resource=vap, namespace=None))


# --- matching


def rule(**kw: Any) -> Obj:
    return {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"], **kw}


def matches(constraints: Obj, req: Any, ns_labels: dict[str, str] | None = None) -> bool:
    return MatchResources.parse(constraints, "spec").matches(req, lambda name: ns_labels or {})


def test_resource_rules() -> None:
    create = request(deployment())
    assert matches({"resourceRules": [rule()]}, create)
    assert not matches({"resourceRules": [rule(operations=["UPDATE"])]}, create)
    assert not matches({"resourceRules": [rule(apiGroups=[""])]}, create)
    assert not matches({"resourceRules": [rule(apiVersions=["v1beta1"])]}, create)
    assert matches({"resourceRules": [rule(resources=["deployments"], resourceNames=["web"])]}, create)
    assert not matches({"resourceRules": [rule(resourceNames=["other"])]}, create)
    status = request(deployment(), subresource="status", operation="UPDATE", old=deployment())
    assert not matches({"resourceRules": [rule(resources=["*"])]}, status)
    assert not matches({"resourceRules": [rule(resources=["deployments"])]}, status)
    for resources in (["*/*"], ["deployments/*"], ["*/status"], ["deployments/status"]):
        assert matches({"resourceRules": [rule(resources=resources)]}, status), resources
    assert matches({"resourceRules": [rule(resources=["deployments/*"])]}, create)
    assert not matches({"resourceRules": [rule()], "excludeResourceRules": [rule(resources=["deployments"])]}, create)
    assert matches({}, create)  # a binding's matchResources without rules narrows nothing


def test_scope() -> None:
    ns_create = request(namespace("team"), resource=NAMESPACES, namespace=None)
    pod = request({"metadata": {"name": "p"}}, resource=PODS)
    assert matches({"resourceRules": [rule(scope="Cluster")]}, ns_create)
    assert not matches({"resourceRules": [rule(scope="Namespaced")]}, ns_create)
    assert matches({"resourceRules": [rule(scope="Namespaced")]}, pod)
    assert not matches({"resourceRules": [rule(scope="Cluster")]}, pod)


def test_namespace_and_object_selectors() -> None:
    prod = {"matchLabels": {"env": "prod"}}
    create = request(deployment(labels={"tier": "web"}))
    assert matches({"namespaceSelector": prod}, create, {"env": "prod"})
    assert not matches({"namespaceSelector": prod}, create, {"env": "dev"})
    # a Namespace is selected by its own labels; other cluster-scoped objects always match
    assert matches(
        {"namespaceSelector": prod}, request(namespace("x", env="prod"), resource=NAMESPACES, namespace=None)
    )
    assert not matches({"namespaceSelector": prod}, request(namespace("x"), resource=NAMESPACES, namespace=None))
    node = request({"metadata": {"name": "n"}}, resource=RESOURCES[("", "nodes")], namespace=None)
    assert matches({"namespaceSelector": prod}, node)
    web = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}
    assert matches({"objectSelector": web}, create)
    assert not matches({"objectSelector": web}, request(deployment(labels={"tier": "db"})))
    # the old object's labels count too (an update removing the label is still covered)
    update = request(deployment(labels={}), operation="UPDATE", old=deployment(labels={"tier": "web"}))
    assert matches({"objectSelector": web}, update)


def test_binding_match_resources_narrow_the_policy() -> None:
    s = Setup(
        [policy("p", [REPLICAS])],
        [binding("b", "p", matchResources={"namespaceSelector": {"matchLabels": {"env": "prod"}}})],
        [namespace("default", env="dev"), namespace("prod", env="prod")],
    )
    assert s.decide(request(deployment(replicas=9))) is None
    assert s.decide(request(deployment(replicas=9, ns="prod"), namespace="prod")) is not None


# --- variables the expressions see


def test_request_namespace_object_variables_and_match_conditions() -> None:
    validations = [
        {"expression": "request.userInfo.username == 'ann' && 'devs' in request.userInfo.groups"},
        {
            "expression": "request.operation == 'CREATE' && request.kind.kind == 'Deployment'"
            " && request.namespace == 'default'"
        },
        {"expression": "request.resource.resource == 'deployments' && request.name == 'web' && !request.dryRun"},
        {"expression": "namespaceObject.metadata.labels.env == 'dev'"},
        {"expression": "variables.doubled == 6 && variables.plus_one == 7"},
    ]
    spec: dict[str, Any] = {
        "variables": [
            {"name": "doubled", "expression": "object.spec.replicas * 2"},
            {"name": "plus_one", "expression": "variables.doubled + 1"},
        ],
        "matchConditions": [{"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"}],
    }
    s = Setup([policy("p", validations, **spec)], [binding("b", "p")], [namespace("default", env="dev")])
    assert s.decide(request(deployment(replicas=3))) is None
    err = s.decide(request(deployment(replicas=3), user=User("bob")))
    assert err is not None and "failed expression: request.userInfo.username" in err.message
    # a false match condition: the policy does not apply at all
    assert s.decide(request(deployment(replicas=1, ns="kube-system"), namespace="kube-system")) is None


# --- params


def configmap(name: str, ns: str = "default", labels: dict[str, str] | None = None, **data: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "data": data,
    }


PARAM_POLICY = policy(
    "p",
    [{"expression": "params == null || object.spec.replicas <= int(params.data.max)"}],
    paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
)


def test_params_by_name_in_the_request_namespace() -> None:
    s = Setup([PARAM_POLICY], [binding("b", "p", paramRef={"name": "limits", "parameterNotFoundAction": "Allow"})])
    assert s.decide(request(deployment(replicas=9))) is None  # not found, Allow: nothing to evaluate
    s.configmaps.put(configmap("limits", max="5"))
    assert s.decide(request(deployment(replicas=9))) is not None
    assert s.decide(request(deployment(replicas=4))) is None
    s.configmaps.put(configmap("limits", ns="other", max="100"))
    s.bindings.put(binding("b", "p", paramRef={"name": "limits", "namespace": "other"}))
    assert s.decide(request(deployment(replicas=9))) is None


def test_params_by_selector_evaluate_each_and_deny_when_missing() -> None:
    ref = {"selector": {"matchLabels": {"kind": "limit"}}, "parameterNotFoundAction": "Deny"}
    s = Setup([PARAM_POLICY], [binding("b", "p", paramRef=ref)])
    err = s.decide(request(deployment(replicas=1)))
    assert err is not None
    assert err.message.endswith(
        "with binding 'b' denied request: failed to configure binding: "
        "no params found for policy binding with `Deny` parameterNotFoundAction"
    )
    s.configmaps.put(configmap("a", labels={"kind": "limit"}, max="10"))
    s.configmaps.put(configmap("b", labels={"kind": "limit"}, max="5"))
    s.configmaps.put(configmap("c", labels={"kind": "other"}, max="1"))
    assert s.decide(request(deployment(replicas=5))) is None
    assert s.decide(request(deployment(replicas=7))) is not None  # 'b' says at most 5


def test_param_configuration_errors_follow_the_failure_policy() -> None:
    no_ref = Setup([PARAM_POLICY], [binding("b", "p")])
    assert no_ref.decide(request(deployment(replicas=99))) is None  # no paramRef: params is null
    unknown = policy("p", [REPLICAS], paramKind={"apiVersion": "example.com/v1", "kind": "Limits"})
    s = Setup([unknown], [binding("b", "p", paramRef={"name": "x"})])
    err = s.decide(request(deployment()))
    assert err is not None and "failed to configure binding: paramKind kind" in err.message
    s.policies.put(
        policy("p", [REPLICAS], failure="Ignore", paramKind={"apiVersion": "example.com/v1", "kind": "Limits"})
    )
    assert s.decide(request(deployment())) is None
    cluster = Setup([PARAM_POLICY], [binding("b", "p", paramRef={"name": "limits"})])
    node = request({"metadata": {"name": "n"}}, resource=RESOURCES[("", "nodes")], namespace=None)
    cluster.policies.put(policy("p", [REPLICAS], rules=[rule()], paramKind={"apiVersion": "v1", "kind": "ConfigMap"}))
    err = cluster.decide(node)
    assert err is not None and "cannot use namespaced paramRef" in err.message


# --- sources: compiled once per generation, missing caches mean no policies


def test_policies_compile_once_per_generation() -> None:
    policies, bindings = Objects(policy("p", [REPLICAS])), Objects(binding("b", "p"))
    live = LivePolicies(policies, bindings)
    first = live.current()
    assert live.current() is first
    bindings.put(binding("b2", "p"))
    second = live.current()
    assert second is not first and second.pairs[0][0] is first.pairs[0][0]  # the policy was not recompiled
    changed = policy("p", [{"expression": "false"}])
    changed["metadata"]["generation"] = 2
    policies.put(changed)
    assert live.current().pairs[0][0] is not first.pairs[0][0]


def test_wiring_without_the_policy_caches_has_no_policies() -> None:
    plugin = from_caches({})
    assert not plugin.handles(request(deployment()))
    assert param_lookup({})("v1", "ConfigMap") is None
    assert list(NoObjects().objects()) == []


def test_a_malformed_policy_matches_nothing_and_a_malformed_binding_fails_closed() -> None:
    broken = policy("p", [REPLICAS])
    broken["spec"]["matchConstraints"] = {"resourceRules": "all"}
    assert compile_policy(broken).config_error
    s = Setup([broken], [binding("b", "p")])
    assert s.decide(request(deployment(replicas=9))) is None
    s.policies.put(policy("p", [REPLICAS]))
    s.bindings.put(binding("b", "p", paramRef={"name": "x", "selector": {}}))
    err = s.decide(request(deployment(replicas=1)))
    assert err is not None and "failed to configure binding" in err.message


# --- hostile input: random JSON never crashes an evaluation

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)
HOSTILE = [
    {"expression": "object.spec.replicas <= 5"},
    {"expression": "object.metadata.labels.all(k, k.size() < 10)"},
    {"expression": "has(object.spec) && object.spec.containers.all(c, c.image.startsWith('r/'))"},
    {"expression": "object.a + object.b > 0", "messageExpression": "string(object.a)"},
    {"expression": "size(object) > 0 && object.exists(k, k == 'x')"},
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=st.dictionaries(st.sampled_from(["spec", "metadata", "a", "b", "x"]), JSON, max_size=5), old=JSON)
def test_random_objects_never_crash_evaluation(obj: Obj, old: Any) -> None:
    for failure in ("Fail", "Ignore"):
        s = Setup([policy("p", HOSTILE, failure=failure)], [binding("b", "p", ["Deny", "Warn"])])
        req = request(obj, operation="UPDATE", old=old if isinstance(old, dict) else None)
        err = s.decide(req)
        assert err is None or (err.code == 422 and "ValidatingAdmissionPolicy 'p'" in err.message)
