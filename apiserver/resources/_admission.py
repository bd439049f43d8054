"""What the admissionregistration.k8s.io kinds share: rules naming the requests they match,
selectors, webhook client configs and the per-webhook defaults and checks, worded as kube's
admissionregistration validation words them."""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from typing import Any

from apiserver import validation as v
from apiserver.admission.cel import WEBHOOK
from apiserver.admission.matchconditions import MAX_CONDITIONS, compile_failures
from apiserver.errors import Cause
from apiserver.resources._shared import ensure
from apiserver.resources._workload import validate_label_selector
from apiserver.resources.base import Column
from machinery.objects import Obj, dicts, get

OPERATIONS = ("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
SCOPES = ("*", "Cluster", "Namespaced")
FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
SIDE_EFFECTS = ("None", "NoneOnDryRun")
REVIEW_VERSIONS = ("v1", "v1beta1")
REINVOCATION_POLICIES = ("IfNeeded", "Never")
CATEGORIES = ("api-extensions",)


def default_rules(rules: Any) -> None:
    for rule in rules if isinstance(rules, list) else []:
        if isinstance(rule, dict):
            rule.setdefault("scope", "*")


def default_match(match: Obj) -> None:
    """The selectors and matchPolicy every webhook and matchConstraints defaults."""
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    match.setdefault("matchPolicy", "Equivalent")


def _validate_star_list(values: list[Any], field: str, what: str, causes: list[Cause]) -> None:
    if not values:
        causes.append(v.required(field))
    if "*" in values and len(values) > 1:
        causes.append(v.invalid(field, values, f"if '*' is present, must not specify other {what}"))
    for i, value in enumerate(values):
        if not isinstance(value, str):
            causes.append(v.invalid(v.index(field, i), value, "must be a string"))


def validate_rule(rule: Obj, here: str, causes: list[Cause], *, operations: bool = True) -> None:
    """RuleWithOperations: operations, apiGroups, apiVersions, resources and scope."""
    if operations:
        ops = v.as_list(rule.get("operations"), v.child(here, "operations"), causes)
        _validate_star_list(ops, v.child(here, "operations"), "operations", causes)
        for i, op in enumerate(ops):
            if isinstance(op, str) and op not in OPERATIONS:
                causes.append(v.not_supported(v.index(v.child(here, "operations"), i), op, OPERATIONS))
    groups = v.as_list(rule.get("apiGroups"), v.child(here, "apiGroups"), causes)
    _validate_star_list(groups, v.child(here, "apiGroups"), "API groups", causes)
    versions = v.as_list(rule.get("apiVersions"), v.child(here, "apiVersions"), causes)
    _validate_star_list(versions, v.child(here, "apiVersions"), "API versions", causes)
    for i, version in enumerate(versions):
        if version == "":
            causes.append(v.required(v.index(v.child(here, "apiVersions"), i)))
    resources = v.as_list(rule.get("resources"), v.child(here, "resources"), causes)
    _validate_star_list(resources, v.child(here, "resources"), "resources", causes)
    for i, resource in enumerate(resources):
        if resource == "":
            causes.append(v.required(v.index(v.child(here, "resources"), i)))
    causes += v.validate_enum(rule.get("scope"), v.child(here, "scope"), SCOPES)


def validate_selectors(match: Obj, here: str, causes: list[Cause]) -> None:
    for name in ("namespaceSelector", "objectSelector"):
        if match.get(name) is not None:
            causes += validate_label_selector(match.get(name), v.child(here, name))


def _url_problem(raw: str) -> str:
    try:
        url = urllib.parse.urlsplit(raw)
    except ValueError as err:
        return f"url must be a valid URL: {err}"
    if url.scheme != "https":
        return "'https' is the only allowed URL scheme"
    if not url.hostname:
        return "host must be specified"
    if url.username is not None or url.password is not None:
        return "user information is not permitted in the URL"
    if url.fragment or raw.endswith("#"):
        return "fragments are not permitted in the URL"
    if url.query or raw.endswith("?"):
        return "query parameters are not permitted in the URL"
    return ""


def _validate_client_config(config: Obj, here: str, causes: list[Cause]) -> None:
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        causes.append(v.required(here, "exactly one of url or service is required"))
    if url is not None:
        problem = _url_problem(url) if isinstance(url, str) else "must be a string"
        if problem:
            causes.append(v.invalid(v.child(here, "url"), url, problem))
    if service is not None:
        svc_field = v.child(here, "service")
        svc = v.as_dict(service, svc_field, causes)
        for part in ("namespace", "name"):
            if not svc.get(part):
                causes.append(v.required(v.child(svc_field, part), f"service {part} is required"))
        path = svc.get("path")
        # absent, empty and "/" all mean the root, as in kube's ValidateWebhookService
        if path is not None and (not isinstance(path, str) or (path and not path.startswith("/"))):
            causes.append(v.invalid(v.child(svc_field, "path"), path, "must start with a '/'"))
        causes += v.validate_port(svc.get("port"), v.child(svc_field, "port"), optional=True)
    bundle = config.get("caBundle")
    if bundle is not None:
        try:
            base64.b64decode(bundle if isinstance(bundle, str) else "!", validate=True)
        except (binascii.Error, ValueError):
            causes.append(v.invalid(v.child(here, "caBundle"), bundle, "must be base64-encoded bytes"))


def _validate_name(name: Any, field: str, causes: list[Cause]) -> None:
    """IsFullyQualifiedName: a DNS subdomain of at least three labels."""
    if not name:
        causes.append(v.required(field))
    elif not isinstance(name, str):
        causes.append(v.invalid(field, name, "must be a string"))
    elif problems := v.is_dns1123_subdomain(name):
        causes.append(v.invalid(field, name, ",".join(problems)))
    elif len(name.split(".")) < 3:
        causes.append(v.invalid(field, name, "should be a domain with at least three segments separated by dots"))


def _validate_review_versions(versions: list[Any], field: str, causes: list[Cause]) -> None:
    if not versions:
        causes.append(v.required(field, f"must specify one of {', '.join(REVIEW_VERSIONS)}"))
        return
    seen: set[str] = set()
    for i, version in enumerate(versions):
        here = v.index(field, i)
        if not isinstance(version, str):
            causes.append(v.invalid(here, version, "must be a string"))
            continue
        causes += [v.invalid(here, version, m) for m in v.is_dns1035_label(version)]
        if version in seen:
            causes.append(v.invalid(here, version, "duplicate version"))
        seen.add(version)
    if not seen & set(REVIEW_VERSIONS):
        causes.append(v.invalid(field, versions, f"must include at least one of {', '.join(REVIEW_VERSIONS)}"))


def default_webhooks(config: Obj, *, mutating: bool) -> None:
    for hook in dicts(config, "webhooks"):
        hook.setdefault("failurePolicy", "Fail")
        default_match(hook)
        hook.setdefault("timeoutSeconds", 10)
        if mutating:
            hook.setdefault("reinvocationPolicy", "Never")
        default_rules(hook.get("rules"))
        client = ensure(hook, "clientConfig")
        service = client.get("service") if client is not None else None
        if isinstance(service, dict):
            service.setdefault("port", 443)


def _conditions_unchanged(config: Obj, old: Obj | None) -> bool:
    """kube checks no matchConditions on an update that leaves every webhook's as they were
    (so a stored configuration stays writable when what compiles changes)."""
    if old is None:
        return False
    new_hooks, old_hooks = config.get("webhooks"), old.get("webhooks")
    if not isinstance(new_hooks, list) or not isinstance(old_hooks, list) or len(new_hooks) != len(old_hooks):
        return False
    return all(
        isinstance(n, dict) and isinstance(o, dict) and n.get("matchConditions") == o.get("matchConditions")
        for n, o in zip(new_hooks, old_hooks, strict=True)
    )


def validate_webhooks(config: Obj, old: Obj | None, *, mutating: bool) -> list[Cause]:
    causes = v.validate_object_meta(config, namespaced=False, name_fn=v.name_is_dns_subdomain, old=old)
    check_conditions = not _conditions_unchanged(config, old)
    names: set[str] = set()
    for i, hook in enumerate(v.as_list(config.get("webhooks"), "webhooks", causes)):
        here = v.index("webhooks", i)
        hook = v.as_dict(hook, here, causes)
        name = hook.get("name")
        _validate_name(name, v.child(here, "name"), causes)
        if isinstance(name, str) and name in names:
            causes.append(v.duplicate(v.child(here, "name"), name))
        names.add(name if isinstance(name, str) else "")
        for j, rule in enumerate(v.as_list(hook.get("rules"), v.child(here, "rules"), causes)):
            at = v.index(v.child(here, "rules"), j)
            validate_rule(v.as_dict(rule, at, causes), at, causes)
        causes += v.validate_enum(hook.get("failurePolicy"), v.child(here, "failurePolicy"), FAILURE_POLICIES)
        causes += v.validate_enum(hook.get("matchPolicy"), v.child(here, "matchPolicy"), MATCH_POLICIES)
        effects = hook.get("sideEffects")
        if effects in (None, ""):
            causes.append(v.required(v.child(here, "sideEffects"), f"must specify one of {', '.join(SIDE_EFFECTS)}"))
        else:
            causes += v.validate_enum(effects, v.child(here, "sideEffects"), SIDE_EFFECTS)
        timeout = hook.get("timeoutSeconds")
        if timeout is not None and (not v.is_int(timeout) or not 1 <= timeout <= 30):
            causes.append(
                v.invalid(
                    v.child(here, "timeoutSeconds"), timeout, "the timeout value must be between 1 and 30 seconds"
                )
            )
        versions_field = v.child(here, "admissionReviewVersions")
        _validate_review_versions(
            v.as_list(hook.get("admissionReviewVersions"), versions_field, causes), versions_field, causes
        )
        validate_selectors(hook, here, causes)
        _validate_client_config(
            v.as_dict(hook.get("clientConfig"), v.child(here, "clientConfig"), causes),
            v.child(here, "clientConfig"),
            causes,
        )
        if mutating:
            causes += v.validate_enum(
                hook.get("reinvocationPolicy"), v.child(here, "reinvocationPolicy"), REINVOCATION_POLICIES
            )
        if check_conditions:
            conditions_field = v.child(here, "matchConditions")
            validate_match_conditions(hook.get("matchConditions"), conditions_field, causes)
            for j, source, message in compile_failures(WEBHOOK, hook.get("matchConditions")):
                causes.append(v.invalid(v.child(v.index(conditions_field, j), "expression"), source, message))
    return causes


def validate_match_conditions(conditions: Any, field: str, causes: list[Cause]) -> None:
    """At most 64, names unique qualified names, expressions present (the caller compiles
    them: a policy's and a webhook's see different variables)."""
    seen: set[str] = set()
    listed = v.as_list(conditions, field, causes)
    if len(listed) > MAX_CONDITIONS:
        causes.append(v.too_many(field, len(listed), MAX_CONDITIONS))
    for i, cond in enumerate(listed):
        here = v.index(field, i)
        cond = v.as_dict(cond, here, causes)
        name = cond.get("name")
        if not name:
            causes.append(v.required(v.child(here, "name")))
        elif isinstance(name, str):
            causes += [v.invalid(v.child(here, "name"), name, m) for m in v.is_qualified_name(name)]
            if name in seen:
                causes.append(v.duplicate(v.child(here, "name"), name))
            seen.add(name)
        if not isinstance(cond.get("expression"), str) or not cond["expression"].strip():
            causes.append(v.required(v.child(here, "expression")))


WEBHOOKS_COLUMN = Column(
    "Webhooks", type="integer", description="Webhooks indicates the number of webhooks registered in this configuration"
)


def webhooks_row(config: Obj, now: float) -> list[Any]:
    hooks = get(config, "webhooks")
    return [len(hooks) if isinstance(hooks, list) else 0]


def default_match_resources(spec: Obj, key: str) -> None:
    """matchConstraints (policies) and matchResources (bindings): selectors, matchPolicy, rule scopes."""
    match = spec.get(key)
    if not isinstance(match, dict):
        return
    default_match(match)
    for rules in ("resourceRules", "excludeResourceRules"):
        default_rules(match.get(rules))


def validate_match_resources(match: Obj, field: str, causes: list[Cause]) -> None:
    validate_selectors(match, field, causes)
    causes += v.validate_enum(match.get("matchPolicy"), v.child(field, "matchPolicy"), MATCH_POLICIES)
    for rules in ("resourceRules", "excludeResourceRules"):
        rules_field = v.child(field, rules)
        for i, rule in enumerate(v.as_list(match.get(rules), rules_field, causes)):
            here = v.index(rules_field, i)
            rule = v.as_dict(rule, here, causes)
            validate_rule(rule, here, causes)
            for j, name in enumerate(v.as_list(rule.get("resourceNames"), v.child(here, "resourceNames"), causes)):
                if not isinstance(name, str) or not name:
                    causes.append(
                        v.invalid(v.index(v.child(here, "resourceNames"), j), name, "must be a non-empty string")
                    )
