"""Issue 22, unknown fields: through a real apiserver process, with raw HTTP and with kubectl 1.33.

kube decodes every body into its Go types, so a field the kind does not have is never stored or
returned: `fieldValidation=Ignore` drops it silently, `Warn` (the default when the parameter is
absent) drops it with a `Warning: 299 - "unknown field \\"<path>\\""` header, `Strict` refuses the
request with 400.  A patch's result is judged the same way; an apply naming an unknown field is
refused whatever the directive (kube's structured-merge-diff types the applied configuration).

Each test also checks that the apiserver stays healthy: `/readyz` answers 200 and its RSS stays
under a stated bound.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from apiserver.launcher import LocalApiserver
from tests.apiserver.support import ApiserverUnderTest

CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
RSS_BOUND_MIB = 400  # an idle apiserver is ~120-160 MiB; these requests are small
_names = itertools.count()


def fresh(prefix: str = "uf") -> str:
    return f"{prefix}-{next(_names)}"


def cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"foo": "kept"}, **extra}


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"bogus": "a-label"}, "annotations": {"bogus": "kept"}, "bogus": 1},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.27", "bogus": 2}]},
    }


def warnings_of(r: httpx.Response) -> list[str]:
    """The texts of the response's `Warning: 299 - "..."` headers, unquoted."""
    return [json.loads(v.split(" - ", 1)[1]) for v in r.headers.get_list("Warning")]


def status_of(r: httpx.Response, code: int, reason: str) -> dict[str, Any]:
    assert r.status_code == code, r.text
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == code and body["reason"] == reason, body
    return body


@pytest.fixture(scope="module")
def server(raftkube_apiserver: ApiserverUnderTest) -> ApiserverUnderTest:
    return raftkube_apiserver


@pytest.fixture(scope="module")
def api(server: ApiserverUnderTest) -> Any:
    with server.http() as client:
        yield client


@pytest.fixture(autouse=True)
def healthy_after(server: ApiserverUnderTest, api: httpx.Client) -> Any:
    """After each test: `/readyz` is 200 and the apiserver's RSS is under the bound."""
    yield
    assert api.get("/readyz").status_code == 200
    pid = LocalApiserver(server.data_dir).pid()
    assert pid is not None
    m = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    assert m is not None and int(m.group(1)) / 1024 < RSS_BOUND_MIB, m


# --------------------------------------------------------------------------- create


def test_the_reported_attack_a_configmap_posted_with_foo_comes_back_without_it(api: httpx.Client) -> None:
    name = fresh()
    r = api.post(CM, json=cm(name, foo="bar"))  # no fieldValidation: kube's default, Warn
    assert r.status_code == 201, r.text
    assert "foo" not in r.json()
    assert warnings_of(r) == ['unknown field "foo"']
    stored = api.get(f"{CM}/{name}").json()
    assert "foo" not in stored and stored["data"] == {"foo": "kept"}


@pytest.mark.parametrize("directive", ["Ignore", "Warn", "Strict"])
def test_create_under_each_directive(api: httpx.Client, directive: str) -> None:
    name = fresh("pod")
    r = api.post(PODS, params={"fieldValidation": directive}, json=pod(name))
    if directive == "Strict":
        assert status_of(r, 400, "BadRequest")["message"] == (
            'Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
            'unknown field "metadata.bogus", unknown field "spec.containers[0].bogus"'
        )
        assert api.get(f"{PODS}/{name}").status_code == 404
        return
    assert r.status_code == 201, r.text
    expected = ['unknown field "metadata.bogus"', 'unknown field "spec.containers[0].bogus"']
    assert warnings_of(r) == (expected if directive == "Warn" else [])
    stored = api.get(f"{PODS}/{name}").json()
    assert "bogus" not in stored["metadata"] and "bogus" not in stored["spec"]["containers"][0]
    # free-form maps keep every key
    assert stored["metadata"]["labels"] == {"bogus": "a-label"}
    assert stored["metadata"]["annotations"] == {"bogus": "kept"}


# --------------------------------------------------------------------------- update


@pytest.mark.parametrize("directive", ["Ignore", "Warn", "Strict"])
def test_update_under_each_directive(api: httpx.Client, directive: str) -> None:
    name = fresh()
    created = api.post(CM, json=cm(name)).json()
    body = cm(name, foo="bar")
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    body["data"]["new"] = "v"
    r = api.put(f"{CM}/{name}", params={"fieldValidation": directive}, json=body)
    if directive == "Strict":
        assert status_of(r, 400, "BadRequest")["message"] == (
            'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "foo"'
        )
        assert "new" not in api.get(f"{CM}/{name}").json()["data"]
        return
    assert r.status_code == 200, r.text
    assert warnings_of(r) == (['unknown field "foo"'] if directive == "Warn" else [])
    stored = api.get(f"{CM}/{name}").json()
    assert "foo" not in stored and stored["data"]["new"] == "v"


# --------------------------------------------------------------------------- patches

PATCHES: dict[str, tuple[str, Any]] = {
    "merge": ("application/merge-patch+json", {"spec": {"bogus": 1, "containers": None}, "foo": "bar"}),
    "strategic": (
        "application/strategic-merge-patch+json",
        {"foo": "bar", "spec": {"containers": [{"name": "c", "bogus": 1}]}},
    ),
    "json": (
        "application/json-patch+json",
        [{"op": "add", "path": "/foo", "value": "bar"}, {"op": "add", "path": "/spec/containers/0/bogus", "value": 1}],
    ),
}
EXPECTED = {
    # kube names a patch's unknown fields in key order (the patched object is a Go map)
    "merge": ['unknown field "foo"', 'unknown field "spec.bogus"'],
    "strategic": ['unknown field "foo"', 'unknown field "spec.containers[0].bogus"'],
    "json": ['unknown field "foo"', 'unknown field "spec.containers[0].bogus"'],
}


@pytest.mark.parametrize("directive", ["Ignore", "Warn", "Strict"])
@pytest.mark.parametrize("kind", sorted(PATCHES))
def test_patch_under_each_directive(api: httpx.Client, kind: str, directive: str) -> None:
    name = fresh("pod")
    assert api.post(PODS, json=pod(name)).status_code == 201
    content_type, patch = PATCHES[kind]
    if kind == "merge":
        patch = {"foo": "bar", "spec": {"bogus": 1}}
    r = api.patch(
        f"{PODS}/{name}",
        params={"fieldValidation": directive},
        content=json.dumps(patch),
        headers={"Content-Type": content_type},
    )
    if directive == "Strict":
        message = status_of(r, 400, "BadRequest")["message"]
        assert message == "strict decoding error: " + ", ".join(EXPECTED[kind])
        return
    assert r.status_code == 200, r.text
    assert warnings_of(r) == (EXPECTED[kind] if directive == "Warn" else [])
    stored = api.get(f"{PODS}/{name}").json()
    assert "foo" not in stored and "bogus" not in stored["spec"] and "bogus" not in stored["spec"]["containers"][0]


def test_json_patch_ops_with_fields_rfc6902_does_not_define_are_named(api: httpx.Client) -> None:
    name = fresh()
    api.post(CM, json=cm(name))
    ops = [{"op": "add", "path": "/data/x", "value": "1", "extra": True}]
    r = api.patch(f"{CM}/{name}", content=json.dumps(ops), headers={"Content-Type": "application/json-patch+json"})
    assert r.status_code == 200, r.text
    assert warnings_of(r) == ['json patch unknown field "[0].extra"']
    strict = api.patch(
        f"{CM}/{name}",
        params={"fieldValidation": "Strict"},
        content=json.dumps(ops),
        headers={"Content-Type": "application/json-patch+json"},
    )
    assert status_of(strict, 400, "BadRequest")["message"] == (
        'strict decoding error: json patch unknown field "[0].extra"'
    )


@pytest.mark.parametrize("directive", ["Ignore", "Warn", "Strict"])
def test_apply_with_an_unknown_field_is_refused_whatever_the_directive(api: httpx.Client, directive: str) -> None:
    name = fresh("pod")
    applied = pod(name)
    del applied["metadata"]["bogus"]
    r = api.patch(
        f"{PODS}/{name}",
        params={"fieldManager": "test", "fieldValidation": directive},
        content=json.dumps(applied),
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert status_of(r, 400, "BadRequest")["message"] == (
        f'failed to create typed patch object (default/{name}; /v1, Kind=Pod): .spec.containers[name="c"].bogus: '
        "field not declared in schema"
    )
    assert api.get(f"{PODS}/{name}").status_code == 404
    del applied["spec"]["containers"][0]["bogus"]
    ok = api.patch(
        f"{PODS}/{name}",
        params={"fieldManager": "test", "fieldValidation": directive},
        content=json.dumps(applied),
        headers={"Content-Type": "application/apply-patch+yaml"},
    )
    assert ok.status_code == 201, ok.text


@pytest.mark.parametrize(("method", "options"), [("PUT", "UpdateOptions"), ("PATCH", "PatchOptions")])
def test_a_bad_directive_is_kubes_422_on_the_options(api: httpx.Client, method: str, options: str) -> None:
    name = fresh()
    api.post(CM, json=cm(name))
    r = api.request(
        method,
        f"{CM}/{name}",
        params={"fieldValidation": "strict"},
        content=json.dumps({"data": {"a": "b"}} if method == "PATCH" else cm(name)),
        headers={"Content-Type": "application/merge-patch+json" if method == "PATCH" else "application/json"},
    )
    assert status_of(r, 422, "Invalid")["message"] == (
        f'{options}.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "strict": '
        'supported values: "", "Ignore", "Strict", "Warn"'
    )


def test_many_unknown_fields_are_all_dropped_and_the_warnings_bounded(api: httpx.Client) -> None:
    name = fresh()
    body = cm(name, **{f"f{i}": "x" for i in range(20_000)})
    r = api.post(CM, json=body)
    assert r.status_code == 201, r.text
    assert set(r.json()) == {"apiVersion", "kind", "metadata", "data"}
    assert 0 < len(r.headers.get_list("Warning")) <= 50


# --------------------------------------------------------------------------- kubectl


def test_kubectl_apply_refuses_an_unknown_field_under_its_default_strict(
    server: ApiserverUnderTest, api: httpx.Client, tmp_path: Path
) -> None:
    name = fresh("kc")
    manifest = tmp_path / "cm.yaml"
    manifest.write_text(json.dumps(cm(name, foo="bar")))
    proc = server.kubectl("apply", "-f", str(manifest))
    assert proc.returncode != 0
    assert (
        f'Error from server (BadRequest): error when creating "{manifest}": ConfigMap in version "v1" cannot be '
        'handled as a ConfigMap: strict decoding error: unknown field "foo"'
    ) in proc.stderr, proc.stderr
    assert api.get(f"{CM}/{name}").status_code == 404

    # --validate=warn: created, kubectl prints the server's warning, the field is gone
    warn = server.kubectl("apply", "--validate=warn", "-f", str(manifest))
    assert warn.returncode == 0, warn.stderr
    assert 'Warning: unknown field "foo"' in warn.stderr, warn.stderr
    assert "foo" not in api.get(f"{CM}/{name}").json()

    # --validate=false: the same without a word; an existing object is patched (client-side apply)
    manifest.write_text(json.dumps(cm(name, foo="baz", bar=1)))
    quiet = server.kubectl("apply", "--validate=false", "-f", str(manifest))
    assert quiet.returncode == 0, quiet.stderr
    assert "Warning" not in quiet.stderr, quiet.stderr
    stored = api.get(f"{CM}/{name}").json()
    assert "foo" not in stored and "bar" not in stored

    # and the default (Strict) on the existing object: the patch is refused
    again = server.kubectl("apply", "-f", str(manifest))
    assert again.returncode != 0
    assert 'strict decoding error: unknown field "bar", unknown field "foo"' in again.stderr, again.stderr


def test_kubectl_create_of_a_pod_names_the_nested_field(
    server: ApiserverUnderTest, api: httpx.Client, tmp_path: Path
) -> None:
    name = fresh("kc")
    manifest = tmp_path / "pod.yaml"
    body = pod(name)
    del body["metadata"]["bogus"]
    manifest.write_text(json.dumps(body))
    proc = server.kubectl("create", "-f", str(manifest))
    assert proc.returncode != 0
    assert 'strict decoding error: unknown field "spec.containers[0].bogus"' in proc.stderr, proc.stderr
    server_side = server.kubectl("apply", "--server-side", "-f", str(manifest))
    assert server_side.returncode != 0
    assert '.spec.containers[name="c"].bogus: field not declared in schema' in server_side.stderr, server_side.stderr


def test_strict_names_unknown_then_duplicate_fields_as_kube(api: httpx.Client) -> None:
    """conformance "FieldValidation should detect unknown and duplicate fields of a typed object":
    the raw body repeats spec.replicas; Strict names it after the unknown field."""
    body = b"""{"apiVersion": "apps/v1", "kind": "Deployment",
      "metadata": {"name": "dup-dep", "labels": {"app": "nginx"}},
      "spec": {"unknownField": "foo", "replicas": 2, "replicas": 3,
        "selector": {"matchLabels": {"app": "nginx"}},
        "template": {"metadata": {"labels": {"app": "nginx"}},
          "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}}}"""
    headers = {"content-type": "application/json"}
    r = api.post(DEPLOYMENTS, params={"fieldValidation": "Strict"}, content=body, headers=headers)
    assert status_of(r, 400, "BadRequest")["message"] == (
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.unknownField", duplicate field "spec.replicas"'
    )
    r = api.post(DEPLOYMENTS, params={"fieldValidation": "Ignore"}, content=body, headers=headers)
    assert r.status_code == 201 and r.json()["spec"]["replicas"] == 3  # the last one, as kube keeps
