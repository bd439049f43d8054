"""matchConditions of admission webhooks (and the write-time CEL checks they share with
ValidatingAdmissionPolicy): compile errors named at kube's fields, and the call decision
(true / false / error x failurePolicy), without a server."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.admission.webhook.config import Hook, TLSContexts, compile_hook
from apiserver.admission.webhook.dispatch import conditions_allow
from apiserver.admission.webhook.review import Invocation
from apiserver.errors import StatusError
from apiserver.resources import (
    admissionregistration_mutatingwebhookconfigurations as mwc,
)
from apiserver.resources import (
    admissionregistration_validatingadmissionpolicies as vap,
)
from apiserver.resources import (
    admissionregistration_validatingwebhookconfigurations as vwc,
)
from machinery.objects import Obj
from tests.apiserver.admission.policy_support import CONFIGMAPS, request

RULES = [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]


def webhook(conditions: list[Obj], **fields: Any) -> Obj:
    return {
        "name": "h.example.com",
        "clientConfig": {"url": "https://127.0.0.1:9443/x"},
        "rules": RULES,
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "matchConditions": conditions,
        **fields,
    }


def config(kind: str, *hooks: Obj) -> Obj:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "c"},
        "webhooks": list(hooks),
    }


def causes(obj: Obj, module: Any = vwc, old: Obj | None = None) -> dict[str, str]:
    module.RESOURCE.default(obj)
    return {c.field: c.message for c in module.RESOURCE.validate(obj, old)}


OK = {"name": "ok", "expression": "object.metadata.name != 'skip-me'"}


@pytest.mark.parametrize(
    "module,kind", [(vwc, "ValidatingWebhookConfiguration"), (mwc, "MutatingWebhookConfiguration")]
)
def test_a_condition_that_does_not_compile_is_refused_at_its_field(module: Any, kind: str) -> None:
    bad = [
        OK,
        {"name": "syntax", "expression": "object.metadata.name == ["},
        {"name": "params", "expression": "params.x == 1"},  # no params for a webhook
        {"name": "variables", "expression": "variables.x"},  # nor variables
        {"name": "not-bool", "expression": "'a string'"},
    ]
    found = causes(config(kind, webhook([OK]), webhook(bad, name="g.example.com")), module)
    fields = [f"webhooks[1].matchConditions[{i}].expression" for i in (1, 2, 3, 4)]
    assert sorted(found) == fields, found
    assert all("compilation failed: " in found[f] for f in fields)
    assert "must evaluate to bool" in found[fields[3]]
    # the variables a webhook condition has all compile
    fine = [
        {"name": "uses-all", "expression": "request.operation == 'CREATE' && oldObject == null && has(object.data)"}
    ]
    assert causes(config(kind, webhook(fine)), module) == {}


def test_at_most_64_conditions_with_unique_names() -> None:
    many = [{"name": f"c{i}", "expression": "true"} for i in range(65)]
    found = causes(config("ValidatingWebhookConfiguration", webhook(many)))
    assert found == {"webhooks[0].matchConditions": "Too many: 65: must have at most 64 items"}
    twice = causes(config("ValidatingWebhookConfiguration", webhook([OK, OK])))
    assert list(twice) == ["webhooks[0].matchConditions[1].name"] and "Duplicate" in twice[next(iter(twice))]


def test_an_update_that_leaves_the_conditions_alone_does_not_check_them() -> None:
    """kube's rule, so a stored configuration stays writable if what compiles changes."""
    stored = config("ValidatingWebhookConfiguration", webhook([{"name": "x", "expression": "1 +"}]))
    causes(stored)
    relabelled = {**stored, "metadata": {"name": "c", "labels": {"a": "b"}}}
    assert causes(relabelled, old=stored) == {}
    changed = config("ValidatingWebhookConfiguration", webhook([{"name": "y", "expression": "1 +"}]))
    assert list(causes(changed, old=stored)) == ["webhooks[0].matchConditions[0].expression"]


def test_a_policy_whose_expression_does_not_compile_is_refused() -> None:
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "p"},
        "spec": {
            "matchConstraints": {"resourceRules": RULES},
            "validations": [{"expression": "object.spec.replicas <"}],
            "matchConditions": [{"name": "authz", "expression": "authorizer.path('/x').check('get').allowed()"}],
        },
    }
    found = causes(policy, vap)
    assert sorted(found) == ["spec.matchConditions[0].expression", "spec.validations[0].expression"]
    assert all("compilation failed: " in m for m in found.values())
    # an update leaving matchConditions and paramKind alone checks only the rest
    assert list(causes(policy, vap, old=policy)) == ["spec.validations[0].expression"]


def hook_with(conditions: list[Obj], failure_policy: str = "Fail") -> Hook:
    compiled = compile_hook("c", 0, webhook(conditions, failurePolicy=failure_policy), TLSContexts(), False)
    assert compiled is not None
    return compiled


def allowed(hook: Hook, name: str = "cm") -> bool:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
    req = request(obj, resource=CONFIGMAPS)
    return conditions_allow(hook, req, Invocation(CONFIGMAPS, "", obj, None))


ERRS = {"name": "errs", "expression": "object.nope == 'x'"}  # no such key: an evaluation error
FALSE = {"name": "never", "expression": "false"}


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_every_condition_true_calls_and_any_false_skips_whatever_else_errs(policy: str) -> None:
    assert allowed(hook_with([], policy))
    assert allowed(hook_with([OK, {"name": "ns", "expression": "request.namespace == 'default'"}], policy))
    assert not allowed(hook_with([OK], policy), name="skip-me")
    assert not allowed(hook_with([ERRS, FALSE], policy))  # a false wins over an error


def test_an_error_skips_the_hook_under_ignore_and_refuses_under_fail() -> None:
    assert not allowed(hook_with([OK, ERRS], "Ignore"))
    with pytest.raises(StatusError) as refused:
        allowed(hook_with([OK, ERRS], "Fail"))
    assert refused.value.code == 403 and refused.value.reason == "Forbidden"
    assert str(refused.value.message) == (
        "configmaps \"cm\" is forbidden: expression 'object.nope == 'x'' resulted in error: no such key: nope"
    )
    with pytest.raises(StatusError) as both:
        allowed(hook_with([ERRS, {"name": "again", "expression": "object.gone"}], "Fail"))
    assert "[expression 'object.nope == 'x'' resulted in error" in both.value.message


def test_conditions_are_compiled_with_the_hook() -> None:
    """Compiled when the configurations are (once per generation), not on every request."""
    hook = hook_with([OK])
    [named] = hook.match_conditions
    assert named.name == "ok" and named.expression.program is not None
