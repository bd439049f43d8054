"""Real kubectl binaries against discovery, OpenAPI and /version served over HTTPS.

A tiny Starlette app serves only what this part of the apiserver produces (plus a POST
that echoes the object, so `create -f` can show it validated server-side); each kubectl
run has a fresh cache dir so discovery is really fetched.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from apiserver.discovery import api_resource_list, discovery_root
from apiserver.errors import StatusError
from apiserver.openapi import OpenAPIDocuments
from apiserver.version import version_info
from tests.apiserver.disc_catalog import CATALOG
from tests.apiserver.support import KUBECTL_MINORS, kubectl_binary

VERSIONS = [f"1.{minor}" for minor in KUBECTL_MINORS]
TOKEN = "raftkube-test-token"


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_path, cert_path = directory / "key.pem", directory / "cert.pem"
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key_path, cert_path


class _Server:
    """The app, the requests it saw, and the thread running it."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.pods: dict[str, dict[str, Any]] = {}  # what GET pods/{name} answers
        self.patches: list[tuple[str, Any]] = []  # (Content-Type, body) of each PATCH
        self.docs = OpenAPIDocuments(CATALOG)
        self.address = ""
        self.app = Starlette(
            routes=[
                Route("/version", self.version),
                Route("/api", self.root),
                Route("/apis", self.root),
                Route("/api/{version}", self.resources),
                Route("/apis/{group}/{version}", self.resources),
                Route("/openapi/v3", self.openapi_root),
                Route("/openapi/v3/{key:path}", self.openapi_document),
                Route("/api/v1/namespaces/{namespace}/pods", self.create_pod, methods=["POST"]),
                Route("/api/v1/namespaces/{namespace}/pods/{name}", self.pod, methods=["GET", "PATCH"]),
                Route("/{rest:path}", self.not_found, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
            ]
        )

    def record(self, request: Request, content_type: str = "") -> None:
        self.seen.append(
            {
                "method": request.method,
                "path": request.url.path,
                "query": dict(request.query_params),
                "authorization": request.headers.get("authorization", ""),
                "content_type": content_type,
            }
        )

    async def version(self, request: Request) -> Response:
        self.record(request)
        return JSONResponse(version_info())

    async def root(self, request: Request) -> Response:
        body, content_type = discovery_root(
            CATALOG, request.headers.get("accept", ""), core=request.url.path == "/api", server_address=self.address
        )
        self.record(request, content_type)
        return Response(json.dumps(body), media_type=content_type)

    async def resources(self, request: Request) -> Response:
        self.record(request)
        group = request.path_params.get("group", "")
        version = request.path_params["version"]
        try:
            return JSONResponse(api_resource_list(CATALOG, f"{group}/{version}" if group else version))
        except StatusError as e:
            return JSONResponse(e.to_status(), status_code=e.code)

    async def openapi_root(self, request: Request) -> Response:
        self.record(request)
        return Response(self.docs.root(), media_type="application/json")

    async def openapi_document(self, request: Request) -> Response:
        self.record(request)
        try:
            body, digest = self.docs.document(request.path_params["key"])
        except StatusError as e:
            return JSONResponse(e.to_status(), status_code=e.code)
        headers = {"ETag": f'"{digest}"', "Cache-Control": "public, immutable"}
        return Response(body, media_type="application/json", headers=headers)

    async def create_pod(self, request: Request) -> Response:
        self.record(request)
        obj = json.loads(await request.body())
        obj.setdefault("metadata", {}).update(
            namespace=request.path_params["namespace"], uid="u-1", resourceVersion="1"
        )
        return JSONResponse(obj, status_code=201)

    async def pod(self, request: Request) -> Response:
        self.record(request)
        obj = self.pods.get(request.path_params["name"])
        if obj is None:
            return await self.not_found(request)
        if request.method == "PATCH":
            self.patches.append((request.headers.get("content-type", ""), json.loads(await request.body())))
        return JSONResponse(obj)

    async def not_found(self, request: Request) -> Response:
        self.record(request)
        status = StatusError(404, "NotFound", "the server could not find the requested resource")
        return JSONResponse(status.to_status(), status_code=404)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Server]:
    directory = tmp_path_factory.mktemp("tls")
    key_path, cert_path = _self_signed(directory)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    app = _Server()
    app.address = f"127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        app.app,
        ssl_keyfile=str(key_path),
        ssl_certfile=str(cert_path),
        log_level="warning",
        lifespan="off",
        ws="none",
        http="h11",
    )
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.05)
    try:
        yield app
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def kubectl(server: _Server, tmp_path: Path) -> Any:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "t", "cluster": {"server": f"https://{server.address}", "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "u", "user": {"token": TOKEN}}],
                "contexts": [{"name": "c", "context": {"cluster": "t", "user": "u", "namespace": "default"}}],
                "current-context": "c",
            }
        )
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}

    def run(version: str, *args: str) -> subprocess.CompletedProcess[str]:
        server.seen.clear()
        cache = tmp_path / f"cache-{len(list(tmp_path.iterdir()))}"
        command = [str(kubectl_binary(int(version.split(".")[1]))), "--cache-dir", str(cache), *args]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        shutil.rmtree(cache, ignore_errors=True)
        return done

    return run


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.splitlines()]


@pytest.mark.parametrize("version", VERSIONS)
def test_api_resources(kubectl: Any, server: _Server, version: str) -> None:
    rows = _rows(kubectl(version, "api-resources").stdout)
    assert rows[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    for row in (
        ["pods", "po", "v1", "true", "Pod"],
        ["nodes", "no", "v1", "false", "Node"],
        ["events", "ev", "v1", "true", "Event"],
        ["events", "ev", "events.k8s.io/v1", "true", "Event"],
        ["deployments", "deploy", "apps/v1", "true", "Deployment"],
        ["horizontalpodautoscalers", "hpa", "autoscaling/v2", "true", "HorizontalPodAutoscaler"],
        ["jobs", "batch/v1", "true", "Job"],
        ["widgets", "wd", "example.com/v1alpha1", "false", "Widget"],
    ):
        assert row in rows, row
    assert len(rows) == 1 + len({(r.group, r.plural) for r in CATALOG})  # preferred versions only
    # aggregated discovery was taken: no per-group-version lists were needed, and the token was sent
    assert {s["path"] for s in server.seen} == {"/api", "/apis"}
    assert {s["content_type"] for s in server.seen} == {
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    }
    assert {s["authorization"] for s in server.seen} == {f"Bearer {TOKEN}"}


@pytest.mark.parametrize("version", VERSIONS)
def test_explain(kubectl: Any, version: str) -> None:
    out = kubectl(version, "explain", "pods.spec").stdout
    assert out.startswith("KIND:       Pod\nVERSION:    v1\n\nFIELD: spec <PodSpec>\n")
    assert "DESCRIPTION:\n    Specification of the desired behavior of the pod." in out
    assert "    PodSpec is a description of a pod.\n" in out
    assert "  containers\t<[]Container> -required-\n" in out
    assert "  restartPolicy\t<string>\n" in out
    out = kubectl(version, "explain", "deployment.spec.template.spec.containers.image").stdout
    assert out.startswith("GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n\nFIELD: image <string>\n")
    out = kubectl(version, "explain", "widgets").stdout
    assert "KIND:       Widget" in out and "  metadata\t<ObjectMeta>" in out


@pytest.mark.parametrize("version", VERSIONS)
def test_create_validates_server_side(kubectl: Any, server: _Server, tmp_path: Path, version: str) -> None:
    manifest = tmp_path / "pod.json"
    manifest.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web"},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            }
        )
    )
    out = kubectl(version, "create", "-f", str(manifest)).stdout
    assert out.strip() == "pod/web created"
    posts = [s for s in server.seen if s["method"] == "POST"]
    assert [p["query"].get("fieldValidation") for p in posts] == ["Strict"]
    assert not any(s["path"].startswith("/openapi/v2") for s in server.seen)


@pytest.mark.parametrize("version", VERSIONS)
def test_client_side_apply_builds_its_patch_from_our_schemas(
    kubectl: Any, server: _Server, tmp_path: Path, version: str
) -> None:
    """A changed `apply` computes a strategic merge patch from the OpenAPI v3 schema (it
    lists the strategic-merge content type), which needs the patch merge keys to resolve."""
    before: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]},
    }
    after = json.loads(json.dumps(before))
    after["spec"]["containers"][0]["image"] = "nginx:1.28"
    last_applied = {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(before)}
    server.pods["web"] = {**before, "metadata": {**before["metadata"], "annotations": last_applied, "uid": "u-1"}}
    server.patches.clear()
    manifest = tmp_path / "pod.json"
    manifest.write_text(json.dumps(after))
    done = kubectl(version, "apply", "-f", str(manifest))
    assert done.stdout.strip() == "pod/web configured"
    assert "warning" not in done.stderr
    [(content_type, patch)] = server.patches
    assert content_type == "application/strategic-merge-patch+json"
    spec = patch["spec"]
    # list items matched by their merge key "name", not replaced wholesale
    assert spec["$setElementOrder/containers"] == [{"name": "web"}, {"name": "log"}]
    assert spec["containers"] == [{"image": "nginx:1.28", "name": "web"}]
    assert not any(s["path"].startswith("/openapi/v2") for s in server.seen)


def test_server_version(kubectl: Any) -> None:
    out = kubectl(VERSIONS[-1], "version").stdout
    assert "Server Version: v1.33.0-raftkube." in out
