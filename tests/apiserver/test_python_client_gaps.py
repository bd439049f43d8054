"""API gaps found by clients nobody here wrote (issue 24), shown with the official `kubernetes`
Python client against a real apiserver process: a created Deployment has a `status` its
generated model reads; `default/kubernetes` and its endpoints exist."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from tests.apiserver.support import ApiserverUnderTest


@pytest.fixture(scope="module")
def api_client(raftkube_apiserver: ApiserverUnderTest) -> Iterator[k8s.ApiClient]:
    config = k8s.Configuration()
    config.host = raftkube_apiserver.url
    config.ssl_ca_cert = str(raftkube_apiserver.ca)
    config.api_key = {"authorization": raftkube_apiserver.token}
    config.api_key_prefix = {"authorization": "Bearer"}
    with k8s.ApiClient(config) as c:
        yield c


def test_created_deployment_has_a_status(api_client: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api_client)
    labels = {"app": "gaps"}
    body = k8s.V1Deployment(
        metadata=k8s.V1ObjectMeta(name="gaps"),
        spec=k8s.V1DeploymentSpec(
            selector=k8s.V1LabelSelector(match_labels=labels),
            template=k8s.V1PodTemplateSpec(
                metadata=k8s.V1ObjectMeta(labels=labels),
                spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c", image="busybox:1.36")]),
            ),
        ),
    )
    created = apps.create_namespaced_deployment("default", body)
    assert created.status is not None and created.status.observed_generation is None
    got = apps.read_namespaced_deployment("gaps", "default")
    assert got.status.observed_generation is None  # no controller-manager runs: nothing observed yet
    listed = apps.list_namespaced_deployment("default").items
    assert [d.status is not None for d in listed] == [True]


def test_default_kubernetes_service_points_at_the_apiserver(
    api_client: k8s.ApiClient, raftkube_apiserver: ApiserverUnderTest
) -> None:
    """kube-apiserver keeps `default/kubernetes`: in-cluster clients find the API through it."""
    core = k8s.CoreV1Api(api_client)
    port = urlsplit(raftkube_apiserver.url).port
    deadline = time.monotonic() + 20
    while True:
        try:
            svc = core.read_namespaced_service("kubernetes", "default")
            ep = core.read_namespaced_endpoints("kubernetes", "default")
            break
        except ApiException as e:
            if e.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert svc.spec.cluster_ip == "10.96.0.1"
    assert [(p.name, p.port, p.target_port) for p in svc.spec.ports] == [("https", 443, port)]
    assert svc.metadata.labels == {"component": "apiserver", "provider": "kubernetes"}
    assert [(a.ip, p.port) for s in ep.subsets for a in s.addresses for p in s.ports] == [("127.0.0.1", port)]
    slices = k8s.DiscoveryV1Api(api_client).read_namespaced_endpoint_slice("kubernetes", "default")
    assert slices.address_type == "IPv4" and slices.endpoints[0].addresses == ["127.0.0.1"]
