"""Watches over HTTP as clients read them: initial events, timeouts, bookmarks, the
initial-events-end bookmark, one-row Tables, 410 as an ERROR event; plus deletecollection,
/metrics and the in-flight limit."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from apiserver import errors
from apiserver.auth.user import User
from apiserver.http.app import build_app
from apiserver.http.inflight import InFlight, InFlightLimits
from tests.apiserver.memstorage import MemStorage
from tests.apiserver.support import ApiserverUnderTest

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
_ids = itertools.count()


@pytest.fixture(scope="module")
def api(apiserver: ApiserverUnderTest) -> Iterator[httpx.Client]:
    with apiserver.http() as client:
        yield client


@pytest.fixture
def ns(api: httpx.Client) -> str:
    name = f"w{next(_ids)}-{time.monotonic_ns() % 10**6}"
    assert api.post("/api/v1/namespaces", json={"metadata": {"name": name}}).status_code == 201
    return name


def events(api: httpx.Client, path: str, params: dict[str, str], headers: dict[str, str] | None = None) -> list[Any]:
    """Every event of a watch that ends by its timeoutSeconds (bounded by the client's timeout)."""
    out = []
    with api.stream("GET", path, params={"watch": "true", **params}, headers=headers or {}) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line:
                out.append(orjson.loads(line))
    return out


def test_watch_without_resource_version_sends_what_exists_then_ends_at_its_timeout(api: httpx.Client, ns: str) -> None:
    for name in ("a", "b"):
        api.post(f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": name}})
    started = time.monotonic()
    got = events(api, f"/api/v1/namespaces/{ns}/configmaps", {"timeoutSeconds": "1"})
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [("ADDED", "a"), ("ADDED", "b")]
    assert 0.9 <= time.monotonic() - started < 10


def test_bookmarks_and_the_initial_events_end(api: httpx.Client, ns: str) -> None:
    api.post(f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": "only"}})
    got = events(
        api,
        f"/api/v1/namespaces/{ns}/configmaps",
        {
            "timeoutSeconds": "3",
            "allowWatchBookmarks": "true",
            "sendInitialEvents": "true",
            "resourceVersionMatch": "NotOlderThan",
        },
    )
    assert got[0]["type"] == "ADDED" and got[0]["object"]["metadata"]["name"] == "only"
    end = got[1]
    assert end["type"] == "BOOKMARK"
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(end["object"]["metadata"]["resourceVersion"]) >= int(got[0]["object"]["metadata"]["resourceVersion"])


def test_table_watch_events_are_one_row_tables(api: httpx.Client, ns: str) -> None:
    api.post(f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": "t"}, "data": {"k": "v"}})
    got = events(api, f"/api/v1/namespaces/{ns}/configmaps", {"timeoutSeconds": "1"}, {"Accept": TABLE})
    table = got[0]["object"]
    assert table["kind"] == "Table" and [c["name"] for c in table["columnDefinitions"]][:2] == ["Name", "Data"]
    assert table["rows"][0]["cells"][:2] == ["t", 1]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_a_too_old_resource_version_is_an_error_event_410() -> None:
    """In-process over the in-memory storage, with a 5-event window, so that "too old" is quick."""

    class Anyone:
        def authenticate(self, scope: Any) -> User:
            return User("tester", ("system:masters",))

    app = build_app(MemStorage(progress=True), Anyone(), watch_cache_capacity=5, compaction_interval=0)

    async def go() -> tuple[int, Any]:
        async with app.running():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="https://apiserver") as client:
                for i in range(12):
                    made = await client.post(CONFIGMAPS, json={"metadata": {"name": f"c{i}"}})
                    assert made.status_code == 201
                await client.get("/api/v1/configmaps")  # a consistent list: the cache has seen every write
                r = await client.get(
                    "/api/v1/configmaps", params={"watch": "true", "resourceVersion": "1", "timeoutSeconds": "1"}
                )
                return r.status_code, orjson.loads(r.content.splitlines()[0])

    code, event = asyncio.run(go())
    assert code == 200 and event["type"] == "ERROR"
    assert event["object"]["code"] == 410 and event["object"]["reason"] == "Expired"


def test_deletecollection_with_a_label_selector(api: httpx.Client, ns: str) -> None:
    for i in range(4):
        api.post(
            f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": f"c{i}", "labels": {"odd": str(i % 2)}}}
        )
    r = api.delete(f"/api/v1/namespaces/{ns}/configmaps", params={"labelSelector": "odd=1"})
    assert r.status_code == 200 and sorted(i["metadata"]["name"] for i in r.json()["items"]) == ["c1", "c3"]
    left = api.get(f"/api/v1/namespaces/{ns}/configmaps").json()["items"]
    assert sorted(i["metadata"]["name"] for i in left) == ["c0", "c2"]


def _request_totals(api: httpx.Client) -> dict[tuple[tuple[str, str], ...], float]:
    """apiserver_request_total scraped from /metrics: each label set (sorted pairs) to its count."""
    r = api.get("/metrics")
    assert r.status_code == 200
    out = {}
    for family in text_string_to_metric_families(r.text):
        for sample in family.samples:
            if sample.name == "apiserver_request_total":
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def _kube_labels(verb: str, code: int, resource: str = "", scope: str = "", **more: str) -> tuple[tuple[str, str], ...]:
    labels = {"verb": verb, "code": str(code), "resource": resource, "scope": scope, "component": "apiserver"}
    labels |= {"group": "", "version": "v1" if resource else "", "subresource": "", "dry_run": ""} | more
    return tuple(sorted(labels.items()))


def test_request_metrics_carry_kubes_labels(api: httpx.Client, ns: str) -> None:
    """apiserver_request_total over HTTP, labelled as kube-apiserver labels it: LIST/GET/WATCH
    told apart, POST a create, APPLY a server-side apply, DELETECOLLECTION, the scope, the
    subresource, dryRun, the group and version; paths that name no served resource get none."""
    before = _request_totals(api)
    cms = f"/api/v1/namespaces/{ns}/configmaps"
    assert api.get("/api/v1/namespaces").status_code == 200
    assert api.get(f"/api/v1/namespaces/{ns}").status_code == 200
    assert api.get(f"/api/v1/namespaces/{ns}/status").status_code == 200
    assert api.get(cms).status_code == 200
    assert api.post(cms, json={"metadata": {"name": "a"}}).status_code == 201
    assert api.post(cms, params={"dryRun": "All"}, json={"metadata": {"name": "b"}}).status_code == 201
    applied = api.patch(
        f"{cms}/c",
        params={"fieldManager": "test"},
        content=b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}',
        headers={"content-type": "application/apply-patch+yaml"},
    )
    assert applied.status_code == 201, applied.text
    events(api, cms, {"timeoutSeconds": "1"})
    assert api.get(f"/apis/apps/v1/namespaces/{ns}/deployments").status_code == 200
    assert api.get(f"/apis/apps/v1/namespaces/{ns}/deployments/nope").status_code == 404
    assert api.delete(cms).status_code == 200
    assert api.get("/api/v1/namespaces/default/nonsense").status_code == 404
    assert api.get("/healthz").status_code == 200
    after = _request_totals(api)
    apps = {"group": "apps", "resource": "deployments"}
    want = [
        _kube_labels("LIST", 200, "namespaces", "cluster"),
        _kube_labels("GET", 200, "namespaces", "resource"),
        _kube_labels("GET", 200, "namespaces", "resource", subresource="status"),
        _kube_labels("LIST", 200, "configmaps", "namespace"),
        _kube_labels("POST", 201, "configmaps", "resource"),
        _kube_labels("POST", 201, "configmaps", "resource", dry_run="All"),
        _kube_labels("APPLY", 201, "configmaps", "resource"),
        _kube_labels("WATCH", 200, "configmaps", "namespace"),
        _kube_labels("LIST", 200, scope="namespace", version="v1", **apps),
        _kube_labels("GET", 404, scope="resource", version="v1", **apps),
        _kube_labels("DELETECOLLECTION", 200, "configmaps", "namespace"),
        _kube_labels("LIST", 404),  # not a served resource: no resource labels (bounded cardinality)
        _kube_labels("GET", 200),  # /healthz: not a resource request
    ]
    grown = {labels: after[labels] - before.get(labels, 0) for labels in after}
    for labels in want:
        assert grown.get(labels, 0) >= 1, (
            f"{dict(labels)} not counted; counted: {[dict(k) for k in sorted(grown) if grown[k]]}"
        )


def test_in_flight_limits_answer_429() -> None:
    admin = User("admin", ("system:masters",))  # exempt from the per-user share: the level's own limits
    limits = InFlight(InFlightLimits(reads=2, writes=1, watches=1, floor=1))
    with limits.admit("read", admin), limits.admit("read", admin):
        with pytest.raises(errors.StatusError) as e, limits.admit("read", admin):
            pass
        assert e.value.code == 429 and e.value.reason == "TooManyRequests"
        with limits.admit("write", admin):
            pass
    seat = limits.acquire("watch", admin)
    with pytest.raises(errors.StatusError):
        limits.acquire("watch", admin)
    seat.release()
    limits.acquire("watch", admin)
