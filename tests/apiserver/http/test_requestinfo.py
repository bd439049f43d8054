"""Which resource a REST path names (kube's request-info rules), including the namespace object itself."""

from __future__ import annotations

import pytest

from apiserver.http.requestinfo import ResourcePath, parse_resource_path


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/v1/pods", ResourcePath("", "v1", "pods", None, None, None)),
        ("/api/v1/namespaces/default/pods", ResourcePath("", "v1", "pods", "default", None, None)),
        ("/api/v1/namespaces/default/pods/p", ResourcePath("", "v1", "pods", "default", "p", None)),
        ("/api/v1/namespaces/default/pods/p/status", ResourcePath("", "v1", "pods", "default", "p", "status")),
        ("/api/v1/namespaces", ResourcePath("", "v1", "namespaces", None, None, None)),
        ("/api/v1/namespaces/default", ResourcePath("", "v1", "namespaces", None, "default", None)),
        ("/api/v1/namespaces/default/status", ResourcePath("", "v1", "namespaces", None, "default", "status")),
        ("/api/v1/namespaces/default/finalize", ResourcePath("", "v1", "namespaces", None, "default", "finalize")),
        ("/api/v1/nodes/n1", ResourcePath("", "v1", "nodes", None, "n1", None)),
        ("/apis/apps/v1/deployments", ResourcePath("apps", "v1", "deployments", None, None, None)),
        (
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            ResourcePath("apps", "v1", "deployments", "ns", "d", "scale"),
        ),
    ],
)
def test_resource_paths(path: str, expected: ResourcePath) -> None:
    assert parse_resource_path(path) == expected


@pytest.mark.parametrize(
    "path", ["/", "/api", "/apis", "/api/v1", "/apis/apps/v1", "/version", "/api/v1/namespaces/a/pods/p/status/extra"]
)
def test_not_resource_paths(path: str) -> None:
    assert parse_resource_path(path) is None
