"""Service-account tokens without a server: the JWS layer (sign, verify, tampering, algorithm
confusion, key files, JWKs), the claims (as kube writes them), and the authenticator's checks
(time with kube's leeway, issuer, audience, the service account / pod / secret / node still
there with the same uid), its cache, and a fuzzed parser that never raises."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver.auth import issuer_discovery, jws
from apiserver.auth.authn import Authenticator, Union
from apiserver.auth.serviceaccount_tokens import (
    DEFAULT_ISSUER,
    EXTRA_CREDENTIAL_ID,
    EXTRA_NODE_NAME,
    EXTRA_NODE_UID,
    EXTRA_POD_NAME,
    EXTRA_POD_UID,
    LEEWAY_SECONDS,
    ServiceAccountTokenAuthenticator,
    TokenIssuer,
    parse_claims,
)
from apiserver.auth.user import User

NOW = 1_700_000_000.0
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
SIGNING = jws.signing_key(RSA_KEY)
EC_SIGNING = jws.signing_key(ec.generate_private_key(ec.SECP256R1()))


class Clock:
    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Source:
    """A watch cache stand-in: objects by (namespace, name)."""

    def __init__(self, *objs: dict[str, Any]) -> None:
        self.objs = {(o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objs}
        self.reads = 0

    def get_object(self, namespace: str | None, name: str) -> dict[str, Any] | None:
        self.reads += 1
        return self.objs.get((namespace, name))


def obj(name: str, uid: str, namespace: str | None = "web", **meta: Any) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "uid": uid, **meta}
    if namespace is not None:
        m["namespace"] = namespace
    return {"metadata": m}


SA = obj("builder", "sa-uid-1")
POD = obj("p1", "pod-uid-1")
SECRET = obj("s1", "secret-uid-1")
NODE = obj("n1", "node-uid-1", namespace=None)


def sources(*sas: dict[str, Any]) -> dict[str, Source]:
    return {
        "serviceaccounts": Source(*(sas or (SA,))),
        "pods": Source(POD),
        "secrets": Source(SECRET),
        "nodes": Source(NODE),
    }


def authenticator(clock: Clock, srcs: dict[str, Source] | None = None, **kw: Any) -> ServiceAccountTokenAuthenticator:
    options: dict[str, Any] = {"issuers": [DEFAULT_ISSUER], "audiences": [DEFAULT_ISSUER], **kw}
    return ServiceAccountTokenAuthenticator(
        [SIGNING.public(), EC_SIGNING.public()], sources=srcs or sources(), clock=clock, **options
    )


def issue(clock: Clock, seconds: int = 3600, audiences: tuple[str, ...] = (DEFAULT_ISSUER,), **bound: Any) -> str:
    issuer = TokenIssuer(bound.pop("key", SIGNING), bound.pop("iss", DEFAULT_ISSUER), clock=clock, new_id=lambda: "j1")
    token, _ = issuer.issue(bound.pop("sa", SA), list(audiences), seconds, **bound)
    return token


def auth(a: ServiceAccountTokenAuthenticator, token: str) -> User | None:
    return asyncio.run(a.authenticate_token(token))


def payload(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return decoded


# ---------------------------------------------------------------- claims and the user
def test_claims_are_kubes_bound_token_claims() -> None:
    clock = Clock()
    token = issue(clock, pod=POD, node=NODE)
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header == {"alg": "RS256", "kid": SIGNING.kid}
    assert payload(token) == {
        "aud": [DEFAULT_ISSUER],
        "exp": int(NOW) + 3600,
        "iat": int(NOW),
        "iss": DEFAULT_ISSUER,
        "jti": "j1",
        "kubernetes.io": {
            "namespace": "web",
            "node": {"name": "n1", "uid": "node-uid-1"},
            "pod": {"name": "p1", "uid": "pod-uid-1"},
            "serviceaccount": {"name": "builder", "uid": "sa-uid-1"},
        },
        "nbf": int(NOW),
        "sub": "system:serviceaccount:web:builder",
    }
    # kube's key id: base64url(SHA-256(DER SubjectPublicKeyInfo)), unpadded
    der = RSA_KEY.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert SIGNING.kid == base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()


def test_a_valid_token_is_the_service_account_user() -> None:
    clock = Clock()
    user = auth(authenticator(clock), issue(clock))
    assert user == User(
        "system:serviceaccount:web:builder",
        ("system:serviceaccounts", "system:serviceaccounts:web", "system:authenticated"),
        "sa-uid-1",
        ((EXTRA_CREDENTIAL_ID, ("JTI=j1",)),),
    )


def test_a_pod_bound_token_carries_the_pod_and_node_as_extra() -> None:
    clock = Clock()
    user = auth(authenticator(clock), issue(clock, pod=POD, node=NODE))
    assert user is not None
    assert user.extra_dict() == {
        EXTRA_CREDENTIAL_ID: ["JTI=j1"],
        EXTRA_NODE_NAME: ["n1"],
        EXTRA_NODE_UID: ["node-uid-1"],
        EXTRA_POD_NAME: ["p1"],
        EXTRA_POD_UID: ["pod-uid-1"],
    }


def test_es256_tokens_verify_too() -> None:
    clock = Clock()
    token = issue(clock, key=EC_SIGNING)
    assert json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))["alg"] == "ES256"
    assert len(base64.urlsafe_b64decode(token.split(".")[2] + "==")) == 64  # r || s, not DER
    assert auth(authenticator(clock), token) is not None


# ---------------------------------------------------------------- time
def test_expiry_with_kubes_one_minute_leeway() -> None:
    clock = Clock()
    a = authenticator(clock)
    token = issue(clock, seconds=600)
    clock.now = NOW + 600 + LEEWAY_SECONDS
    assert auth(a, token) is not None
    clock.now += 1
    assert auth(a, token) is None
    clock.now = NOW  # a fresh authenticator at the right time still takes it: nothing is remembered as bad
    assert auth(authenticator(clock), token) is not None


def test_not_before_and_issued_in_the_future() -> None:
    clock = Clock()
    token = issue(Clock(NOW + 3600))
    assert auth(authenticator(clock), token) is None
    clock.now = NOW + 3600 - LEEWAY_SECONDS
    assert auth(authenticator(clock), token) is not None


# ---------------------------------------------------------------- issuer and audience
def test_audience_must_meet_the_apiservers() -> None:
    clock = Clock()
    a = authenticator(clock)
    assert auth(a, issue(clock, audiences=("vault",))) is None
    assert auth(a, issue(clock, audiences=("vault", DEFAULT_ISSUER))) is not None
    other = authenticator(clock, audiences=["api", "vault"])
    assert auth(other, issue(clock, audiences=("vault",))) is not None


def test_issuer_must_be_one_of_ours() -> None:
    clock = Clock()
    assert auth(authenticator(clock), issue(clock, iss="https://elsewhere")) is None
    rotated = authenticator(clock, issuers=["https://new", DEFAULT_ISSUER])
    assert auth(rotated, issue(clock)) is not None


# ---------------------------------------------------------------- the objects behind the token
def test_a_deleted_or_recreated_service_account_invalidates_its_tokens() -> None:
    clock = Clock()
    token = issue(clock)
    assert auth(authenticator(clock, sources(obj("other", "x"))), token) is None
    assert auth(authenticator(clock, sources(obj("builder", "sa-uid-2"))), token) is None


def test_a_service_account_being_deleted_works_for_the_leeway_only() -> None:
    clock = Clock()
    token = issue(clock)
    deleting = obj("builder", "sa-uid-1", deletionTimestamp="2023-11-14T22:13:20Z")  # = NOW
    a = authenticator(clock, sources(deleting))
    clock.now = NOW + LEEWAY_SECONDS
    assert auth(a, token) is not None
    clock.now += 1
    assert auth(a, token) is None


@pytest.mark.parametrize(
    ("bound", "resource", "replacement"),
    [
        ({"pod": POD}, "pods", obj("p1", "pod-uid-2")),
        ({"secret": SECRET}, "secrets", obj("s1", "secret-uid-2")),
        ({"node": NODE}, "nodes", obj("n1", "node-uid-2", namespace=None)),
    ],
)
def test_a_bound_token_dies_with_its_object(bound: dict[str, Any], resource: str, replacement: dict[str, Any]) -> None:
    clock = Clock()
    token = issue(clock, **bound)
    assert auth(authenticator(clock), token) is not None
    gone = sources()
    gone[resource] = Source()
    assert auth(authenticator(clock, gone), token) is None
    recreated = sources()
    recreated[resource] = Source(replacement)
    assert auth(authenticator(clock, recreated), token) is None


def test_the_node_of_a_pod_bound_token_is_information_only() -> None:
    clock = Clock()
    token = issue(clock, pod=POD, node=obj("n9", "", namespace=None))  # a node that does not exist
    assert auth(authenticator(clock), token) is not None


def test_a_cache_miss_asks_the_fallback() -> None:
    clock = Clock()
    asked: list[tuple[str, str | None, str]] = []

    async def fallback(resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        asked.append((resource, namespace, name))
        return SA if resource == "serviceaccounts" else None

    empty = sources(obj("nobody", "x"))
    assert auth(authenticator(clock, empty, fallback=fallback), issue(clock)) is not None
    assert asked == [("serviceaccounts", "web", "builder")]


# ---------------------------------------------------------------- forgery
def _resign_hs256(token: str, secret: bytes) -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","kid":"%s"}' % SIGNING.kid.encode()).rstrip(b"=").decode()
    body = token.split(".")[1]
    mac = hmac.new(secret, f"{header}.{body}".encode(), "sha256").digest()
    return f"{header}.{body}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def test_tampering_and_algorithm_confusion_are_refused() -> None:
    clock = Clock()
    a = authenticator(clock)
    token = issue(clock)
    head, body, sig = token.split(".")
    claims = payload(token)
    claims["kubernetes.io"]["serviceaccount"]["name"] = "admin"
    claims["sub"] = "system:serviceaccount:web:admin"
    forged_body = base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()
    assert auth(a, f"{head}.{forged_body}.{sig}") is None
    none_head = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    assert auth(a, f"{none_head}.{body}.") is None
    public_pem = jws.public_pem(RSA_KEY.public_key())
    assert auth(a, _resign_hs256(token, public_pem)) is None
    # an ES256 header on an RSA signature: the key pins the algorithm
    es_head = base64.urlsafe_b64encode(b'{"alg":"ES256","kid":"%s"}' % SIGNING.kid.encode()).rstrip(b"=").decode()
    assert auth(a, f"{es_head}.{body}.{sig}") is None
    # a kid naming no key of ours
    other_kid = base64.urlsafe_b64encode(b'{"alg":"RS256","kid":"nope"}').rstrip(b"=").decode()
    assert auth(a, f"{other_kid}.{body}.{sig}") is None
    # a key we do not trust
    stranger = jws.signing_key(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    assert auth(a, issue(clock, key=stranger)) is None
    # padding, whitespace, non-ASCII: not base64url
    assert auth(a, f"{head}.{body}.{sig}=") is None
    assert auth(a, f"{head}.{body}.{sig[:-1]}é") is None
    assert auth(a, token) is not None


def test_claims_of_the_wrong_shape_are_refused() -> None:
    good = payload(issue(Clock()))
    assert parse_claims(good) is not None
    changes: tuple[dict[str, Any], ...] = (
        {"exp": "soon"},
        {"exp": True},
        {"aud": []},
        {"aud": [1]},
        {"iss": None},
        {"sub": "system:serviceaccount:web:someone-else"},
        {"kubernetes.io": {"namespace": "web"}},
        {"kubernetes.io": {**good["kubernetes.io"], "pod": {"uid": "x"}}},
        {"kubernetes.io": {**good["kubernetes.io"], "namespace": ""}},
        {"nbf": [1]},
    )
    for change in changes:
        assert parse_claims({**good, **change}) is None, change
    assert parse_claims({**good, "aud": DEFAULT_ISSUER}) is not None  # a single string is an audience too


# ---------------------------------------------------------------- the cache
def test_a_repeated_token_skips_the_signature_but_not_the_object_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    srcs = sources()
    a = authenticator(clock, srcs)
    token = issue(clock)
    calls = 0
    real = jws.verify

    def counting(t: str, keys: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(t, keys)

    monkeypatch.setattr(jws, "verify", counting)
    for _ in range(5):
        assert auth(a, token) is not None
    assert calls == 1
    assert srcs["serviceaccounts"].reads == 5
    srcs["serviceaccounts"].objs.clear()  # deleted: the cached token stops working at once
    assert auth(a, token) is None


def test_the_cache_is_bounded() -> None:
    clock = Clock()
    a = authenticator(clock, cache_size=3)
    tokens = [issue(clock, seconds=600 + i) for i in range(10)]
    for t in tokens:
        assert auth(a, t) is not None
    assert len(a._cache) == 3


# ---------------------------------------------------------------- never raises
_token_parts = st.text(alphabet="ABCabc0123456789-_=.+/ é\x00", max_size=60)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_token_parts, st.lists(_token_parts, min_size=1, max_size=4).map(".".join)))
def test_fuzzed_tokens_are_not_authenticated(text: str) -> None:
    assert auth(authenticator(Clock()), text) is None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["alg", "kid", "typ", "crit", "x"]), _json, max_size=4), _json)
def test_fuzzed_headers_and_payloads_signed_or_not_never_raise(header: dict[str, Any], body: Any) -> None:
    clock = Clock()
    a = authenticator(clock)
    head, raw = _b64(json.dumps(header).encode()), _b64(json.dumps(body).encode())
    assert auth(a, f"{head}.{raw}.{_b64(b'x' * 256)}") is None
    # validly signed garbage (any JSON, integers past 64 bits too): the signature passes, the claims do not
    signed_head = _b64(json.dumps({**header, "alg": "RS256", "kid": SIGNING.kid}).encode())
    signature = RSA_KEY.sign(f"{signed_head}.{raw}".encode(), padding.PKCS1v15(), hashes.SHA256())
    assert auth(a, f"{signed_head}.{raw}.{_b64(signature)}") is None


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["iss", "sub", "aud", "exp", "nbf", "iat", "jti", "kubernetes.io"]), _json))
def test_fuzzed_claims_never_raise(changes: dict[str, Any]) -> None:
    parse_claims({**payload(issue(Clock())), **changes})


# ---------------------------------------------------------------- key files and the JWKS
def test_key_files(tmp_path: Path) -> None:
    pem = jws.generate_rsa_pem()
    (tmp_path / "sa.key").write_bytes(pem)
    key = jws.load_signing_key(tmp_path / "sa.key")
    assert key.alg == "RS256"
    # the verification file may mix public keys, private keys and certificates
    ec_key = ec.generate_private_key(ec.SECP384R1())
    mixed = jws.public_pem(key.key.public_key()) + ec_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    (tmp_path / "sa.pub").write_bytes(mixed)
    keys = jws.load_verify_keys(tmp_path / "sa.pub")
    assert [k.alg for k in keys] == ["RS256", "ES384"] and keys[0].kid == key.kid
    (tmp_path / "ed.key").write_bytes(
        ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    with pytest.raises(jws.KeyFileError, match="cannot sign tokens"):
        jws.load_signing_key(tmp_path / "ed.key")
    (tmp_path / "empty").write_text("nothing here\n")
    with pytest.raises(jws.KeyFileError, match="no PEM"):
        jws.load_verify_keys(tmp_path / "empty")
    with pytest.raises(jws.KeyFileError, match="cannot read"):
        jws.load_signing_key(tmp_path / "missing")
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(jws.KeyFileError, match="2048"):
        jws.signing_key(small)


def test_jwks_and_openid_configuration() -> None:
    keys = [SIGNING.public(), EC_SIGNING.public(), SIGNING.public()]
    doc = issuer_discovery.jwks(keys)
    assert [k["kid"] for k in doc["keys"]] == [SIGNING.kid, EC_SIGNING.kid]
    rsa_jwk, ec_jwk = doc["keys"]
    assert rsa_jwk["kty"] == "RSA" and rsa_jwk["e"] == "AQAB" and rsa_jwk["use"] == "sig"
    n = int.from_bytes(base64.urlsafe_b64decode(rsa_jwk["n"] + "=="), "big")
    assert n == RSA_KEY.public_key().public_numbers().n
    assert ec_jwk["kty"] == "EC" and ec_jwk["crv"] == "P-256" and len(base64.urlsafe_b64decode(ec_jwk["x"] + "=")) == 32
    config = issuer_discovery.openid_configuration(DEFAULT_ISSUER, "https://h/openid/v1/jwks", keys)
    assert config["id_token_signing_alg_values_supported"] == ["ES256", "RS256"]
    assert config["issuer"] == DEFAULT_ISSUER


# ---------------------------------------------------------------- the union, in kube's order
def test_the_union_asks_certificate_and_static_tokens_first() -> None:
    clock = Clock()
    token = issue(clock)
    static = Authenticator({"static-token": User("static")})
    union = Union(static, [authenticator(clock)])

    def scope(bearer: str) -> dict[str, Any]:
        return {"headers": [(b"authorization", f"Bearer {bearer}".encode())]}

    assert union.authenticate(scope("static-token")) == User("static", ("system:authenticated",))
    assert union.authenticate(scope("not-a-jwt")) is None  # answered without awaiting anything
    assert union.authenticate({"headers": []}) is None
    pending = union.authenticate(scope(token))
    assert asyncio.iscoroutine(pending)
    user = asyncio.run(pending)
    assert user is not None and user.name == "system:serviceaccount:web:builder"
