"""What each bad request gets, over HTTPS from a real apiserver process, on both storage backends.

Every answer is a metav1.Status with the code and reason kube-apiserver gives; nothing a
client sends is a 500 or a traceback (the hypothesis fuzz at the end posts arbitrary JSON).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver.protobuf import decode_body
from tests.apiserver.support import ApiserverUnderTest

CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
_names = itertools.count()


def fresh(prefix: str = "cm") -> str:
    return f"{prefix}-{next(_names)}"


def status_of(r: httpx.Response, code: int, reason: str) -> dict[str, Any]:
    assert r.status_code == code, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == code and body["reason"] == reason, body
    return body


def cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}, **extra}


@pytest.fixture(scope="module")
def api(apiserver: ApiserverUnderTest) -> Any:
    with apiserver.http() as client:
        yield client


def test_anonymous_and_wrong_token_get_401(apiserver: ApiserverUnderTest) -> None:
    with httpx.Client(base_url=apiserver.url, verify=apiserver.ssl_context()) as anon:
        status_of(anon.get(CM), 401, "Unauthorized")
        status_of(anon.get(CM, headers={"Authorization": "Bearer nope"}), 401, "Unauthorized")


@pytest.mark.parametrize(
    ("body", "content_type", "code", "reason", "says"),
    [
        (b"{not json", "application/json", 400, "BadRequest", "not valid JSON"),
        (b"a: [1, 2", "application/yaml", 400, "BadRequest", "not valid YAML"),
        (b"[1, 2]", "application/json", 400, "BadRequest", "must be a JSON object"),
        (b"", "application/json", 400, "BadRequest", "empty"),
        (b"k8s\x00\x0a\x0b", "application/vnd.kubernetes.protobuf", 400, "BadRequest", "not a valid"),
        (b"\x0a\x0b", "application/vnd.kubernetes.protobuf", 400, "BadRequest", "magic bytes"),
        (b"<xml/>", "application/xml", 415, "UnsupportedMediaType", "not supported"),
        (b"[" * 200 + b"]" * 200, "application/json", 400, "BadRequest", "nested deeper"),
    ],
)
def test_bodies_that_do_not_decode(
    api: httpx.Client, body: bytes, content_type: str, code: int, reason: str, says: str
) -> None:
    r = api.post(CM, content=body, headers={"Content-Type": content_type})
    assert says in status_of(r, code, reason)["message"]


def test_oversized_body_is_413(api: httpx.Client) -> None:
    big = orjson.dumps(cm(fresh(), data={"a": "x" * (4 * 1024 * 1024)}))
    r = api.post(CM, content=big, headers={"Content-Type": "application/json"})
    message = status_of(r, 413, "RequestEntityTooLarge")["message"]
    assert message.startswith("Request entity too large: limit is 3145728"), message


def test_object_over_the_storage_limit_is_413_not_500(api: httpx.Client) -> None:
    """2 MiB of args passes the 3 MiB body limit but not the store's 1.5 MiB request limit
    (nor etcd's): the client's object is at fault, so 413, and nothing is stored."""
    name = fresh("pod")
    container = {"name": "c", "image": "busybox", "args": ["x" * (2 << 20)]}  # no size rule on args
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container]}}
    body = status_of(api.post(PODS, json=pod), 413, "RequestEntityTooLarge")
    assert "too large to store" in body["message"]
    status_of(api.get(f"{PODS}/{name}"), 404, "NotFound")


def test_wrong_kind_for_the_url_is_400(api: httpx.Client) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": fresh()}, "spec": {}}
    assert "do not match" in status_of(api.post(CM, json=pod), 400, "BadRequest")["message"]


def test_invalid_name_is_422_with_a_cause_on_the_field(api: httpx.Client) -> None:
    body = status_of(api.post(CM, json=cm("Not_A_Name")), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    assert body["message"].startswith('ConfigMap "Not_A_Name" is invalid: metadata.name: Invalid value')


def test_missing_kind_and_api_version_are_defaulted_from_the_url(api: httpx.Client) -> None:
    name = fresh()
    r = api.post(CM, content=orjson.dumps({"metadata": {"name": name}, "data": {"x": "y"}}))  # no Content-Type
    assert r.status_code == 201, r.text
    assert r.json()["kind"] == "ConfigMap" and r.json()["apiVersion"] == "v1"


def test_unknown_fields_strict_warn_ignore(api: httpx.Client) -> None:
    strict = status_of(api.post(CM, params={"fieldValidation": "Strict"}, json=cm(fresh(), bogus=1)), 400, "BadRequest")
    assert strict["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "bogus"'
    )
    warn = api.post(CM, params={"fieldValidation": "Warn"}, json=cm(fresh(), bogus=1))
    assert warn.status_code == 201, warn.text
    assert warn.headers["Warning"] == '299 - "unknown field \\"bogus\\""'
    ignore = api.post(CM, params={"fieldValidation": "Ignore"}, json=cm(fresh(), bogus=1))
    assert ignore.status_code == 201 and "Warning" not in ignore.headers
    assert "bogus" not in warn.json() and "bogus" not in ignore.json()  # dropped whatever the directive
    # kube's ValidateCreateOptions: a 422 on CreateOptions naming the parameter
    loose = status_of(api.post(CM, params={"fieldValidation": "Loose"}, json=cm(fresh())), 422, "Invalid")
    assert loose["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": '
        'supported values: "", "Ignore", "Strict", "Warn"'
    )


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"labelSelector": "a in (b"}, "labelSelector"),
        ({"labelSelector": "a b"}, "labelSelector"),
        ({"fieldSelector": "spec.bogus=x"}, "field label not supported: spec.bogus"),
        ({"resourceVersion": "abc"}, "resourceVersion"),
        ({"resourceVersion": "-1"}, "resourceVersion"),
        ({"limit": "many"}, "limit"),
        ({"timeoutSeconds": "x", "watch": "true"}, "timeoutSeconds"),
        ({"resourceVersionMatch": "Exact"}, "resourceVersionMatch"),
        ({"continue": "!!!"}, "continue"),
        ({"includeObject": "All"}, "includeObject"),
    ],
)
def test_bad_list_parameters_are_400(api: httpx.Client, params: dict[str, str], says: str) -> None:
    assert says in status_of(api.get(PODS, params=params), 400, "BadRequest")["message"]


def test_conflicts_and_not_found(api: httpx.Client) -> None:
    name = fresh()
    created = api.post(CM, json=cm(name)).json()
    status_of(api.post(CM, json=cm(name)), 409, "AlreadyExists")
    stale = {**created, "data": {"v": "1"}}
    assert api.put(f"{CM}/{name}", json=stale).status_code == 200
    body = status_of(api.put(f"{CM}/{name}", json={**created, "data": {"v": "2"}}), 409, "Conflict")
    assert "the object has been modified" in body["message"]
    missing = status_of(api.get(f"{CM}/nope-{name}"), 404, "NotFound")
    assert missing["message"] == f'configmaps "nope-{name}" not found'
    status_of(api.get("/api/v1/namespaces/default/widgets"), 404, "NotFound")
    status_of(api.post(f"{CM}/{name}", json=cm(name)), 405, "MethodNotAllowed")


def test_patches_that_do_not_apply(api: httpx.Client) -> None:
    name = fresh()
    api.post(CM, json=cm(name))
    r = api.patch(
        f"{CM}/{name}",
        content=b'[{"op": "remove", "path": "/data/missing"}]',
        headers={"Content-Type": "application/json-patch+json"},
    )
    status_of(r, 422, "Invalid")
    r = api.patch(f"{CM}/{name}", content=b'{"data": 1}', headers={"Content-Type": "application/json-patch+json"})
    status_of(r, 400, "BadRequest")
    r = api.patch(f"{CM}/{name}", content=b"{}", headers={"Content-Type": "application/json"})
    status_of(r, 415, "UnsupportedMediaType")
    r = api.patch(f"{CM}/{name}", content=b"data: {a: c}", headers={"Content-Type": "application/apply-patch+yaml"})
    assert "fieldManager" in status_of(r, 422, "Invalid")["message"]


def test_dry_run_never_persists(api: httpx.Client) -> None:
    name = fresh()
    r = api.post(CM, params={"dryRun": "All"}, json=cm(name))
    assert r.status_code == 201 and r.json()["metadata"]["name"] == name
    status_of(api.get(f"{CM}/{name}"), 404, "NotFound")
    api.post(CM, json=cm(name))
    r = api.patch(
        f"{CM}/{name}",
        params={"dryRun": "All"},
        content=b'{"data": {"a": "changed"}}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert r.json()["data"]["a"] == "changed"
    assert api.get(f"{CM}/{name}").json()["data"]["a"] == "b"
    assert api.delete(f"{CM}/{name}", params={"dryRun": "All"}).status_code == 200
    assert api.get(f"{CM}/{name}").status_code == 200


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=30,
)
objects = st.fixed_dictionaries(
    {},
    optional={
        "apiVersion": st.sampled_from(["v1", "apps/v1", "x"]) | json_values,
        "kind": st.sampled_from(["ConfigMap", "Pod", "Deployment"]) | json_values,
        "metadata": st.fixed_dictionaries(
            {"name": st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)},
            optional={"labels": json_values, "annotations": json_values, "namespace": json_values},
        )
        | json_values,
        "spec": json_values,
        "data": json_values,
        "status": json_values,
    },
)
TARGETS = [CM, PODS, "/apis/apps/v1/namespaces/default/deployments", "/api/v1/nodes", "/api/v1/namespaces"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(target=st.sampled_from(TARGETS), body=objects)
def test_fuzzed_objects_get_a_status_never_a_500(api: httpx.Client, target: str, body: dict[str, Any]) -> None:
    r = api.post(target, content=json.dumps(body).encode())  # stdlib: integers past 64 bits too
    assert r.status_code in (201, 400, 404, 409, 422), r.text
    if r.status_code != 201:
        assert r.json()["kind"] == "Status"


def test_the_system_namespaces_exist_from_the_first_start(api: httpx.Client) -> None:
    names = {n["metadata"]["name"] for n in api.get("/api/v1/namespaces").json()["items"]}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


def test_yaml_when_asked_and_protobuf_when_asked_first(api: httpx.Client) -> None:
    name = fresh()
    api.post(CM, json=cm(name))
    as_yaml = api.get(f"{CM}/{name}", headers={"Accept": "application/yaml"})
    assert as_yaml.headers["content-type"].startswith("application/yaml")
    assert f"name: {name}" in as_yaml.text and as_yaml.text.startswith("apiVersion: v1")
    proto = api.get(f"{CM}/{name}", headers={"Accept": "application/vnd.kubernetes.protobuf,application/json"})
    assert proto.headers["content-type"] == "application/vnd.kubernetes.protobuf"
    assert decode_body(proto.content)["metadata"]["name"] == name
    second = api.get(f"{CM}/{name}", headers={"Accept": "application/json,application/vnd.kubernetes.protobuf"})
    assert second.headers["content-type"].startswith("application/json")
