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
        async with app.router.lifespan_context(app):
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


def test_metrics_count_requests(api: httpx.Client) -> None:
    api.get("/api/v1/namespaces")
    text = api.get("/metrics").text
    assert 'apiserver_request_total{code="200",resource="namespaces",verb="GET"}' in text
    assert "apiserver_request_duration_seconds_bucket" in text


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
