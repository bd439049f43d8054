"""TokenReview without a server: the answerer over the real authenticator chain (static tokens,
then service-account JWTs), as kube's tokenreview registry answers: the token's user and groups,
`authenticated` left out when false, audiences granted as the intersection (the apiserver's own
when none are asked), an empty token a 400, a namespace refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apiserver import errors
from apiserver.auth.authn import Authenticator, Union
from apiserver.auth.serviceaccount_tokens import DEFAULT_ISSUER, LEEWAY_SECONDS
from apiserver.auth.token_review import TokenReviews
from apiserver.auth.user import User
from tests.apiserver.auth.test_serviceaccount_tokens import Clock, authenticator, issue

ASKER = User("webhook", ("system:authenticated",))
OTHER_AUDIENCE = "https://vault.example"


def reviews(clock: Clock) -> TokenReviews:
    static = Authenticator({"static-token": User("static", ("ops",), "u-1")})
    return TokenReviews(Union(static, [authenticator(clock)], [DEFAULT_ISSUER]))


def review(clock: Clock, token: Any, audiences: Any = None, namespace: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"token": token}
    if audiences is not None:
        spec["audiences"] = audiences
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
    return asyncio.run(reviews(clock).create(ASKER, namespace, body))["status"]  # type: ignore[no-any-return]


def test_a_service_account_token_authenticates_as_its_service_account() -> None:
    clock = Clock()
    status = review(clock, issue(clock))
    assert status["authenticated"] is True
    user = status["user"]
    assert user["username"] == "system:serviceaccount:web:builder"
    assert user["uid"] == "sa-uid-1"
    assert user["groups"] == ["system:serviceaccounts", "system:serviceaccounts:web", "system:authenticated"]
    assert user["extra"] == {"authentication.kubernetes.io/credential-id": ["JTI=j1"]}
    assert status["audiences"] == [DEFAULT_ISSUER]  # none asked: the apiserver's own


def test_a_static_token_authenticates_for_the_apiservers_audiences_only() -> None:
    clock = Clock()
    status = review(clock, "static-token")
    assert status == {
        "authenticated": True,
        "user": {"username": "static", "uid": "u-1", "groups": ["ops", "system:authenticated"]},
        "audiences": [DEFAULT_ISSUER],
    }
    assert review(clock, "static-token", [OTHER_AUDIENCE]) == {"user": {}}


def test_unknown_expired_or_tampered_tokens_are_not_authenticated_and_say_nothing_more() -> None:
    clock = Clock()
    token = issue(clock, seconds=600)
    tampered = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    for bad in ("nope", "a.b.c", tampered, "caf\u00e9.x.y", "\u2603"):
        assert review(clock, bad) == {"user": {}}, bad  # kube's JSON omits `authenticated` false
    clock.now += 600 + LEEWAY_SECONDS + 1
    assert review(clock, token) == {"user": {}}


def test_audiences_are_the_intersection_of_the_asked_and_the_tokens() -> None:
    clock = Clock()
    token = issue(clock, audiences=(OTHER_AUDIENCE, "https://b"))
    assert review(clock, token) == {"user": {}}  # not meant for the apiserver
    status = review(clock, token, ["https://b", "https://c", OTHER_AUDIENCE])
    assert status["authenticated"] is True
    assert status["audiences"] == [OTHER_AUDIENCE, "https://b"]
    assert review(clock, token, ["https://c"]) == {"user": {}}
    # the verified token is cached: a later request-style check still wants the apiserver's audience
    assert asyncio.run(authenticator(clock).authenticate_token(token)) is None


@pytest.mark.parametrize("token", ["", None])
def test_an_empty_token_is_a_bad_request(token: Any) -> None:
    with pytest.raises(errors.StatusError) as caught:
        review(Clock(), token)
    assert (caught.value.code, caught.value.reason) == (400, "BadRequest")
    assert str(caught.value.message) == "token is required for TokenReview in authentication"


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"token": 5}, "spec.token"), ({"token": "t", "audiences": "a"}, "spec.audiences"), ("x", "spec")],
)
def test_malformed_specs_are_refused_naming_the_field(spec: Any, field: str) -> None:
    body = {"spec": spec}
    with pytest.raises(errors.StatusError) as caught:
        asyncio.run(reviews(Clock()).create(ASKER, None, body))
    assert caught.value.code == 422 and field in str(caught.value.message)


def test_a_namespace_is_refused() -> None:
    with pytest.raises(errors.StatusError) as caught:
        review(Clock(), "static-token", namespace="web")
    assert caught.value.code == 400 and "namespace is not allowed" in str(caught.value.message)
