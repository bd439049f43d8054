"""Every kind whose Go type has a struct (not pointer) `status` carries one on create, on read and
after a /status write without one, as kube's JSON does: clients generated from the Go types read
`d.status.observed_generation` right after a create (issue 24).  The shapes are kube 1.33's
(k8s.io/api v0.33 types.go: members that are not `omitempty` appear at their zero value)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver.registry.strategy import STATUS
from apiserver.resources import catalog
from machinery.objects import Obj
from tests.apiserver.kinds_support import create, find, registry, run

SELECTOR = {"matchLabels": {"app": "web"}}
TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
}
JOB_TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}


def named(spec: dict[str, Any] | None = None, **top: Any) -> Obj:
    obj: Obj = {"metadata": {"name": "web"}, **top}
    if spec is not None:
        obj["spec"] = spec
    return obj


# (group, plural, version) -> (a minimal valid object, the status kube answers it with)
CASES: dict[tuple[str, str, str], tuple[Obj, dict[str, Any]]] = {
    ("apps", "deployments", "v1"): (named({"selector": SELECTOR, "template": TEMPLATE}), {}),
    ("apps", "replicasets", "v1"): (named({"selector": SELECTOR, "template": TEMPLATE}), {"replicas": 0}),
    ("batch", "jobs", "v1"): (named({"template": JOB_TEMPLATE}), {}),
    (
        "batch",
        "cronjobs",
        "v1",
    ): (named({"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": JOB_TEMPLATE}}}), {}),
    ("", "services", "v1"): (named({"ports": [{"port": 80}]}), {"loadBalancer": {}}),
    ("", "resourcequotas", "v1"): (named({}), {}),
    (
        "autoscaling",
        "horizontalpodautoscalers",
        "v2",
    ): (
        named({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3}),
        {"desiredReplicas": 0},
    ),
    (
        "autoscaling",
        "horizontalpodautoscalers",
        "v1",
    ): (
        named({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3}),
        {"currentReplicas": 0, "desiredReplicas": 0},
    ),
    ("policy", "poddisruptionbudgets", "v1"): (
        named({"minAvailable": 1, "selector": SELECTOR}),
        {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0},
    ),
    (
        "networking.k8s.io",
        "ingresses",
        "v1",
    ): (named({"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}), {"loadBalancer": {}}),
}


@pytest.mark.parametrize("key", sorted(CASES), ids=lambda k: f"{k[1]}.{k[2]}")
def test_created_object_carries_kubes_empty_status(key: tuple[str, str, str]) -> None:
    obj, status = CASES[key]
    got = create(find(key[0], key[1], key[2]), obj)
    assert got["status"] == status


def test_every_kind_with_a_status_subresource_declares_its_status() -> None:
    """A kind that serves /status has a status struct in Go: it says what an empty one looks like."""
    missing = [r.plural for r in catalog() if r.status_subresource and r.empty_status is None]
    assert missing == []


def test_kinds_without_status_stay_without() -> None:
    got = create(find("", "configmaps"), named(data={"a": "b"}))
    assert "status" not in got


def test_status_keeps_what_is_set_and_fills_the_rest() -> None:
    rs = find("apps", "replicasets")
    reg = registry(rs)
    obj, _ = CASES[("apps", "replicasets", "v1")]

    async def go() -> Obj:
        created = await reg.create("default", copy.deepcopy(obj))
        created["status"] = {"observedGeneration": 1}
        written, _ = await reg.update("default", "web", created, subresource=STATUS)
        return written

    assert run(go())["status"] == {"observedGeneration": 1, "replicas": 0}


def test_status_write_without_status_and_stored_objects_without_one() -> None:
    """A /status PUT that drops status still answers with kube's empty one, and an object stored
    before its kind declared a status (no `status` in storage) reads with one."""
    dep = find("apps", "deployments")
    reg = registry(dep)
    obj, _ = CASES[("apps", "deployments", "v1")]

    async def go() -> tuple[Obj, Obj, Obj]:
        created = await reg.create("default", copy.deepcopy(obj))
        body = copy.deepcopy(created)
        body["status"] = {"replicas": 2}
        written, _ = await reg.update("default", "web", body, subresource=STATUS)
        cleared = copy.deepcopy(written)
        del cleared["status"]
        emptied, _ = await reg.update("default", "web", cleared, subresource=STATUS)
        # an object written without status straight into storage, as an older apiserver stored it
        raw = copy.deepcopy(obj)
        raw["metadata"] |= {"name": "old", "namespace": "default", "uid": "u"}
        raw |= {"apiVersion": "apps/v1", "kind": "Deployment"}
        await reg.storage.create(dep.key("default", "old"), reg._encode(raw))
        old = await reg.get("default", "old")
        return written, emptied, old

    written, emptied, old = run(go())
    assert written["status"] == {"replicas": 2}
    assert emptied["status"] == {}
    assert old["status"] == {}


def test_node_status_has_kubes_zero_members() -> None:
    got = create(find("", "nodes"), named(), namespace=None)
    assert got["status"]["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 0}}
    assert got["status"]["nodeInfo"]["kubeletVersion"] == ""
