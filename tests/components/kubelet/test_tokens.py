"""Service account tokens for projected volumes: one TokenRequest per (pod, audience, lifetime),
bound to the pod, reused until 80 % of its life has passed, asked again after; a pod that is
gone is forgotten; the token lands in the volume's file.  The apiserver is a recording function
here (the kubelet end-to-end tests use the real one)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from components.kubelet.envvars import Sources
from components.kubelet.tokens import TokenCache, requests_of
from components.kubelet.volumes import VolumeError, files_of
from machinery.objects import Obj


def pod(*projections: Obj, account: str | None = "robot") -> Obj:
    spec: Obj = {"volumes": [{"name": "t", "projected": {"sources": list(projections)}}]}
    if account:
        spec["serviceAccountName"] = account
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"}, "spec": spec}


class Apiserver:
    def __init__(self) -> None:
        self.asked: list[tuple[str, Obj]] = []

    async def post(self, path: str, body: Obj) -> Obj:
        self.asked.append((path, body))
        return {"status": {"token": f"token-{len(self.asked)}", "expirationTimestamp": "1970-01-01T01:00:00Z"}}


def test_one_request_per_projection_reused_until_80_percent_of_its_life() -> None:
    api, now = Apiserver(), [0.0]
    cache = TokenCache(api.post, clock=lambda: now[0])
    p = pod({"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}})
    assert asyncio.run(cache.refresh(p)) == {("", 3600): "token-1"}
    [(path, body)] = api.asked
    assert path == "/api/v1/namespaces/ns/serviceaccounts/robot/token"
    assert body["spec"] == {
        "expirationSeconds": 3600,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-1"},
    }
    now[0] = 2879.0  # expires at 3600 (the answer's timestamp): 80 % is 2880
    assert asyncio.run(cache.refresh(p)) == {("", 3600): "token-1"} and len(api.asked) == 1
    now[0] = 2880.0
    assert asyncio.run(cache.refresh(p)) == {("", 3600): "token-2"} and len(api.asked) == 2
    cache.forget("u-1")
    asyncio.run(cache.refresh(p))
    assert len(api.asked) == 3


def test_audiences_and_the_default_account() -> None:
    api = Apiserver()
    p = pod({"serviceAccountToken": {"path": "vault", "audience": "vault", "expirationSeconds": 600}}, account=None)
    got = asyncio.run(TokenCache(api.post, clock=lambda: 0.0).refresh(p))
    assert got == {("vault", 600): "token-1"}
    [(path, body)] = api.asked
    assert path.endswith("/serviceaccounts/default/token") and body["spec"]["audiences"] == ["vault"]


@pytest.mark.parametrize("seconds", [None, 0, -5, True, "3600"])
def test_a_missing_or_bad_lifetime_is_kubes_default_hour(seconds: Any) -> None:
    token: Obj = {"path": "token"} if seconds is None else {"path": "token", "expirationSeconds": seconds}
    assert list(requests_of(pod({"serviceAccountToken": token}))) == [("", 3600)]


def test_the_token_is_the_volumes_file_and_its_absence_holds_the_volume() -> None:
    volume = {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
    with_token = Sources(lambda n, m: None, lambda n, m: None, lambda audience, seconds: "abc")
    assert files_of(volume, pod(), with_token, "v") == {"token": (b"abc", 0o644)}
    without = Sources(lambda n, m: None, lambda n, m: None)
    with pytest.raises(VolumeError, match=r"v.projected.sources\[0\].serviceAccountToken: no service account token"):
        files_of(volume, pod(), without, "v")
