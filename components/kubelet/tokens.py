"""Service account tokens for projected volumes, as kube's kubelet gets them: one TokenRequest
per (pod, audience, lifetime), bound to the pod so the token dies with it, kept and asked
again once 80 % of its life has passed or it is a day old.  What a pod's
`kube-api-access-*` volume (and any `serviceAccountToken` projection) puts in its `token` file,
so an in-cluster client in the pod can call the apiserver as the pod's service account.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from components.kubelet.containerlog import parse_timestamp
from components.kubelet.volumes import DEFAULT_TOKEN_SECONDS
from machinery.objects import Obj

MAX_AGE_S = 24 * 3600.0
Post = Callable[[str, Obj], Awaitable[Obj]]  # (path, body) -> the answer


@dataclass(frozen=True, slots=True)
class Token:
    value: str
    issued: float
    expires: float

    def stale(self, now: float) -> bool:
        """Past 80 % of its life, or a day old: ask for the next one (kube's rule)."""
        return now >= self.issued + 0.8 * (self.expires - self.issued) or now - self.issued > MAX_AGE_S


def requests_of(pod: Obj) -> Iterator[tuple[str, int]]:
    """The (audience, expirationSeconds) of every serviceAccountToken projection of the pod."""
    for volume in (pod.get("spec") or {}).get("volumes") or ():
        projected = volume.get("projected") if isinstance(volume, dict) else None
        for src in (projected or {}).get("sources") or () if isinstance(projected, dict) else ():
            token = src.get("serviceAccountToken") if isinstance(src, dict) else None
            if isinstance(token, dict):
                seconds = token.get("expirationSeconds")
                ok = isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0
                yield str(token.get("audience") or ""), seconds if ok else DEFAULT_TOKEN_SECONDS  # type: ignore[misc]


class TokenCache:
    def __init__(self, post: Post, clock: Callable[[], float] = time.time) -> None:
        self._post = post
        self._clock = clock
        self._tokens: dict[tuple[str, str, int], Token] = {}  # (pod uid, audience, seconds)

    async def refresh(self, pod: Obj) -> dict[tuple[str, int], str]:
        """The pod's tokens by (audience, seconds), asked for where missing or stale.  An
        ApiError from the apiserver goes to the caller (the pod waits for its volume)."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        uid, ns, name = str(meta.get("uid") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or "")
        account = str(spec.get("serviceAccountName") or "default")
        out: dict[tuple[str, int], str] = {}
        for audience, seconds in requests_of(pod):
            key = (uid, audience, seconds)
            now = self._clock()
            held = self._tokens.get(key)
            if held is None or held.stale(now):
                body: Obj = {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {
                        "expirationSeconds": seconds,
                        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid},
                    },
                }
                if audience:
                    body["spec"]["audiences"] = [audience]
                got = await self._post(f"/api/v1/namespaces/{ns}/serviceaccounts/{account}/token", body)
                status = got.get("status") or {}
                expires = _epoch(status.get("expirationTimestamp")) or now + seconds
                held = self._tokens[key] = Token(str(status.get("token") or ""), now, expires)
            out[(audience, seconds)] = held.value
        return out

    def forget(self, uid: str) -> None:
        for key in [k for k in self._tokens if k[0] == uid]:
            del self._tokens[key]


def _epoch(text: Any) -> float | None:
    try:
        return parse_timestamp(str(text)) / 1e9 if text else None
    except ValueError:
        return None
