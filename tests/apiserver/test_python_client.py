"""The official `kubernetes` Python client against a real apiserver process, on both backends:
CRUD, selectors and paging, watches with and without a resourceVersion, every patch type,
and the error reasons it raises."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.rest import ApiException

from tests.apiserver.support import ApiserverUnderTest

_ids = itertools.count()


def uniq(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


@pytest.fixture(scope="module")
def api_client(apiserver: ApiserverUnderTest) -> Iterator[k8s.ApiClient]:
    config = k8s.Configuration()
    config.host = apiserver.url
    config.ssl_ca_cert = str(apiserver.ca)
    config.api_key = {"authorization": apiserver.token}
    config.api_key_prefix = {"authorization": "Bearer"}
    with k8s.ApiClient(config) as c:
        yield c


@pytest.fixture(scope="module")
def core(api_client: k8s.ApiClient) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def apps(api_client: k8s.ApiClient) -> k8s.AppsV1Api:
    return k8s.AppsV1Api(api_client)


@pytest.fixture(scope="module")
def ns(core: k8s.CoreV1Api) -> str:
    name = uniq("pyclient")
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    return name


def pod(name: str, labels: dict[str, str] | None = None) -> k8s.V1Pod:
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name, labels=labels or {}),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="c", image="busybox:1.36", command=["sleep", "1"])]),
    )


def test_crud(core: k8s.CoreV1Api, ns: str) -> None:
    name = uniq("p")
    created = core.create_namespaced_pod(ns, pod(name, {"app": "x"}))
    assert created.metadata.uid and created.metadata.resource_version and created.metadata.generation == 1
    assert created.spec.restart_policy == "Always" and created.status.phase == "Pending"
    got = core.read_namespaced_pod(name, ns)
    assert got.metadata.uid == created.metadata.uid
    got.metadata.labels["app"] = "y"
    replaced = core.replace_namespaced_pod(name, ns, got)
    assert replaced.metadata.labels == {"app": "y"}
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    core.delete_namespaced_pod(name, ns)  # never scheduled: gone at once
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod(name, ns)
    assert e.value.status == 404


def test_error_reasons(core: k8s.CoreV1Api, ns: str) -> None:
    name = uniq("p")
    first = core.create_namespaced_pod(ns, pod(name))
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(ns, pod(name))
    assert e.value.status == 409 and '"reason":"AlreadyExists"' in e.value.body.replace(" ", "")
    core.patch_namespaced_pod(name, ns, {"metadata": {"labels": {"v": "2"}}})
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_pod(name, ns, first)  # stale resourceVersion
    assert e.value.status == 409 and '"reason":"Conflict"' in e.value.body.replace(" ", "")
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod(ns, k8s.V1Pod(metadata=k8s.V1ObjectMeta(name="Bad_Name"), spec=pod("x").spec))
    assert e.value.status == 422 and "metadata.name" in e.value.body


def test_list_with_selectors_and_paging(core: k8s.CoreV1Api, ns: str) -> None:
    for i in range(7):
        core.create_namespaced_config_map(
            ns, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=f"page-{i}", labels={"tier": "a" if i % 2 else "b"}))
        )
    a = core.list_namespaced_config_map(ns, label_selector="tier=a")
    assert sorted(c.metadata.name for c in a.items) == ["page-1", "page-3", "page-5"]
    not_a = core.list_namespaced_config_map(ns, label_selector="tier notin (a),tier")
    assert sorted(c.metadata.name for c in not_a.items) == ["page-0", "page-2", "page-4", "page-6"]
    by_name = core.list_namespaced_config_map(ns, field_selector="metadata.name=page-4")
    assert [c.metadata.name for c in by_name.items] == ["page-4"]
    names: list[str] = []
    token = None
    pages = 0
    while True:
        page = core.list_namespaced_config_map(ns, limit=3, _continue=token, label_selector="tier")
        pages += 1
        names.extend(c.metadata.name for c in page.items)
        token = page.metadata._continue
        if not token:
            break
    assert pages == 3 and names == [f"page-{i}" for i in range(7)]


def _watch_events(core: k8s.CoreV1Api, ns: str, count: int, **kwargs: Any) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    w = k8s_watch.Watch()
    for event in w.stream(core.list_namespaced_secret, ns, timeout_seconds=10, **kwargs):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) >= count:
            w.stop()
    return seen


def test_watch_without_resource_version_starts_with_what_exists(core: k8s.CoreV1Api) -> None:
    ns = uniq("watch0")
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    core.create_namespaced_secret(ns, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s0"), string_data={"k": "v"}))
    created = threading.Event()

    def later() -> None:
        created.wait(5)
        core.create_namespaced_secret(ns, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s1")))

    t = threading.Thread(target=later)
    t.start()
    try:
        seen: list[tuple[str, str]] = []
        w = k8s_watch.Watch()
        for event in w.stream(core.list_namespaced_secret, ns, timeout_seconds=10):
            seen.append((event["type"], event["object"].metadata.name))
            created.set()
            if len(seen) >= 2:
                w.stop()
        assert seen == [("ADDED", "s0"), ("ADDED", "s1")]
    finally:
        created.set()
        t.join()


def test_watch_from_a_resource_version_sees_every_change_in_order(core: k8s.CoreV1Api) -> None:
    ns = uniq("watchrv")
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    start = core.list_namespaced_secret(ns).metadata.resource_version
    core.create_namespaced_secret(ns, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="a")))
    core.patch_namespaced_secret("a", ns, {"metadata": {"labels": {"x": "1"}}})
    core.delete_namespaced_secret("a", ns)
    seen = _watch_events(core, ns, 3, resource_version=start)
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_every_patch_type(api_client: k8s.ApiClient, apps: k8s.AppsV1Api, ns: str) -> None:
    name = uniq("d")
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.25"}, {"name": "side", "image": "busybox"}]},
            },
        },
    }
    apps.create_namespaced_deployment(ns, body)
    # strategic merge (a dict body): containers merge by name
    smp = apps.patch_namespaced_deployment(
        name, ns, {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.26"}]}}}}
    )
    images = {c.name: c.image for c in smp.spec.template.spec.containers}
    assert images == {"web": "nginx:1.26", "side": "busybox"}
    assert smp.metadata.generation == 2
    # JSON patch (a list body)
    jp = apps.patch_namespaced_deployment(name, ns, [{"op": "replace", "path": "/spec/replicas", "value": 3}])
    assert jp.spec.replicas == 3
    # JSON merge patch: lists replace
    merged = apps.patch_namespaced_deployment(
        name,
        ns,
        {"spec": {"template": {"spec": {"containers": [{"name": "only", "image": "busybox"}]}}}},
        _content_type="application/merge-patch+json",
    )
    assert [c.name for c in merged.spec.template.spec.containers] == ["only"]
    # server-side apply: creates when absent, owns its fields, conflicts unless forced
    applied_name = uniq("applied")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": applied_name}, "data": {"k": "v"}}
    core = k8s.CoreV1Api(api_client)
    made = core.patch_namespaced_config_map(
        applied_name, ns, cm, field_manager="tester", _content_type="application/apply-patch+yaml"
    )
    assert made.data == {"k": "v"}
    assert [m.manager for m in made.metadata.managed_fields] == ["tester"]
    with pytest.raises(ApiException) as e:
        core.patch_namespaced_config_map(
            applied_name,
            ns,
            {**cm, "data": {"k": "other"}},
            field_manager="rival",
            _content_type="application/apply-patch+yaml",
        )
    assert e.value.status == 409 and "conflict" in e.value.body
    forced = core.patch_namespaced_config_map(
        applied_name,
        ns,
        {**cm, "data": {"k": "other"}},
        field_manager="rival",
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    assert forced.data == {"k": "other"}


def test_scale_subresource(apps: k8s.AppsV1Api, ns: str) -> None:
    name = uniq("scaled")
    apps.create_namespaced_replica_set(
        ns,
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"rs": name}},
                "template": {
                    "metadata": {"labels": {"rs": name}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]},
                },
            },
        },
    )
    scale = apps.read_namespaced_replica_set_scale(name, ns)
    assert scale.spec.replicas == 1 and scale.status.selector == f"rs={name}"
    apps.patch_namespaced_replica_set_scale(name, ns, {"spec": {"replicas": 4}})
    assert apps.read_namespaced_replica_set(name, ns).spec.replicas == 4
