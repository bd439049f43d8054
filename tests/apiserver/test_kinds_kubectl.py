"""The kinds issue 10 and kubectl need, end to end: kubectl 1.31 creates one of each from a file,
kubectl 1.33 finds each by its short name with kube's columns and explains it from our OpenAPI
documents, and `kubectl autoscale` (autoscaling/v1 from 1.31) lands in the object v2 reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.apiserver.kubectl_support import deployment, rows, write
from tests.apiserver.support import ApiserverUnderTest

NS = "kinds"
POD = {"containers": [{"name": "tick", "image": "busybox:1.36"}], "restartPolicy": "OnFailure"}
RULE = {"operations": ["CREATE"], "apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}
HOOK = {
    "name": "deployments.check.example.com",
    "clientConfig": {"url": "https://hooks.example.com/check"},
    "rules": [RULE],
    # served for real now: a webhook nobody runs must not stop the module's other creates
    "namespaceSelector": {"matchLabels": {"raftkube.io/never": "matches"}},
    "sideEffects": "None",
    "admissionReviewVersions": ["v1"],
}


def obj(api_version: str, kind: str, name: str, namespaced: bool = True, **body: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": NS} if namespaced else {})}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, **body}


# (short name or plural for `get`, the object, the header row `kubectl get` prints, `explain` argument)
KINDS: list[tuple[str, dict[str, Any], list[str], str]] = [
    (
        "quota",
        obj("v1", "ResourceQuota", "compute", spec={"hard": {"pods": "10", "limits.cpu": "4"}}),
        ["NAME", "AGE", "REQUEST", "LIMIT"],
        "resourcequota.spec.hard",
    ),
    (
        "limits",
        obj("v1", "LimitRange", "bounds", spec={"limits": [{"type": "Container", "max": {"cpu": "2"}}]}),
        ["NAME", "CREATED AT"],
        "limitrange.spec.limits",
    ),
    (
        "pc",
        obj("scheduling.k8s.io/v1", "PriorityClass", "batch-low", False, value=10),
        ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"],
        "priorityclass.value",
    ),
    (
        "cj",
        obj(
            "batch/v1",
            "CronJob",
            "tick",
            spec={"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": POD}}}},
        ),
        ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"],
        "cronjob.spec.schedule",
    ),
    (
        "pdb",
        obj(
            "policy/v1",
            "PodDisruptionBudget",
            "web",
            spec={"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        ),
        ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"],
        "pdb.spec.minAvailable",
    ),
    (
        "ing",
        obj(
            "networking.k8s.io/v1",
            "Ingress",
            "web",
            spec={"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}},
        ),
        ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
        "ingress.spec.rules",
    ),
    (
        "ingressclasses",
        obj("networking.k8s.io/v1", "IngressClass", "nginx", False, spec={"controller": "k8s.io/ingress-nginx"}),
        ["NAME", "CONTROLLER", "PARAMETERS", "AGE"],
        "ingressclass.spec.controller",
    ),
    (
        "hpa",
        obj(
            "autoscaling/v2",
            "HorizontalPodAutoscaler",
            "api",
            spec={"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"}, "maxReplicas": 3},
        ),
        ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"],
        "hpa.spec.metrics",
    ),
    (
        "mutatingwebhookconfigurations",
        obj("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "inject", False, webhooks=[HOOK]),
        ["NAME", "WEBHOOKS", "AGE"],
        "mutatingwebhookconfiguration.webhooks",
    ),
    (
        "validatingwebhookconfigurations",
        obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "check", False, webhooks=[HOOK]),
        ["NAME", "WEBHOOKS", "AGE"],
        "validatingwebhookconfiguration.webhooks.sideEffects",
    ),
    (
        "validatingadmissionpolicies",
        obj(
            "admissionregistration.k8s.io/v1",
            "ValidatingAdmissionPolicy",
            "max-replicas",
            False,
            spec={
                "matchConstraints": {"resourceRules": [RULE]},
                "validations": [{"expression": "object.spec.replicas <= 5"}],
            },
        ),
        ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"],
        "validatingadmissionpolicy.spec.validations",
    ),
    (
        "validatingadmissionpolicybindings",
        obj(
            "admissionregistration.k8s.io/v1",
            "ValidatingAdmissionPolicyBinding",
            "max-replicas",
            False,
            spec={"policyName": "max-replicas", "validationActions": ["Deny"]},
        ),
        ["NAME", "POLICYNAME", "PARAMREF", "AGE"],
        "validatingadmissionpolicybinding.spec.validationActions",
    ),
]


@pytest.fixture(scope="module")
def created(raftkube_apiserver: ApiserverUnderTest, tmp_path_factory: pytest.TempPathFactory) -> ApiserverUnderTest:
    server = raftkube_apiserver
    tmp = tmp_path_factory.mktemp("kinds")
    server.ok("create", "namespace", NS, minor=31)
    manifest = tmp / "all.yaml"
    manifest.write_text("---\n".join(yaml.safe_dump(o) for _, o, _, _ in KINDS))
    out = server.ok("create", "-f", str(manifest), minor=31)
    assert len(out.splitlines()) == len(KINDS), out
    return server


@pytest.mark.parametrize(("short", "header"), [(k[0], k[2]) for k in KINDS], ids=[k[0] for k in KINDS])
def test_get_by_short_name_shows_kubes_columns(created: ApiserverUnderTest, short: str, header: list[str]) -> None:
    table = rows(created.ok("get", short, "-n", NS, minor=33))
    assert table[0] == header and len(table) == 2, table


@pytest.mark.parametrize("field", [k[3] for k in KINDS], ids=[k[0] for k in KINDS])
def test_explain_from_our_openapi(created: ApiserverUnderTest, field: str) -> None:
    out = created.ok("explain", field, minor=33)
    assert "FIELD:" in out and "DESCRIPTION:" in out, out


def test_api_resources_lists_the_new_kinds(created: ApiserverUnderTest) -> None:
    by_name = {r[0]: r for r in rows(created.ok("api-resources", minor=33))[1:]}
    assert by_name["resourcequotas"] == ["resourcequotas", "quota", "v1", "true", "ResourceQuota"]
    assert by_name["priorityclasses"] == ["priorityclasses", "pc", "scheduling.k8s.io/v1", "false", "PriorityClass"]
    assert by_name["cronjobs"] == ["cronjobs", "cj", "batch/v1", "true", "CronJob"]
    assert by_name["horizontalpodautoscalers"][:3] == ["horizontalpodautoscalers", "hpa", "autoscaling/v2"]
    assert by_name["validatingwebhookconfigurations"][1:] == [
        "admissionregistration.k8s.io/v1",
        "false",
        "ValidatingWebhookConfiguration",
    ]


def test_server_side_validation_reaches_kubectl(created: ApiserverUnderTest, tmp_path: Path) -> None:
    bad = obj(
        "batch/v1",
        "CronJob",
        "bad",
        spec={"schedule": "61 * * * *", "jobTemplate": {"spec": {"template": {"spec": POD}}}},
    )
    proc = created.kubectl("create", "-f", write(tmp_path, "bad.json", bad), minor=31)
    assert proc.returncode != 0
    assert 'spec.schedule: Invalid value: "61 * * * *": end of range (61) above maximum (59): 61' in proc.stderr


def test_autoscale_from_kubectl_131_is_read_through_v2(created: ApiserverUnderTest, tmp_path: Path) -> None:
    web = deployment("scaled")
    web["metadata"]["namespace"] = NS
    created.ok("create", "-f", write(tmp_path, "web.json", web), minor=31)
    out = created.ok("autoscale", "deployment", "scaled", "--max=4", "--cpu-percent=70", "-n", NS, minor=31)
    assert out == "horizontalpodautoscaler.autoscaling/scaled autoscaled\n"
    as_v2 = json.loads(
        created.ok("get", "horizontalpodautoscalers.v2.autoscaling", "scaled", "-n", NS, "-o", "json", minor=33)
    )
    assert as_v2["apiVersion"] == "autoscaling/v2" and as_v2["spec"]["maxReplicas"] == 4
    assert as_v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 70
    v1 = ("get", "horizontalpodautoscalers.v1.autoscaling", "scaled", "-n", NS, "-o", "json")
    as_v1 = json.loads(created.ok(*v1, minor=33))
    assert as_v1["apiVersion"] == "autoscaling/v1" and as_v1["spec"]["targetCPUUtilizationPercentage"] == 70, as_v1


URLS = [
    f"/api/v1/namespaces/{NS}/resourcequotas",
    f"/api/v1/namespaces/{NS}/limitranges",
    "/apis/scheduling.k8s.io/v1/priorityclasses",
    f"/apis/batch/v1/namespaces/{NS}/cronjobs",
    f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets",
    f"/apis/networking.k8s.io/v1/namespaces/{NS}/ingresses",
    "/apis/networking.k8s.io/v1/ingressclasses",
    f"/apis/autoscaling/v1/namespaces/{NS}/horizontalpodautoscalers",
    f"/apis/autoscaling/v2/namespaces/{NS}/horizontalpodautoscalers",
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
]
values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=6) | st.sampled_from(["1Gi", "*", "/"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)
FIELDS = ("spec", "status", "webhooks", "value", "preemptionPolicy", "globalDefault")
bodies = st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({"generateName": st.just("fuzz-")})},
    optional={f: values for f in FIELDS},
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(url=st.sampled_from(URLS), body=bodies)
def test_hostile_bodies_get_a_status_never_a_500(created: ApiserverUnderTest, url: str, body: dict[str, Any]) -> None:
    with created.http() as api:
        r = api.post(url, content=json.dumps(body).encode())
    assert r.status_code in (201, 400, 422), r.text
    if r.status_code != 201:
        assert r.json()["kind"] == "Status"
