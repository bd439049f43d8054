"""pods/ephemeralcontainers over HTTP, as conformance 'Ephemeral Containers' and `kubectl debug`
use it: GET answers the pod; a strategic merge patch, a JSON patch or a PUT adds containers and
moves the generation, and changes nothing else of the pod; what kube refuses is 422 naming the
field, and a plain pod update may not touch the list."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.apiserver.support import ApiserverUnderTest

_ids = itertools.count()
PODS = "/api/v1/namespaces/default/pods"
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}


@pytest.fixture(scope="module")
def api(raftkube_apiserver: ApiserverUnderTest) -> Iterator[httpx.Client]:
    with raftkube_apiserver.http() as client:
        yield client


def _pod(api: httpx.Client) -> dict[str, Any]:
    name = f"eph{next(_ids)}-{time.monotonic_ns() % 10**6}"
    body = {
        "metadata": {"name": name, "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}]},
    }
    created = api.post(PODS, json=body)
    assert created.status_code == 201, created.text
    pod: dict[str, Any] = created.json()
    assert pod["metadata"]["generation"] == 1
    return pod


def _debugger(name: str = "debugger", **more: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", "sleep 1000"], "stdin": True, "tty": True, **more}


def _causes(response: httpx.Response) -> list[tuple[str, str]]:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["reason"] == "Invalid" and body["details"]["kind"] == "Pod"
    return [(c["field"], c["reason"]) for c in body["details"]["causes"]]


def test_a_strategic_merge_patch_adds_one_and_moves_the_generation(api: httpx.Client) -> None:
    pod = _pod(api)
    path = f"{PODS}/{pod['metadata']['name']}/ephemeralcontainers"
    got = api.get(path)
    assert got.status_code == 200 and got.json()["kind"] == "Pod"
    # what AddEphemeralContainerSync sends (a two-way merge patch), with a label the strategy ignores
    patch = {"metadata": {"labels": {"sneaked": "in"}}, "spec": {"ephemeralContainers": [_debugger()]}}
    patched = api.patch(path, json=patch, headers=STRATEGIC)
    assert patched.status_code == 200, patched.text
    stored = api.get(f"{PODS}/{pod['metadata']['name']}").json()
    for seen in (patched.json(), stored):
        (debugger,) = seen["spec"]["ephemeralContainers"]
        assert debugger["name"] == "debugger" and debugger["terminationMessagePolicy"] == "File"  # defaulted
        assert seen["metadata"]["generation"] == 2
        assert seen["metadata"]["labels"] == {"app": "x"}
        assert seen["spec"]["containers"] == pod["spec"]["containers"]


def test_a_put_and_a_json_patch_add_more_and_keep_the_rest_of_the_request_out(api: httpx.Client) -> None:
    pod = _pod(api)
    path = f"{PODS}/{pod['metadata']['name']}/ephemeralcontainers"
    sent = {**pod, "spec": {**pod["spec"], "ephemeralContainers": [_debugger()], "activeDeadlineSeconds": 5}}
    put = api.put(path, json=sent)
    assert put.status_code == 200, put.text
    assert "activeDeadlineSeconds" not in put.json()["spec"]
    stale = api.put(path, json={**put.json(), "metadata": pod["metadata"]})  # an older resourceVersion
    assert stale.status_code == 409
    op = [{"op": "add", "path": "/spec/ephemeralContainers/-", "value": _debugger("debugger2")}]
    patched = api.patch(path, json=op, headers=JSON_PATCH)
    assert patched.status_code == 200, patched.text
    assert [c["name"] for c in patched.json()["spec"]["ephemeralContainers"]] == ["debugger", "debugger2"]
    assert patched.json()["metadata"]["generation"] == 3
    again = api.put(path, json=patched.json())  # the same list: nothing changes
    assert again.status_code == 200 and again.json()["metadata"]["generation"] == 3


def test_existing_ones_may_not_be_removed_or_changed(api: httpx.Client) -> None:
    pod = _pod(api)
    path = f"{PODS}/{pod['metadata']['name']}/ephemeralcontainers"
    added = api.patch(path, json={"spec": {"ephemeralContainers": [_debugger()]}}, headers=STRATEGIC).json()
    removed = api.put(path, json={**added, "spec": {**added["spec"], "ephemeralContainers": []}})
    assert _causes(removed) == [("spec.ephemeralContainers", "FieldValueForbidden")]
    assert "may not be removed" in removed.json()["message"]
    changed = [{"op": "replace", "path": "/spec/ephemeralContainers/0/image", "value": "agnhost"}]
    assert _causes(api.patch(path, json=changed, headers=JSON_PATCH)) == [
        ("spec.ephemeralContainers", "FieldValueForbidden")
    ]


@pytest.mark.parametrize(
    ("container", "field", "reason"),
    [
        (_debugger("main"), "spec.ephemeralContainers[0].name", "FieldValueDuplicate"),
        (_debugger("Bad_Name"), "spec.ephemeralContainers[0].name", "FieldValueInvalid"),
        (_debugger(image=""), "spec.ephemeralContainers[0].image", "FieldValueRequired"),
        (
            _debugger(targetContainerName="nope"),
            "spec.ephemeralContainers[0].targetContainerName",
            "FieldValueNotFound",
        ),
        (_debugger(ports=[{"containerPort": 80}]), "spec.ephemeralContainers[0].ports", "FieldValueForbidden"),
        (
            _debugger(readinessProbe={"exec": {"command": ["true"]}}),
            "spec.ephemeralContainers[0].readinessProbe",
            "FieldValueForbidden",
        ),
        (
            _debugger(lifecycle={"preStop": {"exec": {"command": ["true"]}}}),
            "spec.ephemeralContainers[0].lifecycle",
            "FieldValueForbidden",
        ),
        (_debugger(resources={"limits": {"cpu": "1"}}), "spec.ephemeralContainers[0].resources", "FieldValueForbidden"),
    ],
)
def test_what_kube_refuses_is_invalid_naming_the_field(
    api: httpx.Client, container: dict[str, Any], field: str, reason: str
) -> None:
    pod = _pod(api)
    path = f"{PODS}/{pod['metadata']['name']}/ephemeralcontainers"
    response = api.patch(path, json={"spec": {"ephemeralContainers": [container]}}, headers=STRATEGIC)
    assert (field, reason) in _causes(response)
    assert "ephemeralContainers" not in api.get(path).json()["spec"]


def test_a_plain_pod_write_may_not_set_them(api: httpx.Client) -> None:
    pod = _pod(api)
    name = pod["metadata"]["name"]
    update = api.put(f"{PODS}/{name}", json={**pod, "spec": {**pod["spec"], "ephemeralContainers": [_debugger()]}})
    assert _causes(update) == [("spec", "FieldValueForbidden")]
    assert "pod updates may not change fields" in update.json()["message"]
    body = {"metadata": {"name": name + "-new"}, "spec": {**pod["spec"], "ephemeralContainers": [_debugger()]}}
    assert _causes(api.post(PODS, json=body)) == [("spec.ephemeralContainers", "FieldValueForbidden")]


def test_discovery_lists_the_subresource_with_kind_pod(api: httpx.Client) -> None:
    resources = {r["name"]: r for r in api.get("/api/v1").json()["resources"]}
    listed = resources["pods/ephemeralcontainers"]
    assert listed["kind"] == "Pod" and sorted(listed["verbs"]) == ["get", "patch", "update"]
