"""The gates against a real apiserver process over each storage backend: fifty concurrent pod
creates against a quota of ten admit exactly ten."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.apiserver.support import ApiserverUnderTest


def test_fifty_concurrent_creates_against_a_quota_of_ten(apiserver: ApiserverUnderTest) -> None:
    ns = f"quota-{time.monotonic_ns() % 10**6}"
    base = f"/api/v1/namespaces/{ns}"

    async def go() -> list[int]:
        async with httpx.AsyncClient(
            base_url=apiserver.url,
            verify=apiserver.ssl_context(),
            headers={"Authorization": f"Bearer {apiserver.token}"},
            timeout=60,
        ) as http:
            assert (await http.post("/api/v1/namespaces", json={"metadata": {"name": ns}})).status_code == 201
            quota = {"metadata": {"name": "ten"}, "spec": {"hard": {"pods": "10"}}}
            assert (await http.post(f"{base}/resourcequotas", json=quota)).status_code == 201
            assert (await http.get(f"{base}/resourcequotas")).status_code == 200  # the quota cache has it
            pod = {"spec": {"containers": [{"name": "c", "image": "busybox"}], "automountServiceAccountToken": False}}
            answers = await asyncio.gather(
                *(http.post(f"{base}/pods", json={"metadata": {"name": f"p{i}"}, **pod}) for i in range(50))
            )
            pods = (await http.get(f"{base}/pods")).json()["items"]
            used = (await http.get(f"{base}/resourcequotas/ten")).json()["status"]["used"]
            assert len(pods) == 10 and used == {"pods": "10"}
            return [r.status_code for r in answers]

    codes = asyncio.run(go())
    assert sorted(codes) == [201] * 10 + [403] * 40


def test_creates_and_deletes_at_once_keep_the_quota_count(apiserver: ApiserverUnderTest) -> None:
    """Charges (creates) and give-backs (deletes) race for the quota's revision over a real store:
    the loser retries; no create or delete gets 409, and the count ends right."""
    ns = f"churn-{time.monotonic_ns() % 10**6}"
    base = f"/api/v1/namespaces/{ns}"
    pod = {"spec": {"containers": [{"name": "c", "image": "busybox"}], "automountServiceAccountToken": False}}

    async def go() -> tuple[list[int], dict[str, str]]:
        async with httpx.AsyncClient(
            base_url=apiserver.url,
            verify=apiserver.ssl_context(),
            headers={"Authorization": f"Bearer {apiserver.token}"},
            timeout=60,
        ) as http:
            assert (await http.post("/api/v1/namespaces", json={"metadata": {"name": ns}})).status_code == 201
            quota = {"metadata": {"name": "many"}, "spec": {"hard": {"pods": "100"}}}
            assert (await http.post(f"{base}/resourcequotas", json=quota)).status_code == 201
            assert (await http.get(f"{base}/resourcequotas")).status_code == 200
            for i in range(30):
                r = await http.post(f"{base}/pods", json={"metadata": {"name": f"old{i}"}, **pod})
                assert r.status_code == 201, r.text
            work = []
            for i in range(30):
                work.append(http.delete(f"{base}/pods/old{i}", params={"gracePeriodSeconds": "0"}))
                work.append(http.post(f"{base}/pods", json={"metadata": {"name": f"new{i}"}, **pod}))
            answers = await asyncio.gather(*work)
            bad = [r.text for r in answers if r.status_code not in (200, 201)]
            assert not bad, bad[:2]
            used = (await http.get(f"{base}/resourcequotas/many")).json()["status"]["used"]
            return [r.status_code for r in answers], used

    codes, used = asyncio.run(go())
    assert sorted(codes) == [200] * 30 + [201] * 30
    assert used == {"pods": "30"}
