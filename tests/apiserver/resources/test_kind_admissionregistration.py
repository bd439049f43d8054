"""admissionregistration.k8s.io/v1: webhook configurations (kube's defaults and per-webhook checks),
ValidatingAdmissionPolicy and its Binding (shapes); their columns."""

from __future__ import annotations

import copy
from typing import Any

from tests.apiserver.kinds_support import causes, cells, create, find, headers, rejected

GROUP = "admissionregistration.k8s.io"
MUTATING = find(GROUP, "mutatingwebhookconfigurations")
VALIDATING = find(GROUP, "validatingwebhookconfigurations")
POLICY = find(GROUP, "validatingadmissionpolicies")
BINDING = find(GROUP, "validatingadmissionpolicybindings")
RULE = {"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}


def hook(**more: Any) -> dict[str, Any]:
    return {
        "name": "pods.inject.example.com",
        "clientConfig": {"service": {"namespace": "hooks", "name": "injector", "path": "/mutate"}, "caBundle": "Zm9v"},
        "rules": [copy.deepcopy(RULE)],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        **more,
    }


def config(*hooks: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "inject"}, "webhooks": list(hooks)}


def test_webhook_defaults_as_kube() -> None:
    got = create(MUTATING, config(hook()), None)
    h = got["webhooks"][0]
    assert (h["failurePolicy"], h["matchPolicy"], h["timeoutSeconds"], h["reinvocationPolicy"]) == (
        "Fail",
        "Equivalent",
        10,
        "Never",
    )
    assert h["namespaceSelector"] == {} and h["objectSelector"] == {} and h["rules"][0]["scope"] == "*"
    assert h["clientConfig"]["service"]["port"] == 443
    validating = create(VALIDATING, config(hook()), None)["webhooks"][0]
    assert "reinvocationPolicy" not in validating and got["metadata"]["generation"] == 1


def test_webhook_checks() -> None:
    bad = hook(
        name="inject",
        sideEffects="Some",
        timeoutSeconds=0,
        admissionReviewVersions=["v2"],
        clientConfig={"url": "http://hooks.example.com/x?y=1"},
        rules=[
            {
                "operations": ["*", "CREATE"],
                "apiGroups": [],
                "apiVersions": ["v1"],
                "resources": ["pods"],
                "scope": "Some",
            }
        ],
    )
    assert rejected(VALIDATING, config(bad), None) == [
        'webhooks[0].name: Invalid value: "inject": should be a domain with at least three segments separated by dots',
        'webhooks[0].rules[0].operations: Invalid value: ["*","CREATE"]: if \'*\' is present, must not specify '
        "other operations",
        "webhooks[0].rules[0].apiGroups: Required value",
        'webhooks[0].rules[0].scope: Unsupported value: "Some": supported values: "*", "Cluster", "Namespaced"',
        'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"',
        "webhooks[0].timeoutSeconds: Invalid value: 0: the timeout value must be between 1 and 30 seconds",
        'webhooks[0].admissionReviewVersions: Invalid value: ["v2"]: must include at least one of v1, v1beta1',
        "webhooks[0].clientConfig.url: Invalid value: \"http://hooks.example.com/x?y=1\": 'https' is the only "
        "allowed URL scheme",
    ]
    missing = hook()
    for key in ("sideEffects", "admissionReviewVersions", "clientConfig"):
        missing.pop(key)
    assert causes(MUTATING, config(missing, hook(), hook(reinvocationPolicy="Always"))) == [
        "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
        "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
        "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
        'webhooks[1].name: Duplicate value: "pods.inject.example.com"',
        'webhooks[2].name: Duplicate value: "pods.inject.example.com"',
        'webhooks[2].reinvocationPolicy: Unsupported value: "Always": supported values: "IfNeeded", "Never"',
    ]


def test_policy_and_binding() -> None:
    policy = {
        "metadata": {"name": "max-replicas"},
        "spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{**RULE, "apiGroups": ["apps"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5", "reason": "Invalid"}],
        },
    }
    got = create(POLICY, policy, None)
    assert got["spec"]["failurePolicy"] == "Fail" and got["spec"]["matchConstraints"]["matchPolicy"] == "Equivalent"
    assert causes(POLICY, {"metadata": {"name": "p"}, "spec": {"validations": [{"expression": ""}]}}) == [
        "spec.matchConstraints: Required value",
        "spec.validations[0].expression: Required value: expression is not specified",
    ]
    assert causes(POLICY, {"metadata": {"name": "p"}, "spec": {"matchConstraints": {"resourceRules": [RULE]}}}) == [
        "spec.validations: Required value: validations or auditAnnotations must contain at least one item"
    ]
    binding = {
        "metadata": {"name": "max-replicas"},
        "spec": {"policyName": "max-replicas", "paramRef": {"name": "limits"}, "validationActions": ["Deny"]},
    }
    assert create(BINDING, binding, None)["spec"]["paramRef"]["parameterNotFoundAction"] == "Deny"
    bad = {
        "metadata": {"name": "b"},
        "spec": {"paramRef": {"name": "x", "selector": {}}, "validationActions": ["Deny", "Deny"]},
    }
    assert causes(BINDING, bad) == [
        "spec.policyName: Required value",
        "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
        'spec.validationActions[1]: Duplicate value: "Deny"',
    ]


def test_tables() -> None:
    assert headers(MUTATING) == headers(VALIDATING) == [("Name", 0), ("Webhooks", 0), ("Age", 0)]
    assert cells(VALIDATING, config(hook(), hook()))[:2] == ["inject", 2]
    assert headers(POLICY) == [("Name", 0), ("Validations", 0), ("ParamKind", 0), ("Age", 0)]
    policy = {"metadata": {"name": "p"}, "spec": {"validations": [{"expression": "true"}]}}
    assert cells(POLICY, policy)[:3] == ["p", 1, "<unset>"]
    assert headers(BINDING) == [("Name", 0), ("PolicyName", 0), ("ParamRef", 0), ("Age", 0)]
    binding = {
        "metadata": {"name": "b"},
        "spec": {"policyName": "p", "paramRef": {"name": "limits", "namespace": "ops"}},
    }
    assert cells(BINDING, binding)[:3] == ["b", "p", "ops/limits"]
