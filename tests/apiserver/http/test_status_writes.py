"""A write through a built-in kind's /status over HTTP keeps the request's metadata and ignores
its spec, as the conformance spec "should apply changes to a namespace status" expects."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.apiserver.support import ApiserverUnderTest

_ids = itertools.count()


@pytest.fixture(scope="module")
def api(apiserver: ApiserverUnderTest) -> Iterator[httpx.Client]:
    with apiserver.http() as client:
        yield client


def test_namespace_status_patch_keeps_annotation_and_condition_but_not_spec(api: httpx.Client) -> None:
    name = f"st{next(_ids)}-{time.monotonic_ns() % 10**6}"
    assert api.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    condition = {"type": "StatusUpdate", "status": "True", "reason": "E2E", "message": "Set from an e2e test"}
    body = {
        "metadata": {"annotations": {"e2e-patched-ns": name}},
        "spec": {"finalizers": ["example.com/not-through-status"]},
        "status": {"conditions": [condition]},
    }
    patched = api.patch(
        f"/api/v1/namespaces/{name}/status",
        json=body,
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    stored = api.get(f"/api/v1/namespaces/{name}").json()
    for got in (patched.json(), stored):
        assert got["metadata"]["annotations"] == {"e2e-patched-ns": name}
        assert [c["type"] for c in got["status"]["conditions"]] == ["StatusUpdate"]
        assert got["spec"] == {"finalizers": ["kubernetes"]}
    assert api.delete(f"/api/v1/namespaces/{name}").status_code == 200
