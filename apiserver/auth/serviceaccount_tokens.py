"""Service-account tokens: JWTs the apiserver signs (TokenRequest) and checks on every request.

The claims are Kubernetes' bound-token claims, so that anything that reads a kube token reads
ours: `iss`, `sub` (`system:serviceaccount:<ns>:<name>`), `aud` (a list), `exp`, `iat`, `nbf`,
`jti`, and `kubernetes.io: {namespace, serviceaccount: {name, uid}, pod|secret|node: {name,
uid}, warnafter?}`.

A token authenticates when, as kube-apiserver checks it: a verification key signed it (the
algorithm pinned by the key, `apiserver.auth.jws`), its issuer is one of ours, its audiences
meet the apiserver's, `exp`/`nbf`/`iat` hold at the injected clock with kube's one-minute
leeway, and the service account it names still exists with the same uid (as do the pod,
secret or node it is bound to), not deleted for longer than that leeway.  The objects come
from the watch caches (`ObjectSource.get_object`), and, when a cache does not have one yet,
from an optional fallback read (kube's token getter also falls back from its informers to a
live GET), so a token issued for a service account created a moment ago works at once.

Verification is cheap on the hot path: a token whose signature and claims passed is kept,
keyed by its text, in a bounded LRU until it expires, so a repeated token costs a dict lookup
and the object checks, not a signature check.  A token whose signature, claims or issuer fail is
never kept (one of another audience is: the audiences asked about differ by caller).
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

import orjson

from apiserver.auth import jws
from apiserver.auth.user import AUTHENTICATED_GROUP, User, service_account_groups, service_account_user
from machinery.objects import Obj
from machinery.timestamps import parse_time

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
LEEWAY_SECONDS = 60
"""go-jose's DefaultLeeway, which kube's validator uses for exp/nbf/iat and for deletions."""
MIN_EXPIRATION_SECONDS = 600
DEFAULT_EXPIRATION_SECONDS = 3600
MAX_EXPIRATION_SECONDS = 1 << 32
CACHE_SIZE = 4096

EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid"
EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name"
EXTRA_NODE_UID = "authentication.kubernetes.io/node-uid"
EXTRA_CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"

# where the objects a token names live (the watch caches' resources)
SERVICE_ACCOUNTS, PODS, SECRETS, NODES = "serviceaccounts", "pods", "secrets", "nodes"


@dataclass(frozen=True, slots=True)
class Ref:
    """An object a token names: its name and uid."""

    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class TokenClaims:
    """What a token says, once its signature and the shape of its claims are checked."""

    issuer: str
    audiences: tuple[str, ...]
    expires: float
    not_before: float | None
    issued_at: float | None
    jti: str
    namespace: str
    service_account: Ref
    pod: Ref | None = None
    secret: Ref | None = None
    node: Ref | None = None


class ObjectSource(Protocol):
    """A watch cache, as far as token checks use one (`Cacher.get_object`)."""

    def get_object(self, namespace: str | None, name: str) -> Obj | None: ...


# (resource, namespace or None, name) -> the object or None: a live read when a cache misses
Fallback = Callable[[str, str | None, str], Awaitable[Obj | None]]


# ---------------------------------------------------------------- issuing
class TokenIssuer:
    """Signs service-account tokens with the signing key, as issuer `issuer`."""

    def __init__(
        self,
        key: jws.SigningKey,
        issuer: str = DEFAULT_ISSUER,
        *,
        clock: Callable[[], float] = time.time,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.key = key
        self.issuer = issuer
        self._clock = clock
        self._new_id = new_id

    def issue(
        self,
        service_account: Obj,
        audiences: Sequence[str],
        expiration_seconds: int,
        *,
        pod: Obj | None = None,
        secret: Obj | None = None,
        node: Obj | None = None,
        warn_after_seconds: int | None = None,
    ) -> tuple[str, int]:
        """(the token, its expiry in seconds since the epoch) for `service_account` (a stored
        ServiceAccount), bound to at most one of `pod`/`secret` and, for a node-bound token or a
        pod on a node, `node`."""
        now = int(self._clock())
        meta = service_account["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        k8s: Obj = {"namespace": namespace, "serviceaccount": _ref(service_account)}
        if pod is not None:
            k8s["pod"] = _ref(pod)
        elif secret is not None:
            k8s["secret"] = _ref(secret)
        if node is not None:
            k8s["node"] = _ref(node)
        if warn_after_seconds is not None:
            k8s["warnafter"] = now + warn_after_seconds
        expires = now + expiration_seconds
        claims = {
            "iss": self.issuer,
            "sub": service_account_user(namespace, name),
            "aud": list(audiences),
            "exp": expires,
            "iat": now,
            "nbf": now,
            "jti": self._new_id(),
            "kubernetes.io": k8s,
        }
        # sorted keys, as go-jose marshals the merged claims
        ordered = orjson.loads(orjson.dumps(claims, option=orjson.OPT_SORT_KEYS))
        return jws.sign(ordered, self.key), expires


def _ref(obj: Obj) -> dict[str, str]:
    meta = obj.get("metadata") or {}
    return {"name": str(meta.get("name", "")), "uid": str(meta.get("uid", ""))}


# ---------------------------------------------------------------- reading claims
def parse_claims(payload: Mapping[str, Any]) -> TokenClaims | None:
    """The claims of a verified payload, or None when one is missing or of the wrong type, or
    `sub` does not name the service account of the private claims."""
    iss, sub, aud, exp = payload.get("iss"), payload.get("sub"), payload.get("aud"), payload.get("exp")
    jti = payload.get("jti", "")
    if not isinstance(iss, str) or not isinstance(sub, str) or not isinstance(jti, str) or not _number(exp):
        return None
    if isinstance(aud, str):
        audiences: tuple[str, ...] = (aud,)
    elif isinstance(aud, list) and aud and all(isinstance(a, str) for a in aud):
        audiences = tuple(aud)
    else:
        return None
    nbf, iat = payload.get("nbf"), payload.get("iat")
    if (nbf is not None and not _number(nbf)) or (iat is not None and not _number(iat)):
        return None
    k8s = payload.get("kubernetes.io")
    if not isinstance(k8s, dict):
        return None
    namespace = k8s.get("namespace")
    sa = _parse_ref(k8s.get("serviceaccount"))
    if not isinstance(namespace, str) or not namespace or sa is None:
        return None
    if sub != service_account_user(namespace, sa.name):
        return None
    refs: dict[str, Ref | None] = {}
    for field in ("pod", "secret", "node"):
        value = k8s.get(field)
        refs[field] = None if value is None else _parse_ref(value)
        if value is not None and refs[field] is None:
            return None
    return TokenClaims(
        issuer=iss,
        audiences=audiences,
        expires=float(exp),
        not_before=None if nbf is None else float(nbf),
        issued_at=None if iat is None else float(iat),
        jti=jti,
        namespace=namespace,
        service_account=sa,
        pod=refs["pod"],
        secret=refs["secret"],
        node=refs["node"],
    )


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < 1e15


def _parse_ref(value: Any) -> Ref | None:
    if not isinstance(value, dict):
        return None
    name, uid = value.get("name"), value.get("uid", "")
    if not isinstance(name, str) or not name or not isinstance(uid, str):
        return None
    return Ref(name, uid)


def user_of(claims: TokenClaims) -> User:
    """The user a valid token authenticates as, with kube's groups and extra."""
    extra: list[tuple[str, tuple[str, ...]]] = []
    if claims.pod is not None:
        extra += [(EXTRA_POD_NAME, (claims.pod.name,)), (EXTRA_POD_UID, (claims.pod.uid,))]
    if claims.node is not None:
        extra.append((EXTRA_NODE_NAME, (claims.node.name,)))
        if claims.node.uid:
            extra.append((EXTRA_NODE_UID, (claims.node.uid,)))
    if claims.jti:
        extra.append((EXTRA_CREDENTIAL_ID, (f"JTI={claims.jti}",)))
    return User(
        service_account_user(claims.namespace, claims.service_account.name),
        (*service_account_groups(claims.namespace), AUTHENTICATED_GROUP),
        claims.service_account.uid,
        tuple(sorted(extra)),
    )


# ---------------------------------------------------------------- verifying
class ServiceAccountTokenAuthenticator:
    """Bearer token -> the service account's user, or None (never an exception)."""

    def __init__(
        self,
        keys: Sequence[jws.VerifyKey],
        *,
        issuers: Sequence[str],
        audiences: Sequence[str],
        sources: Mapping[str, ObjectSource],
        clock: Callable[[], float] = time.time,
        fallback: Fallback | None = None,
        cache_size: int = CACHE_SIZE,
    ) -> None:
        """`sources`: the caches of serviceaccounts, pods, secrets and nodes by plural (a
        token bound to an object whose source is missing does not authenticate)."""
        self._keys = tuple(keys)
        self._issuers = frozenset(issuers)
        self._audiences = frozenset(audiences)
        self._sources = dict(sources)
        self._clock = clock
        self._fallback = fallback
        self._cache: OrderedDict[str, tuple[TokenClaims, User]] = OrderedDict()
        self._cache_size = cache_size

    async def authenticate_token(self, token: str) -> User | None:
        found = await self.authenticate_for(token, self._audiences)
        return None if found is None else found[0]

    async def authenticate_for(self, token: str, audiences: Collection[str]) -> tuple[User, tuple[str, ...]] | None:
        """The user, and the token's audiences among `audiences` (kube's response audiences), when
        the token is meant for at least one of them (none asked: any audience), else None.
        A TokenReview asks for its own audiences; a request asks for the apiserver's."""
        verified = self._verified(token)
        if verified is None:
            return None
        claims, user = verified
        granted = _meeting(claims.audiences, audiences)
        if audiences and not granted:
            return None
        now = self._clock()
        if not self._in_time(claims, now):
            return None
        if not await self._objects_current(claims, now):
            return None
        return user, granted

    def verified_claims(self, token: str) -> TokenClaims | None:
        """Signature, claim shapes, issuer and audience: cached by the token's text."""
        verified = self._verified(token)
        if verified is None or (self._audiences and self._audiences.isdisjoint(verified[0].audiences)):
            return None
        return verified[0]

    def _verified(self, token: str) -> tuple[TokenClaims, User] | None:
        """The token's claims and the user they name, both cached by the token's text (a client
        sends the same token with every request: the user is built once, not per request)."""
        cached = self._cache.get(token)
        if cached is not None:
            self._cache.move_to_end(token)
            if self._clock() > cached[0].expires + LEEWAY_SECONDS:
                del self._cache[token]
                return None
            return cached
        payload = jws.verify(token, self._keys)
        claims = None if payload is None else parse_claims(payload)
        if claims is None or claims.issuer not in self._issuers:
            return None  # (the audiences are the caller's question: checked after the cache)
        verified = (claims, user_of(claims))
        self._cache[token] = verified
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return verified

    @staticmethod
    def _in_time(claims: TokenClaims, now: float) -> bool:
        if now > claims.expires + LEEWAY_SECONDS:
            return False
        if claims.not_before is not None and now + LEEWAY_SECONDS < claims.not_before:
            return False
        return claims.issued_at is None or now + LEEWAY_SECONDS >= claims.issued_at

    async def _objects_current(self, claims: TokenClaims, now: float) -> bool:
        wanted: list[tuple[str, str | None, Ref]] = [(SERVICE_ACCOUNTS, claims.namespace, claims.service_account)]
        if claims.secret is not None:
            wanted.append((SECRETS, claims.namespace, claims.secret))
        if claims.pod is not None:
            wanted.append((PODS, claims.namespace, claims.pod))
        elif claims.node is not None:  # a pod-bound token names its pod's node for information only
            wanted.append((NODES, None, claims.node))
        for resource, namespace, ref in wanted:
            obj = await self._get(resource, namespace, ref.name)
            if obj is None or not _current(obj, ref.uid, now):
                return False
        return True

    async def _get(self, resource: str, namespace: str | None, name: str) -> Obj | None:
        source = self._sources.get(resource)
        obj = None if source is None else source.get_object(namespace, name)
        if obj is None and self._fallback is not None:
            obj = await self._fallback(resource, namespace, name)
        return obj


def _meeting(have: Sequence[str], wanted: Collection[str]) -> tuple[str, ...]:
    """The audiences in both, in the token's order; every one of the token's when none is wanted."""
    return tuple(a for a in have if a in wanted) if wanted else tuple(have)


def _current(obj: Obj, uid: str, now: float) -> bool:
    """Same uid, and not deleted longer ago than the leeway (kube's invalidIfDeletedBefore)."""
    meta = obj.get("metadata") or {}
    if meta.get("uid", "") != uid:
        return False
    deleted = parse_time(meta.get("deletionTimestamp"))
    return deleted is None or deleted >= now - LEEWAY_SECONDS
