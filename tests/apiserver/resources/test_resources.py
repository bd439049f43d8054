"""Every resource declaration: present in the catalog, consistent, defaulting and validating a
minimal good object to no causes and a bad one to causes at the right field paths."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.resources import catalog
from apiserver.resources.base import ResourceDef
from apiserver.table import table
from machinery.objects import Obj
from tests.apiserver.resources.stored_samples import BAD, SAMPLES

EXPECTED = {
    ("", "v1"): {
        "namespaces",
        "pods",
        "nodes",
        "services",
        "endpoints",
        "configmaps",
        "secrets",
        "serviceaccounts",
        "events",
        "limitranges",
        "resourcequotas",
        "componentstatuses",
        "persistentvolumes",
        "persistentvolumeclaims",
        "podtemplates",
        "replicationcontrollers",
    },
    ("apiextensions.k8s.io", "v1"): {"customresourcedefinitions"},
    ("apiregistration.k8s.io", "v1"): {"apiservices"},
    ("admissionregistration.k8s.io", "v1"): {
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
        "validatingadmissionpolicies",
        "validatingadmissionpolicybindings",
    },
    ("apps", "v1"): {"deployments", "replicasets", "statefulsets", "daemonsets", "controllerrevisions"},
    ("autoscaling", "v1"): {"horizontalpodautoscalers"},
    ("autoscaling", "v2"): {"horizontalpodautoscalers"},
    ("metrics.k8s.io", "v1beta1"): {"nodes", "pods"},
    ("batch", "v1"): {"jobs", "cronjobs"},
    ("coordination.k8s.io", "v1"): {"leases"},
    ("discovery.k8s.io", "v1"): {"endpointslices"},
    ("events.k8s.io", "v1"): {"events"},
    ("networking.k8s.io", "v1"): {"ingresses", "ingressclasses", "networkpolicies", "ipaddresses", "servicecidrs"},
    ("certificates.k8s.io", "v1"): {"certificatesigningrequests"},
    ("flowcontrol.apiserver.k8s.io", "v1"): {"flowschemas", "prioritylevelconfigurations"},
    ("node.k8s.io", "v1"): {"runtimeclasses"},
    ("storage.k8s.io", "v1"): {"storageclasses", "csinodes", "csidrivers", "csistoragecapacities", "volumeattachments"},
    ("policy", "v1"): {"poddisruptionbudgets"},
    ("rbac.authorization.k8s.io", "v1"): {"roles", "rolebindings", "clusterroles", "clusterrolebindings"},
    ("scheduling.k8s.io", "v1"): {"priorityclasses"},
    # answered, never stored
    ("authorization.k8s.io", "v1"): {
        "selfsubjectaccessreviews",
        "selfsubjectrulesreviews",
        "subjectaccessreviews",
        "localsubjectaccessreviews",
    },
    ("authentication.k8s.io", "v1"): {"selfsubjectreviews", "tokenreviews"},
}


def find(group: str, plural: str) -> ResourceDef:
    return next(r for r in catalog() if r.group == group and r.plural == plural)


def test_catalog_holds_every_resource() -> None:
    found: dict[tuple[str, str], set[str]] = {}
    for r in catalog():
        found.setdefault((r.group, r.version), set()).add(r.plural)
    assert found == EXPECTED


def test_names_unique_per_group_version() -> None:
    by_gv: dict[str, list[ResourceDef]] = {}
    for r in catalog():
        by_gv.setdefault(r.group_version, []).append(r)
    for gv, rs in by_gv.items():
        for attr in ("plural", "kind", "singular"):
            values = [getattr(r, attr) for r in rs if getattr(r, attr)]  # metrics.k8s.io has no singulars, as kube's
            assert len(values) == len(set(values)), (gv, attr)
    # one short name per resource; a resource served in two versions (autoscaling v1 and v2) has it once
    short = {(r.group, r.plural, s) for r in catalog() for s in r.short_names if r.group != "events.k8s.io"}
    assert len({(g, s) for g, _, s in short}) == len(short)


def test_fields_are_listed_in_field_selectors() -> None:
    for r in catalog():
        assert set(r.fields({})) == set(r.field_selectors), r.plural
        assert all(isinstance(x, str) for x in r.fields({}).values())


def test_discovery_details_as_kube() -> None:
    pods = find("", "pods")
    subs = {s.name: s for s in pods.subresources}
    assert (
        subs["eviction"].group == "policy" and subs["eviction"].version == "v1" and subs["eviction"].kind == "Eviction"
    )
    assert subs["eviction"].verbs == ("create",) and subs["binding"].verbs == ("create",)
    assert subs["log"].verbs == ("get",) and subs["status"].kind == "Pod"
    scale = {s.name: s for s in find("apps", "deployments").subresources}["scale"]
    assert (scale.group, scale.version, scale.kind) == ("autoscaling", "v1", "Scale")
    assert "all" in pods.categories and "po" in pods.short_names
    assert {r.plural for r in catalog() if "all" in r.categories} == {
        "pods",
        "services",
        "deployments",
        "replicasets",
        "jobs",
        "cronjobs",
        "horizontalpodautoscalers",
        "replicationcontrollers",
        "statefulsets",
        "daemonsets",
    }
    assert find("events.k8s.io", "events").store_name == "events" == find("", "events").store_name


def meta(name: str, namespace: str | None = "default") -> Obj:
    m: Obj = {"name": name}
    if namespace:
        m["namespace"] = namespace
    return m


CONTAINER = {"name": "web", "image": "nginx:1.27"}
TEMPLATE = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [CONTAINER]}}
SELECTOR = {"matchLabels": {"app": "web"}}
RULE = {"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}
WEBHOOK = {
    "name": "check.example.com",
    "clientConfig": {"service": {"namespace": "default", "name": "hooks"}},
    "rules": [RULE],
    "sideEffects": "None",
    "admissionReviewVersions": ["v1"],
}

# (group, plural) -> (good object, bad object, the fields the bad object's causes must name)
CASES: dict[tuple[str, str], tuple[Obj, Obj, set[str]]] = {
    ("", "namespaces"): (
        {"metadata": meta("team-a", None)},
        {"metadata": {"name": "Team.A"}, "status": {"phase": "Gone"}},
        {"metadata.name", "status.phase"},
    ),
    ("", "pods"): (
        {"metadata": meta("p"), "spec": {"containers": [CONTAINER]}},
        {
            "metadata": meta("p"),
            "spec": {
                "restartPolicy": "Sometimes",
                "containers": [
                    {"name": "a", "image": "x", "ports": [{"containerPort": 70000}]},
                    {"name": "a"},
                    {"image": "y"},
                ],
            },
        },
        {
            "spec.restartPolicy",
            "spec.containers[0].ports[0].containerPort",
            "spec.containers[1].image",
            "spec.containers[1].name",
            "spec.containers[2].name",
        },
    ),
    ("", "nodes"): (
        {"metadata": meta("n1", None), "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
        {"metadata": meta("n1"), "spec": {"taints": [{"key": "k", "effect": "Sometimes"}], "unschedulable": "yes"}},
        {"metadata.namespace", "spec.taints[0].effect", "spec.unschedulable"},
    ),
    ("", "services"): (
        {"metadata": meta("web"), "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}},
        {"metadata": meta("1web"), "spec": {"type": "Magic", "ports": [{"port": 80}, {"port": 0, "name": "b"}]}},
        {"metadata.name", "spec.type", "spec.ports[0].name", "spec.ports[1].port"},
    ),
    ("", "endpoints"): (
        {"metadata": meta("web"), "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]},
        {"metadata": meta("web"), "subsets": [{"addresses": [{"ip": "nope"}], "ports": [{"port": 99999}]}]},
        {"subsets[0].addresses[0].ip", "subsets[0].ports[0].port"},
    ),
    ("", "configmaps"): (
        {"metadata": meta("cfg"), "data": {"app.conf": "x=1"}, "binaryData": {"b": "AAEC"}},
        {"metadata": meta("cfg"), "data": {"bad/key": "x", "big": "x" * (1024 * 1024 + 1)}},
        {"data[bad/key]", ""},
    ),
    ("", "secrets"): (
        {"metadata": meta("s"), "data": {"password": "aHVudGVyMg=="}, "stringData": {"user": "admin"}},
        {"metadata": meta("s"), "type": "kubernetes.io/tls", "data": {"tls.crt": "!!notbase64"}},
        {"data[tls.crt]", "data[tls.key]"},
    ),
    ("", "serviceaccounts"): (
        {"metadata": meta("builder")},
        {"metadata": meta("Builder"), "secrets": [{}]},
        {"metadata.name", "secrets[0].name"},
    ),
    ("", "events"): (
        {
            "metadata": meta("p.1"),
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Scheduled",
            "message": "ok",
            "type": "Normal",
        },
        {"metadata": meta("p.1"), "involvedObject": {"kind": "Pod", "name": "p", "namespace": "other"}},
        {"involvedObject.namespace"},
    ),
    ("apps", "deployments"): (
        {"metadata": meta("web"), "spec": {"selector": SELECTOR, "template": TEMPLATE}},
        {
            "metadata": meta("web"),
            "spec": {
                "replicas": -1,
                "selector": {"matchLabels": {"app": "other"}},
                "template": TEMPLATE,
                "strategy": {"type": "Recreate", "rollingUpdate": {}},
            },
        },
        {"spec.replicas", "spec.template.metadata.labels", "spec.strategy.rollingUpdate"},
    ),
    ("apps", "replicasets"): (
        {"metadata": meta("web-1"), "spec": {"selector": SELECTOR, "template": TEMPLATE}},
        {"metadata": meta("web-1"), "spec": {"template": TEMPLATE}},
        {"spec.selector"},
    ),
    ("batch", "jobs"): (
        {"metadata": meta("pi"), "spec": {"template": {"spec": {"containers": [CONTAINER], "restartPolicy": "Never"}}}},
        {"metadata": meta("pi"), "spec": {"backoffLimit": -2, "template": {"spec": {"containers": [CONTAINER]}}}},
        {"spec.backoffLimit", "spec.template.spec.restartPolicy"},
    ),
    ("", "resourcequotas"): (
        {"metadata": meta("q"), "spec": {"hard": {"pods": "10", "requests.cpu": "2", "count/deployments.apps": 3}}},
        {"metadata": meta("q"), "spec": {"hard": {"pods": "1.5", "cpu": "-1", "bogus": "1"}, "scopes": ["Sometimes"]}},
        {"spec.hard[pods]", "spec.hard[cpu]", "spec.hard[bogus]", "spec.scopes"},
    ),
    ("", "limitranges"): (
        {
            "metadata": meta("l"),
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "100m"}}]},
        },
        {
            "metadata": meta("l"),
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "2", "memory": "x"}}]},
        },
        {
            "spec.limits[0].min[cpu]",
            "spec.limits[0].min[memory]",
            "spec.limits[0].default[cpu]",
            "spec.limits[0].defaultRequest[cpu]",
            "spec.limits[0].defaultRequest[memory]",
        },
    ),
    ("scheduling.k8s.io", "priorityclasses"): (
        {"metadata": meta("high", None), "value": 1000, "description": "important"},
        {"metadata": meta("system-mine", None), "value": "x", "preemptionPolicy": "Always"},
        {"metadata.name", "value", "preemptionPolicy"},
    ),
    ("batch", "cronjobs"): (
        {
            "metadata": meta("tick"),
            "spec": {
                "schedule": "*/5 * * * *",
                "jobTemplate": {
                    "spec": {"template": {"spec": {"containers": [CONTAINER], "restartPolicy": "OnFailure"}}}
                },
            },
        },
        {
            "metadata": meta("tick"),
            "spec": {
                "schedule": "61 * * * *",
                "concurrencyPolicy": "Sometimes",
                "timeZone": "Mars/Olympus",
                "jobTemplate": {"spec": {"backoffLimit": -1, "template": {"spec": {"containers": [CONTAINER]}}}},
            },
        },
        {
            "spec.schedule",
            "spec.concurrencyPolicy",
            "spec.timeZone",
            "spec.jobTemplate.spec.backoffLimit",
            "spec.jobTemplate.spec.template.spec.restartPolicy",
        },
    ),
    ("policy", "poddisruptionbudgets"): (
        {"metadata": meta("web"), "spec": {"minAvailable": "50%", "selector": SELECTOR}},
        {
            "metadata": meta("web"),
            "spec": {
                "minAvailable": 1,
                "maxUnavailable": "x%",
                "selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]},
            },
        },
        {"spec", "spec.maxUnavailable", "spec.selector.matchExpressions[0].operator"},
    ),
    ("networking.k8s.io", "ingresses"): (
        {
            "metadata": meta("web"),
            "spec": {
                "rules": [
                    {
                        "host": "web.example.com",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {"service": {"name": "web", "port": {"number": 80}}},
                                }
                            ]
                        },
                    }
                ]
            },
        },
        {
            "metadata": meta("web"),
            "spec": {
                "rules": [
                    {
                        "host": "10.0.0.1",
                        "http": {"paths": [{"path": "x", "pathType": "Exact", "backend": {}}, {"path": "/"}]},
                    }
                ]
            },
        },
        {
            "spec.rules[0].host",
            "spec.rules[0].http.paths[0].path",
            "spec.rules[0].http.paths[0].backend",
            "spec.rules[0].http.paths[1].pathType",
        },
    ),
    ("networking.k8s.io", "ingressclasses"): (
        {"metadata": meta("nginx", None), "spec": {"controller": "k8s.io/ingress-nginx"}},
        {
            "metadata": meta("nginx", None),
            "spec": {"controller": "nginx", "parameters": {"kind": "X", "scope": "Namespace"}},
        },
        {"spec.controller", "spec.parameters.name", "spec.parameters.namespace"},
    ),
    ("autoscaling", "horizontalpodautoscalers"): (
        {
            "metadata": meta("web"),
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "maxReplicas": 5,
            },
        },
        {
            "metadata": meta("web"),
            "spec": {"scaleTargetRef": {"kind": "Deployment"}, "minReplicas": 3, "maxReplicas": 2},
        },
        {"spec.scaleTargetRef.name", "spec.maxReplicas"},
    ),
    ("apiextensions.k8s.io", "customresourcedefinitions"): (
        {
            "metadata": meta("gizmos.example.com", None),
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "gizmos", "kind": "Gizmo"},
                "versions": [
                    {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
                ],
            },
        },
        {
            "metadata": meta("gizmo.example.com", None),
            "spec": {
                "group": "example",
                "scope": "Everywhere",
                "names": {"plural": "gizmos", "kind": "Gizmo", "listKind": "Gizmo"},
                "versions": [{"name": "V1", "served": True, "storage": False}],
                "conversion": {"strategy": "Webhook"},
            },
        },
        {
            "metadata.name",
            "spec.group",
            "spec.scope",
            "spec.names.listKind",
            "spec.versions",
            "spec.versions[0].name",
            "spec.versions[0].schema.openAPIV3Schema",
            "spec.conversion.webhook.clientConfig",
        },
    ),
    ("apiregistration.k8s.io", "apiservices"): (
        {
            "metadata": meta("v1alpha1.wardle.example.com", None),
            "spec": {
                "group": "wardle.example.com",
                "version": "v1alpha1",
                "groupPriorityMinimum": 2000,
                "versionPriority": 200,
                "service": {"namespace": "sample", "name": "api"},
            },
        },
        {
            "metadata": meta("v1.wardle.example.com", None),
            "spec": {
                "group": "wardle.example.com",
                "version": "v1alpha1",
                "groupPriorityMinimum": 0,
                "versionPriority": 2000,
                "service": {"name": "api", "port": 0},
                "caBundle": "Zm9v",
                "insecureSkipTLSVerify": True,
            },
        },
        {
            "metadata.name",
            "spec.groupPriorityMinimum",
            "spec.versionPriority",
            "spec.service.namespace",
            "spec.service.port",
            "spec.insecureSkipTLSVerify",
        },
    ),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): (
        {"metadata": meta("inject", None), "webhooks": [WEBHOOK]},
        {
            "metadata": meta("inject", None),
            "webhooks": [{**WEBHOOK, "name": "short", "timeoutSeconds": 31, "reinvocationPolicy": "Always"}],
        },
        {"webhooks[0].name", "webhooks[0].timeoutSeconds", "webhooks[0].reinvocationPolicy"},
    ),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): (
        {"metadata": meta("check", None), "webhooks": [WEBHOOK]},
        {
            "metadata": meta("check", None),
            "webhooks": [
                {**WEBHOOK, "sideEffects": None, "admissionReviewVersions": [], "clientConfig": {"url": "http://x"}},
                WEBHOOK,
            ],
        },
        {
            "webhooks[0].sideEffects",
            "webhooks[0].admissionReviewVersions",
            "webhooks[0].clientConfig.url",
            "webhooks[1].name",
        },
    ),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): (
        {
            "metadata": meta("replicas", None),
            "spec": {
                "matchConstraints": {"resourceRules": [{**RULE}]},
                "validations": [{"expression": "object.spec.replicas <= 5"}],
            },
        },
        {
            "metadata": meta("replicas", None),
            "spec": {"failurePolicy": "Maybe", "validations": [{"expression": " ", "reason": "Teapot"}]},
        },
        {"spec.failurePolicy", "spec.matchConstraints", "spec.validations[0].expression", "spec.validations[0].reason"},
    ),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): (
        {"metadata": meta("replicas", None), "spec": {"policyName": "replicas", "validationActions": ["Deny"]}},
        {"metadata": meta("replicas", None), "spec": {"paramRef": {}, "validationActions": ["Deny", "Warn", "Shout"]}},
        {"spec.policyName", "spec.paramRef", "spec.validationActions", "spec.validationActions[2]"},
    ),
    ("coordination.k8s.io", "leases"): (
        {"metadata": meta("n1", "kube-node-lease"), "spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}},
        {"metadata": meta("n1"), "spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}},
        {"spec.leaseDurationSeconds", "spec.leaseTransitions"},
    ),
    ("discovery.k8s.io", "endpointslices"): (
        {
            "metadata": meta("web-abc"),
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"]}],
            "ports": [{"port": 80, "name": "http"}],
        },
        {"metadata": meta("web-abc"), "addressType": "IPv5", "endpoints": [{"addresses": []}]},
        {"addressType", "endpoints[0].addresses"},
    ),
    ("events.k8s.io", "events"): (
        {
            "metadata": meta("p.2"),
            "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
            "eventTime": "2024-05-01T10:00:00.000000Z",
            "reportingController": "raftkube/scheduler",
            "reportingInstance": "s-1",
            "action": "Binding",
            "reason": "Scheduled",
            "type": "Normal",
        },
        {"metadata": meta("p.2"), "type": "Odd"},
        {"eventTime", "reportingController", "reportingInstance", "action", "reason", "type"},
    ),
    ("rbac.authorization.k8s.io", "roles"): (
        {"metadata": meta("reader"), "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
        {
            "metadata": meta("reader"),
            "rules": [{"apiGroups": [""], "resources": ["pods"]}, {"nonResourceURLs": ["/x"], "verbs": ["get"]}],
        },
        {"rules[0].verbs", "rules[1].nonResourceURLs"},
    ),
    ("rbac.authorization.k8s.io", "clusterroles"): (
        {"metadata": meta("admin", None), "rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]},
        {"metadata": meta("a/b", None), "rules": [{"verbs": ["get"]}]},
        {"metadata.name", "rules[0].apiGroups", "rules[0].resources"},
    ),
    ("rbac.authorization.k8s.io", "rolebindings"): (
        {
            "metadata": meta("read"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "User", "name": "jane", "apiGroup": "rbac.authorization.k8s.io"}],
        },
        {"metadata": meta("read"), "roleRef": {"kind": "Pod", "apiGroup": "x"}, "subjects": [{"kind": "Robot"}]},
        {"roleRef.kind", "roleRef.apiGroup", "roleRef.name", "subjects[0].name", "subjects[0].kind"},
    ),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): (
        {
            "metadata": meta("admins", None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": "default"}],
        },
        {
            "metadata": meta("admins", None),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "ci"}],
        },
        {"roleRef.kind", "subjects[0].namespace"},
    ),
}


def _stored_cases() -> dict[tuple[str, str], tuple[Obj, Obj, set[str]]]:
    cases = {}
    for (group, plural), (bad, fields) in BAD.items():
        res = find(group, plural)
        m = meta("10.0.0.5" if plural == "ipaddresses" else "x1", "default" if res.namespaced else None)
        good = SAMPLES.get((group, plural), {})
        cases[(group, plural)] = ({"metadata": m, **copy.deepcopy(good)}, {"metadata": dict(m), **bad}, fields)
    return cases


CASES.update(_stored_cases())


def test_every_resource_has_a_case() -> None:
    stored = {(r.group, r.plural) for r in catalog() if not r.virtual and not r.computed}
    assert stored == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: f"{c[0] or 'core'}/{c[1]}")
def test_good_and_bad(case: tuple[str, str]) -> None:
    resource = find(*case)
    good, bad, fields = copy.deepcopy(CASES[case])
    resource.default(good)
    assert resource.validate(good, None) == [], resource.plural
    assert resource.validate(good, copy.deepcopy(good)) == [], "an unchanged update is valid"
    resource.default(bad)
    causes = resource.validate(bad, None)
    assert {c.field for c in causes} == fields, [f"{c.field}: {c.message}" for c in causes]


def defaulted(group: str, plural: str, obj: Obj) -> Obj:
    find(group, plural).default(obj)
    return obj


def test_pod_defaults() -> None:
    pod = defaulted(
        "",
        "pods",
        {
            "metadata": meta("p"),
            "spec": {
                "containers": [
                    {"name": "a", "image": "nginx"},
                    {"name": "b", "image": "nginx:1.27", "ports": [{"containerPort": 80}]},
                    {"name": "c", "image": "reg:5000/app@sha256:abc"},
                ]
            },
        },
    )
    spec = pod["spec"]
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["terminationGracePeriodSeconds"]) == (
        "Always",
        "ClusterFirst",
        30,
    )
    assert spec["schedulerName"] == "default-scheduler"
    assert [c["imagePullPolicy"] for c in spec["containers"]] == ["Always", "IfNotPresent", "IfNotPresent"]
    assert spec["containers"][0]["terminationMessagePath"] == "/dev/termination-log"
    assert spec["containers"][0]["terminationMessagePolicy"] == "File"
    assert spec["containers"][1]["ports"][0]["protocol"] == "TCP"
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_workload_defaults() -> None:
    d = defaulted(
        "apps",
        "deployments",
        {"metadata": meta("d"), "spec": {"selector": SELECTOR, "template": copy.deepcopy(TEMPLATE)}},
    )
    assert d["spec"]["replicas"] == 1 and d["spec"]["revisionHistoryLimit"] == 10
    assert d["spec"]["progressDeadlineSeconds"] == 600
    assert d["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert d["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    job = defaulted(
        "batch",
        "jobs",
        {"metadata": {**meta("pi"), "uid": "u-1"}, "spec": {"template": {"spec": {"containers": [CONTAINER]}}}},
    )
    spec = job["spec"]
    assert (spec["parallelism"], spec["completions"], spec["backoffLimit"], spec["completionMode"]) == (
        1,
        1,
        6,
        "NonIndexed",
    )
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    assert spec["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "pi"
    svc = defaulted("", "services", {"metadata": meta("s"), "spec": {"ports": [{"port": 80}]}})
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["sessionAffinity"] == "None"
    assert svc["spec"]["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 80}]
    ns = defaulted("", "namespaces", {"metadata": meta("n", None)})
    assert ns["status"] == {"phase": "Active"} and ns["spec"] == {"finalizers": ["kubernetes"]}
    secret = defaulted("", "secrets", {"metadata": meta("s"), "stringData": {"a": "b"}})
    assert secret == {"metadata": meta("s"), "type": "Opaque", "data": {"a": "Yg=="}}


def test_update_rules() -> None:
    dep = find("apps", "deployments")
    old = defaulted(
        "apps",
        "deployments",
        {"metadata": meta("web"), "spec": {"selector": SELECTOR, "template": copy.deepcopy(TEMPLATE)}},
    )
    new = copy.deepcopy(old)
    new["spec"]["selector"] = {"matchLabels": {"app": "web", "tier": "x"}}
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    assert [c.message for c in dep.validate(new, old)] == [
        'Invalid value: {"matchLabels":{"app":"web","tier":"x"}}: field is immutable'
    ]
    pods = find("", "pods")
    pod = defaulted("", "pods", {"metadata": meta("p"), "spec": {"containers": [dict(CONTAINER)]}})
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = "n1"
    bound["spec"]["containers"][0]["image"] = "nginx:1.28"
    assert pods.validate(bound, pod) == [], "binding and image changes are allowed"
    moved = copy.deepcopy(bound)
    moved["spec"]["nodeName"] = "n2"
    assert [c.field for c in pods.validate(moved, bound)] == ["spec"]
    rb = find("rbac.authorization.k8s.io", "rolebindings")
    good = copy.deepcopy(CASES[("rbac.authorization.k8s.io", "rolebindings")][0])
    changed = copy.deepcopy(good)
    changed["roleRef"]["name"] = "writer"
    assert [c.message.endswith("cannot change roleRef") for c in rb.validate(changed, good)] == [True]


def test_selector_mismatch_worded_as_kube() -> None:
    causes = find("apps", "deployments").validate(
        {"metadata": meta("web"), "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": TEMPLATE}}, None
    )
    assert [f"{c.field}: {c.message}" for c in causes] == [
        'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: '
        "`selector` does not match template `labels`"
    ]


def test_fields() -> None:
    pod = {
        "spec": {"nodeName": "n1", "hostNetwork": True},
        "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.9"}]},
    }
    f = find("", "pods").fields(pod)
    assert f["spec.nodeName"] == "n1" and f["spec.hostNetwork"] == "true" and f["status.podIP"] == "10.0.0.9"
    assert find("", "nodes").fields({"spec": {"unschedulable": True}}) == {"spec.unschedulable": "true"}
    assert find("batch", "jobs").fields({"status": {"succeeded": 2}}) == {"status.successful": "2"}
    assert find("apps", "replicasets").fields({}) == {"status.replicas": "0"}
    event = {"involvedObject": {"kind": "Pod", "name": "p"}, "source": {"component": "kubelet"}, "type": "Warning"}
    ef = find("", "events").fields(event)
    assert ef["involvedObject.name"] == "p" and ef["source"] == "kubelet" and ef["type"] == "Warning"
    new_style = {"regarding": {"kind": "Pod", "name": "p"}, "reportingController": "kubelet"}
    # events.k8s.io selects by its own names (kube's field label conversion); the core API sees an
    # event written there with its reporter as `source` (conformance "Events API ... listed")
    nf = find("events.k8s.io", "events").fields(new_style)
    assert nf["reportingController"] == "kubelet" and nf["regarding.name"] == "p" and "source" not in nf
    assert find("", "events").fields({"reportingComponent": "kubelet"})["source"] == "kubelet"


def test_event_conversion_round_trips() -> None:
    r = find("events.k8s.io", "events")
    good = copy.deepcopy(CASES[("events.k8s.io", "events")][0])
    assert r.to_storage is not None and r.from_storage is not None
    stored = r.to_storage(good)
    assert stored["apiVersion"] == "v1" and stored["involvedObject"]["name"] == "p"
    assert stored["reportingComponent"] == "raftkube/scheduler"
    back = r.from_storage(stored)
    assert back == {**good, "apiVersion": "events.k8s.io/v1"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**31), 2**31) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
META_KEYS = (
    "name",
    "namespace",
    "labels",
    "annotations",
    "creationTimestamp",
    "deletionTimestamp",
    "finalizers",
    "ownerReferences",
)
SPEC_KEYS = ("containers", "selector", "template", "ports", "type", "replicas", "taints", "nodeName", "strategy")
STATUS_KEYS = ("phase", "conditions", "containerStatuses", "initContainerStatuses", "podIPs", "addresses", "nodeInfo")
TOP_KEYS = ("data", "rules", "subjects", "roleRef", "subsets", "endpoints", "involvedObject", "regarding", "type")


def some_of(keys: tuple[str, ...]) -> st.SearchStrategy[Any]:
    return st.dictionaries(st.sampled_from(keys), json_values, max_size=4) | json_values


# objects whose well-known fields hold arbitrary JSON: defaulting, validation and the table must
# answer with causes or cells, never raise
hostile = st.fixed_dictionaries(
    {},
    optional={"metadata": some_of(META_KEYS), "spec": some_of(SPEC_KEYS), "status": some_of(STATUS_KEYS)}
    | {k: json_values for k in (*TOP_KEYS, "stringData", "binaryData", "series")},
)


@settings(max_examples=60, deadline=None)
@given(obj=hostile, which=st.integers(0, len(EXPECTED) * 10))
def test_hostile_objects_never_raise(obj: Obj, which: int) -> None:
    resources = catalog()
    resource = resources[which % len(resources)]
    old = copy.deepcopy(obj)
    resource.default(obj)
    causes = resource.validate(obj, None) + resource.validate(obj, old)
    assert all(isinstance(c.field, str) and c.message for c in causes)
    resource.fields(obj)
    rows = table(resource, [obj], now=1e9)["rows"]
    assert len(rows[0]["cells"]) == len(table(resource, [], now=0)["columnDefinitions"])


def test_namespace_defaults_its_name_label_and_the_kubernetes_finalizer() -> None:
    ns: Obj = {"metadata": {"name": "team-a", "labels": {"kubernetes.io/metadata.name": "forged", "x": "y"}}}
    find("", "namespaces").default(ns)
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a", "x": "y"}
    assert ns["spec"]["finalizers"] == ["kubernetes"] and ns["status"]["phase"] == "Active"
