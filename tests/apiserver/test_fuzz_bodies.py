"""Hypothesis fuzz of request bodies (JSON, YAML, protobuf) and of patch documents (all four
patch types) against one real apiserver process: every answer is a success or a metav1.Status
with a 4xx code (never a 500, never a dropped connection: one client, one connection), the
apiserver's RSS stays within FUZZ_GROWTH of where it started, and /readyz answers after."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver.protobuf import encode_object
from tests.apiserver.hostile_support import MIB, apiserver_pid, readyz_ok, rss_bytes
from tests.apiserver.support import ApiserverUnderTest

CM = "/api/v1/namespaces/default/configmaps"
REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
FUZZ_GROWTH = 300 * MIB
"""The most a fuzz run may grow the apiserver: its caches and a few bodies at the 3 MiB limit."""

FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=False,
)
# names of a fixed width below: a body's length must not depend on how many came before
# (hypothesis replays a case and finds its draws changed otherwise)
_names = itertools.count()

scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats() | st.text(max_size=30)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=10), inner, max_size=6),
    max_leaves=30,
)
keys = st.sampled_from(["metadata", "data", "binaryData", "name", "labels", "annotations", "immutable", "a", "-", "0"])


@st.composite
def configmap_like(draw: st.DrawFn) -> dict[str, Any]:
    """A ConfigMap with hostile parts: any value anywhere, names and kinds sometimes wrong."""
    obj: dict[str, Any] = {"apiVersion": draw(st.sampled_from(["v1", "v2", "", "apps/v1"]))}
    obj["kind"] = draw(st.sampled_from(["ConfigMap", "Pod", "", "Status"]))
    obj["metadata"] = draw(
        st.one_of(
            st.fixed_dictionaries({"name": st.just(f"fz-{next(_names):08d}")}, optional={"labels": json_values}),
            json_values,
        )
    )
    extra = draw(st.dictionaries(keys, json_values, max_size=3))
    obj.update(extra)
    return obj


@st.composite
def yaml_bodies(draw: st.DrawFn) -> bytes:
    """YAML with anchors and aliases nested to random widths and depths (some far past the
    budget), merge keys, tags, deep nesting, and noise."""
    choice = draw(st.integers(0, 3))
    if choice == 0:
        width, levels = draw(st.integers(1, 12)), draw(st.integers(1, 12))
        lines = ["apiVersion: v1", "kind: ConfigMap", f"metadata: {{name: fy-{next(_names):08d}}}", "x:"]
        lines.append("  l0: &l0 [" + ", ".join(["lol"] * width) + "]")
        lines += [f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
        return ("\n".join(lines) + "\n").encode()
    if choice == 1:
        depth = draw(st.integers(1, 3000))
        opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}"), ("- ", "")]))
        if opener == "- ":
            return "".join(f"{' ' * i}- \n" for i in range(depth)).encode()
        return (opener * depth + closer * depth).encode()
    if choice == 2:
        tag = draw(
            st.sampled_from(["!!binary", "!!set", "!!omap", "!!timestamp", "!!python/name:os.system", "!foo", ""])
        )
        value = draw(st.sampled_from(["aGk=", "{a, b}", "[a: 1]", "2001-01-01", "[1]", "x", "&a [*a]", "1" * 5000]))
        head = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: ft-{next(_names):08d}}}\n"
        return f"{head}data: {{k: {tag} {value}}}\n".encode()
    text = draw(st.text(alphabet="[]{}&*ab:- ,\n!<>'\"#|%@`?", max_size=200))
    return text.encode()


@st.composite
def protobuf_bodies(draw: st.DrawFn) -> bytes:
    """A real ConfigMap envelope, then mutated: bytes flipped, cut, or inserted."""
    body = encode_object(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"fp-{next(_names):08d}"}, "data": {"a": "b"}}
    )
    assert body is not None
    data = bytearray(body)
    for _ in range(draw(st.integers(0, 6))):
        where = draw(st.integers(0, len(data)))
        how = draw(st.integers(0, 2))
        if how == 0 and where < len(data):
            data[where] = draw(st.integers(0, 255))
        elif how == 1:
            del data[where : where + draw(st.integers(1, 8))]
        else:
            data[where:where] = draw(st.binary(min_size=1, max_size=8))
    if draw(st.booleans()):
        return bytes(data)
    return b"k8s\x00" + draw(st.binary(max_size=200))


@pytest.fixture(scope="module")
def server(raftkube_apiserver: ApiserverUnderTest) -> ApiserverUnderTest:
    return raftkube_apiserver


@pytest.fixture(scope="module")
def api(server: ApiserverUnderTest) -> Iterator[httpx.Client]:
    with server.http(timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def baseline(server: ApiserverUnderTest) -> int:
    return rss_bytes(apiserver_pid(server))


def answered(r: httpx.Response) -> None:
    """A success, or a Status with the response's 4xx code."""
    assert r.status_code < 500, r.text[:1000]
    if r.status_code >= 400:
        if r.headers.get("content-type", "").startswith("application/vnd.kubernetes.protobuf"):
            return
        body = r.json()
        assert body["kind"] == "Status" and body["code"] == r.status_code, body


def within_bounds(server: ApiserverUnderTest, baseline: int) -> None:
    rss = rss_bytes(apiserver_pid(server))
    assert rss - baseline < FUZZ_GROWTH, f"apiserver RSS {rss / MIB:.0f} MiB, started at {baseline / MIB:.0f} MiB"


@FUZZ
@given(body=st.one_of(configmap_like().map(orjson.dumps), json_values.map(orjson.dumps), st.binary(max_size=200)))
def test_json_bodies(api: httpx.Client, server: ApiserverUnderTest, baseline: int, body: bytes) -> None:
    answered(api.post(CM, content=body, headers={"Content-Type": "application/json"}))
    within_bounds(server, baseline)


@FUZZ
@given(body=st.one_of(yaml_bodies(), configmap_like().map(lambda o: yaml.safe_dump(o).encode())))
def test_yaml_bodies(api: httpx.Client, server: ApiserverUnderTest, baseline: int, body: bytes) -> None:
    path = CM if body[:1] != b"x" else REVIEWS
    answered(api.post(path, content=body, headers={"Content-Type": "application/yaml"}))
    answered(api.post(REVIEWS, content=body, headers={"Content-Type": "application/yaml"}))
    within_bounds(server, baseline)


@FUZZ
@given(body=protobuf_bodies())
def test_protobuf_bodies(api: httpx.Client, server: ApiserverUnderTest, baseline: int, body: bytes) -> None:
    answered(api.post(CM, content=body, headers={"Content-Type": "application/vnd.kubernetes.protobuf"}))
    within_bounds(server, baseline)


pointers = st.lists(
    st.sampled_from(["metadata", "annotations", "labels", "data", "a", "0", "-", "~1", ""]), max_size=4
).map(lambda parts: "/" + "/".join(parts) if parts else "")
json_patch_ops = st.lists(
    st.fixed_dictionaries(
        {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "bogus"]), "path": pointers},
        optional={"from": pointers, "value": json_values},
    ),
    max_size=40,
)


@st.composite
def patches(draw: st.DrawFn) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(["json", "merge", "strategic", "apply"]))
    if kind == "json":
        ops = draw(json_patch_ops)
        if draw(st.booleans()):  # the doubling attack, at a random scale
            ops = [{"op": "add", "path": "/metadata/annotations", "value": {"b": "x" * draw(st.integers(0, 60_000))}}]
            ops += [
                {"op": "copy", "from": "/metadata/annotations", "path": f"/metadata/annotations/c{i}"}
                for i in range(draw(st.integers(0, 40)))
            ]
        return "application/json-patch+json", orjson.dumps(ops)
    doc = draw(st.dictionaries(keys, json_values, max_size=4))
    if kind == "merge":
        return "application/merge-patch+json", orjson.dumps(doc)
    if kind == "strategic":
        doc.update(
            draw(
                st.dictionaries(
                    st.sampled_from(["$patch", "$retainKeys", "$setElementOrder/data", "$deleteFromPrimitiveList/a"]),
                    json_values,
                    max_size=2,
                )
            )
        )
        return "application/strategic-merge-patch+json", orjson.dumps(doc)
    doc.update({"apiVersion": "v1", "kind": "ConfigMap"})
    body = draw(st.one_of(st.just(orjson.dumps(doc)), yaml_bodies()))
    return "application/apply-patch+yaml", body


@pytest.fixture(scope="module")
def target(api: httpx.Client) -> str:
    name = "fuzz-target"
    made = api.post(CM, json={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "b"}})
    assert made.status_code == 201, made.text
    return f"{CM}/{name}"


@FUZZ
@given(patch=patches())
def test_patch_documents(
    api: httpx.Client, server: ApiserverUnderTest, baseline: int, target: str, patch: tuple[str, bytes]
) -> None:
    content_type, body = patch
    answered(api.patch(target, content=body, params={"fieldManager": "fuzz"}, headers={"Content-Type": content_type}))
    within_bounds(server, baseline)


def test_the_apiserver_is_ready_after_the_fuzz(server: ApiserverUnderTest, baseline: int) -> None:
    assert readyz_ok(server)
    within_bounds(server, baseline)
