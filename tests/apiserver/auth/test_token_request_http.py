"""TokenRequest and service-account tokens through real HTTP requests (in-process app, in-memory
storage): `POST .../serviceaccounts/NAME/token`, its defaults and errors as kube words them, the
token authenticating as the service account (whoami, RBAC), expiry with the injected clock, a
deleted-and-recreated account, pod binding, discovery of the subresource, and the issuer's
OIDC documents."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver import errors
from apiserver.auth.serviceaccount_setup import ServiceAccountTokenSettings
from apiserver.auth.serviceaccount_tokens import DEFAULT_ISSUER, LEEWAY_SECONDS, TokenIssuer
from apiserver.auth.token_request import TokenRequests
from apiserver.protobuf import decode_body, encode_object
from tests.apiserver.gates_support import ClientFor, in_process, role_binding

NS = "web"
TOKEN_URL = f"/api/v1/namespaces/{NS}/serviceaccounts/builder/token"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
WHOAMI_BODY = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def run(scenario: Callable[[ClientFor], Awaitable[None]], **options: Any) -> None:
    async def go() -> None:
        async with in_process({}, **options) as client:
            admin = client("admin")
            r = await admin.post("/api/v1/namespaces", json={"metadata": {"name": NS}})
            assert r.status_code == 201, r.text
            r = await admin.post(f"/api/v1/namespaces/{NS}/serviceaccounts", json={"metadata": {"name": "builder"}})
            assert r.status_code == 201, r.text
            await scenario(client)

    asyncio.run(go())


def bearer(client: ClientFor, token: str) -> httpx.AsyncClient:
    return client(token)


async def whoami(c: httpx.AsyncClient) -> httpx.Response:
    return await c.post(WHOAMI, json=WHOAMI_BODY)


async def eventually(call: Callable[[], Awaitable[httpx.Response]], code: int, seconds: float = 10.0) -> httpx.Response:
    """The watch caches apply writes asynchronously: poll (bounded) until `code`."""
    deadline = time.monotonic() + seconds
    while True:
        r = await call()
        if r.status_code == code or time.monotonic() > deadline:
            assert r.status_code == code, r.text
            return r
        await asyncio.sleep(0.01)


def claims(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return decoded


def test_create_token_as_kubectl_asks_and_authenticate_with_it() -> None:
    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        # kubectl 1.31 `create token builder`: the typed client's body, nothing set
        body = {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1", "metadata": {}, "spec": {}}
        r = await admin.post(TOKEN_URL, json=body)
        assert r.status_code == 201, r.text
        answer = r.json()
        assert answer["kind"] == "TokenRequest" and answer["apiVersion"] == "authentication.k8s.io/v1"
        assert answer["metadata"]["name"] == "builder" and answer["metadata"]["namespace"] == NS
        assert answer["spec"] == {"audiences": [DEFAULT_ISSUER], "expirationSeconds": 3600}
        token = answer["status"]["token"]
        c = claims(token)
        assert c["exp"] - c["iat"] == 3600 and c["sub"] == f"system:serviceaccount:{NS}:builder"
        me = (await eventually(lambda: whoami(client(token)), 201)).json()["status"]["userInfo"]
        sa = (await admin.get(f"/api/v1/namespaces/{NS}/serviceaccounts/builder")).json()
        assert me == {
            "username": f"system:serviceaccount:{NS}:builder",
            "uid": sa["metadata"]["uid"],
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}", "system:authenticated"],
            "extra": {"authentication.kubernetes.io/credential-id": [f"JTI={c['jti']}"]},
        }
        # RBAC sees the service account: nothing granted yet, then a RoleBinding to view
        sa_client = client(token)
        assert (await sa_client.get(f"/api/v1/namespaces/{NS}/pods")).status_code == 403
        binding = role_binding("builder-view", "ClusterRole", "view", [("ServiceAccount", "builder")])
        binding["subjects"][0]["namespace"] = NS
        assert (
            await admin.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/rolebindings", json=binding)
        ).status_code == 201
        await eventually(lambda: sa_client.get(f"/api/v1/namespaces/{NS}/pods"), 200)

    run(scenario)


def test_expiry_and_audiences() -> None:
    clock = Clock()

    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        r = await admin.post(TOKEN_URL, json={"spec": {"expirationSeconds": 600}})
        assert r.status_code == 201, r.text
        token = r.json()["status"]["token"]
        await eventually(lambda: whoami(client(token)), 201)
        clock.now += 600 + LEEWAY_SECONDS + 1
        r = await whoami(client(token))
        assert r.status_code == 401 and r.json()["reason"] == "Unauthorized"
        # a token for another audience is not for the apiserver
        r = await admin.post(TOKEN_URL, json={"spec": {"audiences": ["vault"]}})
        assert r.status_code == 201 and r.json()["spec"]["audiences"] == ["vault"]
        assert (await whoami(client(r.json()["status"]["token"]))).status_code == 401

    run(scenario, clock=clock)


def test_a_deleted_and_recreated_service_account_gets_401() -> None:
    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        token = (await admin.post(TOKEN_URL, json={})).json()["status"]["token"]
        await eventually(lambda: whoami(client(token)), 201)
        assert (await admin.delete(f"/api/v1/namespaces/{NS}/serviceaccounts/builder")).status_code == 200
        r = await admin.post(f"/api/v1/namespaces/{NS}/serviceaccounts", json={"metadata": {"name": "builder"}})
        assert r.status_code == 201
        await eventually(lambda: whoami(client(token)), 401)
        fresh = (await admin.post(TOKEN_URL, json={})).json()["status"]["token"]
        await eventually(lambda: whoami(client(fresh)), 201)

    run(scenario)


def test_errors_as_kube_words_them() -> None:
    async def scenario(client: ClientFor) -> None:
        admin = client("admin")

        async def post(body: Any, url: str = TOKEN_URL) -> tuple[int, str]:
            r = await admin.post(url, json=body)
            return r.status_code, r.json().get("message", "")

        assert await post({"spec": {"expirationSeconds": 10}}) == (
            422,
            'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 10:'
            " may not specify a duration less than 10 minutes",
        )
        code, message = await post({"spec": {"expirationSeconds": (1 << 32) + 1}})
        assert code == 422 and message.endswith("may not specify a duration larger than 2^32 seconds")
        assert await post({}, f"/api/v1/namespaces/{NS}/serviceaccounts/nobody/token") == (
            404,
            'serviceaccounts "nobody" not found',
        )
        code, message = await post({"metadata": {"name": "other"}})
        assert code == 422 and 'metadata.name: Invalid value: "other": must match the service account name' in message
        code, message = await post({"spec": {"expirationSeconds": "1h"}})
        assert code == 400 and "spec.expirationSeconds" in message
        code, message = await post({"spec": {"audiences": "vault"}})
        assert code == 400 and "spec.audiences" in message
        code, message = await post({"spec": {"boundObjectRef": {"kind": "ConfigMap", "apiVersion": "v1", "name": "x"}}})
        assert (code, message) == (400, "cannot bind token to object of type /v1, Kind=ConfigMap")
        code, message = await post({"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "nope"}}})
        assert (code, message) == (404, 'pods "nope" not found')
        r = await admin.get(TOKEN_URL)
        assert r.status_code == 405
        assert (await post("not an object"))[0] == 400

    run(scenario)


def test_pod_bound_tokens() -> None:
    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        for name, sa in (("runner", "builder"), ("stranger", "default")):
            pod = {
                "metadata": {"name": name},
                "spec": {"serviceAccountName": sa, "containers": [{"name": "c", "image": "busybox"}]},
            }
            r = await admin.post(f"/api/v1/namespaces/{NS}/pods", json=pod)
            assert r.status_code == 201, r.text
        pod_uid = (await admin.get(f"/api/v1/namespaces/{NS}/pods/runner")).json()["metadata"]["uid"]
        ref = {"kind": "Pod", "apiVersion": "v1", "name": "runner"}
        r = await admin.post(TOKEN_URL, json={"spec": {"boundObjectRef": {**ref, "uid": "wrong"}}})
        assert (
            r.status_code == 409
            and "the UID in the bound object reference (wrong) does not match" in r.json()["message"]
        )
        r = await admin.post(TOKEN_URL, json={"spec": {"boundObjectRef": {**ref, "name": "stranger"}}})
        assert r.status_code == 400
        assert r.json()["message"] == (
            'cannot bind token for serviceaccount "builder" to pod running with different serviceaccount name.'
        )
        r = await admin.post(TOKEN_URL, json={"spec": {"boundObjectRef": {**ref, "uid": pod_uid}}})
        assert r.status_code == 201, r.text
        token = r.json()["status"]["token"]
        me = (await eventually(lambda: whoami(client(token)), 201)).json()["status"]["userInfo"]
        assert me["extra"]["authentication.kubernetes.io/pod-name"] == ["runner"]
        assert me["extra"]["authentication.kubernetes.io/pod-uid"] == [pod_uid]
        # kube's projected-token rollout: 3607 s for the apiserver's audience becomes a year, warnafter at 3607
        r = await admin.post(TOKEN_URL, json={"spec": {"boundObjectRef": ref, "expirationSeconds": 3607}})
        c = claims(r.json()["status"]["token"])
        assert c["exp"] - c["iat"] == 365 * 24 * 3600 and c["kubernetes.io"]["warnafter"] - c["iat"] == 3607
        assert r.json()["spec"]["expirationSeconds"] == 3607
        assert (await admin.delete(f"/api/v1/namespaces/{NS}/pods/runner?gracePeriodSeconds=0")).status_code == 200
        await eventually(lambda: whoami(client(token)), 401)

    run(scenario)


def test_max_expiration_shortens_with_a_warning() -> None:
    capped = ServiceAccountTokenSettings(
        ServiceAccountTokenSettings.ephemeral().signing_key, max_expiration_seconds=7200
    )

    async def scenario(client: ClientFor) -> None:
        r = await client("admin").post(TOKEN_URL, json={"spec": {"expirationSeconds": 86400}})
        assert r.status_code == 201 and r.json()["spec"]["expirationSeconds"] == 7200
        assert r.headers["warning"] == '299 - "requested expiration of 86400 seconds shortened to 7200 seconds"'

    run(scenario, service_accounts=capped)


def test_discovery_lists_the_token_subresource() -> None:
    async def scenario(client: ClientFor) -> None:
        resources = (await client("admin").get("/api/v1")).json()["resources"]
        token = next(r for r in resources if r["name"] == "serviceaccounts/token")
        assert token["kind"] == "TokenRequest" and token["verbs"] == ["create"]
        assert token["group"] == "authentication.k8s.io" and token["version"] == "v1"

    run(scenario)


def test_issuer_discovery_for_service_accounts() -> None:
    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        token = (await admin.post(TOKEN_URL, json={})).json()["status"]["token"]
        sa = client(token)
        config = await eventually(lambda: sa.get("/.well-known/openid-configuration"), 200)
        assert config.json()["issuer"] == DEFAULT_ISSUER
        assert config.json()["jwks_uri"] == "https://apiserver/openid/v1/jwks"
        jwks = await sa.get("/openid/v1/jwks")
        assert jwks.status_code == 200 and jwks.headers["content-type"] == "application/jwk-set+json"
        kid = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))["kid"]
        assert [k["kid"] for k in jwks.json()["keys"]] == [kid]
        # anyone else authenticated is not a service account: RBAC says no
        assert (await client(None).get("/openid/v1/jwks")).status_code == 401

    run(scenario)


# ---------------------------------------------------------------- hostile bodies
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=12), children, max_size=3),
    max_leaves=12,
)
_spec = st.fixed_dictionaries(
    {},
    optional={
        "audiences": _json,
        "expirationSeconds": st.one_of(st.integers(), _json),
        "boundObjectRef": st.one_of(
            _json,
            st.fixed_dictionaries(
                {},
                optional={
                    "kind": st.sampled_from(["Pod", "Secret", "Node", "ConfigMap", ""]) | _json,
                    "apiVersion": st.sampled_from(["v1", "apps/v1", ""]) | _json,
                    "name": st.sampled_from(["p1", "", "missing"]) | _json,
                    "uid": _json,
                },
            ),
        ),
    },
)


@settings(max_examples=200, deadline=None)
@given(st.fixed_dictionaries({}, optional={"apiVersion": _json, "kind": _json, "metadata": _json, "spec": _spec}))
def test_any_body_is_a_token_or_a_status_error(body: dict[str, Any]) -> None:
    objects: dict[tuple[str, str | None, str], dict[str, Any]] = {
        ("serviceaccounts", NS, "builder"): {"metadata": {"name": "builder", "namespace": NS, "uid": "u1"}},
        ("pods", NS, "p1"): {"metadata": {"name": "p1", "namespace": NS, "uid": "u2"}, "spec": {}},
    }

    async def get(resource: str, namespace: str | None, name: str) -> dict[str, Any]:
        found = objects.get((resource, namespace, name))
        if found is None:
            raise errors.not_found(resource, name)
        return found

    settings_ = ServiceAccountTokenSettings.ephemeral()
    requests = TokenRequests(TokenIssuer(settings_.signing_key), [DEFAULT_ISSUER], get)
    try:
        answer = asyncio.run(requests.create(NS, "builder", body))
    except errors.StatusError as e:
        assert e.code in (400, 404, 409, 422)
        return
    assert answer.body["status"]["token"].count(".") == 2


def test_token_review_as_client_go_sends_it() -> None:
    """The conformance test's client-go posts a protobuf TokenReview of the token a pod got and
    reads back the service account's user; the answer is about the token, not the asker."""
    protobuf = "application/vnd.kubernetes.protobuf"

    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        r = await admin.post(TOKEN_URL, json={"spec": {}})
        assert r.status_code == 201, r.text
        token = r.json()["status"]["token"]
        review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}

        async def ask() -> httpx.Response:
            return await admin.post(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                content=encode_object(review),
                headers={"content-type": protobuf, "accept": f"{protobuf}, application/json"},
            )

        r = await eventually(ask, 201)
        assert r.headers["content-type"].startswith(protobuf)
        status = decode_body(r.content)["status"]
        assert status["authenticated"] is True and status["audiences"] == [DEFAULT_ISSUER]
        assert status["user"]["username"] == f"system:serviceaccount:{NS}:builder"
        assert status["user"]["groups"] == [
            "system:serviceaccounts",
            f"system:serviceaccounts:{NS}",
            "system:authenticated",
        ]

    run(scenario)
