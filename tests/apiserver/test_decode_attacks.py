"""Issue 22's decoding and patch attacks, each against a real apiserver process: the answer is
a Status naming the limit, the apiserver's memory stays within a stated bound, /readyz keeps
answering.

Before the budgets: the 500-byte YAML body answered 201 with a 60 MB body (10^7 nodes), the
10^8-node one grew the apiserver past the 3 GiB watch ceiling, 31 JSON patch operations did
too, and YAML nested 100,000 deep was a 500 (RecursionError).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.apiserver.hostile_support import MIB, readyz_ok, user_client, watched
from tests.apiserver.support import ApiserverUnderTest

REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
CM = "/api/v1/namespaces/default/configmaps"
GROWTH = 256 * MIB
"""How much an attack may grow the apiserver's RSS: room for one request at the 3 MiB limit
decoded (about 30x in Python objects) and its answer, far below what the attacks reached."""

_names = itertools.count()


@pytest.fixture(scope="module")
def server(raftkube_apiserver: ApiserverUnderTest) -> ApiserverUnderTest:
    return raftkube_apiserver


@pytest.fixture(scope="module")
def eve(server: ApiserverUnderTest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with user_client(server, "eve", tmp_path_factory.mktemp("eve")) as client:
        yield client


@pytest.fixture(scope="module")
def admin(server: ApiserverUnderTest) -> Iterator[httpx.Client]:
    with server.http(timeout=120) as client:
        yield client


def laughs(levels: int, width: int = 10) -> bytes:
    """A "billion laughs" SelfSubjectReview: each level a list of `width` aliases of the one
    before, so `levels` levels expand to width**levels strings."""
    lines = [
        "apiVersion: authentication.k8s.io/v1",
        "kind: SelfSubjectReview",
        "metadata:",
        "  annotations: {}",
        "laughs:",
        "  l0: &l0 [" + ", ".join(["lol"] * width) + "]",
    ]
    for level in range(1, levels):
        lines.append(f"  l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * width) + "]")
    return ("\n".join(lines) + "\n").encode()


def status_of(r: httpx.Response, code: int, reason: str) -> dict[str, Any]:
    print(f"answered {r.status_code}, {len(r.content)} bytes")
    assert r.status_code == code, r.text[:500]
    body: dict[str, Any] = r.json()
    assert body["kind"] == "Status" and body["code"] == code and body["reason"] == reason, body
    return body


def test_the_billion_laughs_of_a_user_without_bindings_is_413(server: ApiserverUnderTest, eve: httpx.Client) -> None:
    body = laughs(7)
    assert len(body) < 700
    with watched(server) as watch:
        r = eve.post(REVIEWS, content=body, headers={"Content-Type": "application/yaml"})
    message = status_of(r, 413, "RequestEntityTooLarge")["message"]
    assert "limit is 3145728" in message, message
    assert len(r.content) < 4096
    assert not watch.killed and watch.peak - watch.before < GROWTH, watch.describe()
    assert not watch.readyz_failures, watch.readyz_failures
    # the same user's plain review still works, and its answer is the size of what was sent
    ok = eve.post(REVIEWS, content=laughs(1), headers={"Content-Type": "application/yaml"})
    assert ok.status_code == 201, ok.text
    assert ok.json()["status"]["userInfo"]["username"] == "eve"


def test_a_hundred_million_laughs_from_the_admin_is_413_too(server: ApiserverUnderTest, admin: httpx.Client) -> None:
    with watched(server) as watch:
        r = admin.post(REVIEWS, content=laughs(8), headers={"Content-Type": "application/yaml"})
    assert "limit is 3145728" in status_of(r, 413, "RequestEntityTooLarge")["message"]
    assert not watch.killed and watch.peak - watch.before < GROWTH, watch.describe()
    assert not watch.readyz_failures, watch.readyz_failures


def test_thirty_doubling_copies_in_a_json_patch_are_refused(server: ApiserverUnderTest, admin: httpx.Client) -> None:
    name = f"doubling-{next(_names)}"
    made = admin.post(CM, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}})
    assert made.status_code == 201, made.text
    ops: list[dict[str, Any]] = [{"op": "add", "path": "/metadata/annotations", "value": {"big": "x" * 100_000}}]
    ops += [{"op": "copy", "from": "/metadata/annotations", "path": f"/metadata/annotations/x{i}"} for i in range(30)]
    with watched(server) as watch:
        r = admin.patch(f"{CM}/{name}", json=ops, headers={"Content-Type": "application/json-patch+json"})
    message = status_of(r, 422, "Invalid")["message"]
    assert "operation 6 (copy /metadata/annotations/x5): Unable to complete the copy, the accumulated" in message
    assert "exceeding the limit 3145728" in message, message
    assert not watch.killed and watch.peak - watch.before < GROWTH, watch.describe()
    assert not watch.readyz_failures, watch.readyz_failures
    stored = admin.get(f"{CM}/{name}").json()
    assert "annotations" not in stored["metadata"]  # all or nothing: nothing was kept


def test_yaml_nested_a_hundred_thousand_deep_is_400(server: ApiserverUnderTest, admin: httpx.Client) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    block = "".join(f"{' ' * i}a{i}:\n" for i in range(2_000)).encode()  # block style, 2,000 deep
    with watched(server) as watch:
        flow = admin.post(CM, content=deep, headers={"Content-Type": "application/yaml"})
        nested = admin.post(CM, content=block, headers={"Content-Type": "application/yaml"})
    for r in (flow, nested):
        assert "nested deeper than 100 levels" in status_of(r, 400, "BadRequest")["message"]
    assert not watch.killed and watch.peak - watch.before < GROWTH, watch.describe()
    assert not watch.readyz_failures, watch.readyz_failures
    assert readyz_ok(server)


def test_decoding_a_yaml_body_at_the_limit_leaves_readyz_green(server: ApiserverUnderTest, admin: httpx.Client) -> None:
    """Three MiB of small YAML nodes take seconds of CPU to decode: off the event loop.  (The
    body names another kind, so the request ends right after decoding: what a registry then
    does with an object of 200,000 keys is not this test's business.)"""
    lines = [f"  k{i}: v" for i in range(3 * MIB // 14)]
    body = ("apiVersion: v1\nkind: Pod\nmetadata: {name: wide}\ndata:\n" + "\n".join(lines) + "\n").encode()
    assert 2.5 * MIB < len(body) < 3 * MIB
    with watched(server, readyz_timeout=2.0) as watch:
        r = admin.post(CM, content=body, headers={"Content-Type": "application/yaml"})
    assert "do not match the resource configmaps" in status_of(r, 400, "BadRequest")["message"]
    assert not watch.readyz_failures, watch.readyz_failures
    assert watch.readyz_probes >= 2, watch.describe()  # it took a while, and /readyz answered meanwhile
    assert watch.peak - watch.before < GROWTH, watch.describe()


def test_an_object_past_the_stores_own_limit_is_413_not_500(server: ApiserverUnderTest, admin: httpx.Client) -> None:
    """Under the 3 MiB request limit but over the store's 1.5 MiB: the fuzz found this a 500."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"big-{next(_names)}"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "args": ["a" * 1000] * 1700}]},
    }
    r = admin.post("/api/v1/namespaces/default/pods", json=pod)
    message = status_of(r, 413, "RequestEntityTooLarge")["message"]
    assert message.startswith("Request entity too large: create pods default/big-") and "1572864" in message, message
    assert readyz_ok(server)


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def empty_containers_pod(count: int) -> bytes:
    """A protobuf Pod body of `count` empty containers (PodSpec field 2, two bytes each): the
    protobuf parser builds an object for each before our budget can see them."""
    spec = b"\x12\x00" * count
    pod = b"\x0a\x03\x0a\x01p" + b"\x12" + _varint(len(spec)) + spec
    return b"k8s\x00\x0a\x09\x0a\x02v1\x12\x03Pod\x12" + _varint(len(pod)) + pod + b"\x1a\x00\x22\x00"


def test_concurrent_protobuf_bodies_that_expand_are_decoded_one_at_a_time(
    server: ApiserverUnderTest, admin: httpx.Client
) -> None:
    """Each 3 MB body costs the protobuf parser ~380 MiB before its budget refuses it.  Eight
    at once grew the apiserver by 1.15-1.5 GiB: the default thread pool ran six, and each
    refusal's traceback kept its half-decoded object alive until the answer was sent.  Large
    bodies are now decoded one at a time and refused without their frames."""
    from concurrent.futures import ThreadPoolExecutor

    body = empty_containers_pod(1_500_000)
    assert 2.8 * MIB < len(body) < 3 * MIB

    def post(_: int) -> httpx.Response:
        with server.http(timeout=120) as client:
            return client.post(
                "/api/v1/namespaces/default/pods",
                content=body,
                headers={"Content-Type": "application/vnd.kubernetes.protobuf"},
            )

    with watched(server) as watch, ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(post, range(8)))
    for r in answers:
        assert r.status_code in (400, 413), r.text[:300]  # refused by the budget, never a 500
    assert not watch.killed and watch.peak - watch.before < 3 * GROWTH, watch.describe()
    assert readyz_ok(server)


def test_the_bodies_of_this_module_are_real(tmp_path: Path) -> None:
    """The attack bodies are what the issue describes (the test above would pass vacuously on a
    body that did not expand)."""
    import yaml

    small = yaml.safe_load(laughs(3))
    assert len(small["laughs"]["l2"]) == 10 and small["laughs"]["l2"][0][0] == ["lol"] * 10
