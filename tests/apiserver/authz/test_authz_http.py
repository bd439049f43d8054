"""RBAC and the Node authorizer through real HTTP requests (in-process app, in-memory storage):
who may do what, the 403 wording, escalation prevention, aggregation, reviews, impersonation
and anonymous requests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from apiserver.auth.user import User
from tests.apiserver.gates_support import ClientFor, in_process, role_binding

RB = "/apis/rbac.authorization.k8s.io/v1"
USERS = {
    "ann": User("ann"),
    "bob": User("bob", ("devs",)),
    "carol": User("carol"),
    "n1": User("system:node:n1", ("system:nodes",)),
}


def run(scenario: Callable[[ClientFor], Awaitable[None]], **options: Any) -> None:
    async def go() -> None:
        async with in_process(USERS, **options) as client:
            await scenario(client)

    asyncio.run(go())


async def setup_namespaces(admin: httpx.AsyncClient) -> None:
    for ns in ("web", "other"):
        assert (await admin.post("/api/v1/namespaces", json={"metadata": {"name": ns}})).status_code == 201
    bindings = [
        role_binding("ann-view", "ClusterRole", "view", [("User", "ann")]),
        role_binding("devs-edit", "ClusterRole", "edit", [("Group", "devs")]),
        role_binding("carol-admin", "ClusterRole", "admin", [("User", "carol")]),
    ]
    for b in bindings:
        r = await admin.post(f"{RB}/namespaces/web/rolebindings", json=b)
        assert r.status_code == 201, r.text


async def until_code(call: Callable[[], Awaitable[httpx.Response]], code: int, seconds: float = 5.0) -> float:
    """Seconds until `call` answers `code` (the watch caches apply writes asynchronously)."""
    started = time.monotonic()
    while True:
        r = await call()
        if r.status_code == code:
            return time.monotonic() - started
        assert time.monotonic() - started < seconds, f"still {r.status_code} after {seconds} s: {r.text}"
        await asyncio.sleep(0.01)


def test_view_in_one_namespace_reads_there_only_and_never_secrets() -> None:
    async def scenario(client: ClientFor) -> None:
        admin, ann = client("admin"), client("ann")
        await setup_namespaces(admin)
        await until_code(lambda: ann.get("/api/v1/namespaces/web/pods"), 200)
        assert (
            await ann.get("/api/v1/namespaces/web/pods", params={"watch": "1", "timeoutSeconds": "1"})
        ).status_code == 200
        assert (await ann.get("/api/v1/namespaces/web/configmaps/kube-root-ca.crt")).status_code in (200, 404)
        denied = await ann.get("/api/v1/namespaces/other/pods")
        assert denied.status_code == 403
        assert denied.json()["message"] == (
            'pods is forbidden: User "ann" cannot list resource "pods" in API group "" in the namespace "other"'
        )
        assert denied.json()["reason"] == "Forbidden" and denied.json()["details"] == {"kind": "pods"}
        secret = await ann.get("/api/v1/namespaces/web/secrets/s")
        assert secret.status_code == 403
        assert secret.json()["message"] == (
            'secrets "s" is forbidden: User "ann" cannot get resource "secrets" in API group "" in the namespace "web"'
        )
        assert (await ann.get("/api/v1/pods")).json()["message"].endswith("at the cluster scope")
        made = await ann.post("/api/v1/namespaces/web/configmaps", json={"metadata": {"name": "c"}})
        assert made.status_code == 403
        nodes = await ann.get("/api/v1/nodes/n1")
        assert nodes.json()["message"] == (
            'nodes "n1" is forbidden: User "ann" cannot get resource "nodes" in API group "" at the cluster scope'
        )
        metrics = await ann.get("/metrics")
        assert metrics.status_code == 403
        assert metrics.json()["message"] == 'forbidden: User "ann" cannot get path "/metrics"'
        assert (await ann.get("/version")).status_code == 200  # system:public-info-viewer
        assert (await ann.get("/api/v1")).status_code == 200  # system:discovery

    run(scenario)


def test_edit_writes_workloads_but_cannot_touch_rbac() -> None:
    async def scenario(client: ClientFor) -> None:
        admin, bob = client("admin"), client("bob")
        await setup_namespaces(admin)
        await until_code(lambda: bob.post("/api/v1/namespaces/web/configmaps", json={"metadata": {"name": "c"}}), 201)
        assert (await bob.get("/api/v1/namespaces/web/secrets")).status_code == 200
        r = await bob.post(
            f"{RB}/namespaces/web/rolebindings", json=role_binding("x", "ClusterRole", "view", [("User", "eve")])
        )
        assert r.status_code == 403
        assert r.json()["message"] == (
            'rolebindings.rbac.authorization.k8s.io is forbidden: User "bob" cannot create resource "rolebindings" '
            'in API group "rbac.authorization.k8s.io" in the namespace "web"'
        )

    run(scenario)


def test_admin_cannot_grant_what_it_does_not_hold() -> None:
    async def scenario(client: ClientFor) -> None:
        admin, carol = client("admin"), client("carol")
        await setup_namespaces(admin)
        ok_role = {
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
        }
        await until_code(lambda: carol.post(f"{RB}/namespaces/web/roles", json=ok_role), 201)
        too_much = {
            "metadata": {"name": "node-reader"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}],
        }
        r = await carol.post(f"{RB}/namespaces/web/roles", json=too_much)
        assert r.status_code == 403, r.text
        assert r.json()["message"].startswith(
            'roles.rbac.authorization.k8s.io "node-reader" is forbidden: user "carol" '
            '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'
        )
        assert "Resources:['nodes']" in r.json()["message"]
        bind_admin = role_binding("boss", "ClusterRole", "cluster-admin", [("User", "carol")])
        assert (await carol.post(f"{RB}/namespaces/web/rolebindings", json=bind_admin)).status_code == 403
        bind_view = role_binding("dave-view", "ClusterRole", "view", [("User", "dave")])
        assert (await carol.post(f"{RB}/namespaces/web/rolebindings", json=bind_view)).status_code == 201
        # `bind` on a role lets a user bind it without holding its rules
        binder = {
            "metadata": {"name": "binder"},
            "rules": [
                {
                    "apiGroups": ["rbac.authorization.k8s.io"],
                    "resources": ["clusterroles"],
                    "verbs": ["bind"],
                    "resourceNames": ["cluster-admin"],
                }
            ],
        }
        assert (await admin.post(f"{RB}/namespaces/web/roles", json=binder)).status_code == 201
        assert (
            await admin.post(
                f"{RB}/namespaces/web/rolebindings",
                json=role_binding("carol-binder", "Role", "binder", [("User", "carol")]),
            )
        ).status_code == 201
        await until_code(lambda: carol.post(f"{RB}/namespaces/web/rolebindings", json=bind_admin), 201)

    run(scenario)


def test_a_kubelet_reads_only_what_its_pods_use() -> None:
    async def scenario(client: ClientFor) -> None:
        admin, n1 = client("admin"), client("n1")
        await setup_namespaces(admin)
        for name in ("s1", "s2"):
            await admin.post("/api/v1/namespaces/web/secrets", json={"metadata": {"name": name}})
        for pod, node, secret in (("p1", "n1", "s1"), ("p2", "n2", "s2")):
            body = {
                "metadata": {"name": pod},
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "c", "image": "busybox"}],
                    "volumes": [{"name": "v", "secret": {"secretName": secret}}],
                },
            }
            assert (await admin.post("/api/v1/namespaces/web/pods", json=body)).status_code == 201
        await until_code(lambda: n1.get("/api/v1/namespaces/web/pods/p1"), 200)
        denied = await n1.get("/api/v1/namespaces/web/pods/p2")
        assert denied.status_code == 403
        assert denied.json()["message"].endswith(": no relationship found between node 'n1' and this object")
        mine = await n1.get("/api/v1/pods", params={"fieldSelector": "spec.nodeName=n1"})
        assert [p["metadata"]["name"] for p in mine.json()["items"]] == ["p1"]
        assert (await n1.get("/api/v1/pods")).status_code == 403
        assert (await n1.get("/api/v1/pods", params={"fieldSelector": "spec.nodeName=n2"})).status_code == 403
        assert (await n1.get("/api/v1/namespaces/web/secrets/s1")).status_code == 200
        assert (await n1.get("/api/v1/namespaces/web/secrets/s2")).status_code == 403
        assert (await n1.get("/api/v1/namespaces/web/secrets")).status_code == 403
        assert (await n1.post("/api/v1/nodes", json={"metadata": {"name": "n1"}})).status_code == 201
        assert (await admin.post("/api/v1/nodes", json={"metadata": {"name": "n2"}})).status_code == 201
        assert (await n1.get("/api/v1/nodes/n2")).status_code == 200
        patch = {"metadata": {"labels": {"x": "y"}}}
        merge = {"Content-Type": "application/merge-patch+json"}
        assert (await n1.patch("/api/v1/nodes/n1", json=patch, headers=merge)).status_code == 200
        assert (await n1.patch("/api/v1/nodes/n2", json=patch, headers=merge)).status_code == 403
        assert (await n1.get("/api/v1/namespaces/kube-node-lease/leases/n2")).status_code == 403

    run(scenario)


def test_an_aggregated_role_picks_up_a_new_rule_at_once() -> None:
    async def scenario(client: ClientFor) -> None:
        admin, ann = client("admin"), client("ann")
        await setup_namespaces(admin)
        await until_code(lambda: ann.get("/api/v1/namespaces/web/pods"), 200)
        assert (await ann.get("/api/v1/namespaces/web/secrets")).status_code == 403
        extra = {
            "metadata": {"name": "view-secrets", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}],
        }
        assert (await admin.post(f"{RB}/clusterroles", json=extra)).status_code == 201
        took = await until_code(lambda: ann.get("/api/v1/namespaces/web/secrets"), 200)
        assert took < 1.0
        # the stored view role shows the new rule too (kube's aggregation controller's work)
        for _ in range(500):
            rules = (await admin.get(f"{RB}/clusterroles/view")).json().get("rules") or []
            if {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]} in rules:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError(f"view's stored rules never showed the secrets rule: {rules}")
        assert any(r["apiGroups"] == [""] and "pods" in r["resources"] and "watch" in r["verbs"] for r in rules)

    run(scenario)


def test_access_reviews_and_whoami() -> None:
    async def scenario(client: ClientFor) -> None:
        admin, ann = client("admin"), client("ann")
        await setup_namespaces(admin)
        await until_code(lambda: ann.get("/api/v1/namespaces/web/pods"), 200)

        async def can(ns: str, verb: str, resource: str) -> dict[str, Any]:
            review = {"spec": {"resourceAttributes": {"namespace": ns, "verb": verb, "resource": resource}}}
            r = await ann.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review)
            assert r.status_code == 201, r.text
            return dict(r.json()["status"])

        assert (await can("web", "list", "pods"))["allowed"] is True
        assert (await can("other", "list", "pods"))["allowed"] is False
        bad = await ann.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json={"spec": {}})
        assert bad.status_code == 422 and bad.json()["details"]["causes"][0]["field"] == "spec.resourceAttributes"
        rules = await ann.post(
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", json={"spec": {"namespace": "web"}}
        )
        status = rules.json()["status"]
        assert {
            "verbs": ["get", "list", "watch"],
            "apiGroups": [""],
            "resources": [
                "configmaps",
                "endpoints",
                "persistentvolumeclaims",
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
            ],
        } in status["resourceRules"]
        assert status["incomplete"] is False
        me = await ann.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json={})
        assert me.status_code == 201
        assert me.json()["status"]["userInfo"] == {"username": "ann", "groups": ["system:authenticated"]}
        # SubjectAccessReview needs its own permission, which ann lacks; the admin has it
        sar = {"spec": {"user": "ann", "resourceAttributes": {"namespace": "web", "verb": "get", "resource": "pods"}}}
        assert (await ann.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=sar)).status_code == 403
        r = await admin.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=sar)
        assert r.json()["status"]["allowed"] is True
        no_subject = await admin.post(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews", json={"spec": {"resourceAttributes": {}}}
        )
        assert no_subject.status_code == 422
        assert (await admin.get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")).status_code == 405
        as_table = {"accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
        review = {"spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}}
        r = await admin.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", json=review, headers=as_table)
        assert (r.status_code, r.json()["reason"]) == (406, "NotAcceptable")  # an answer has no Table

    run(scenario)


def test_impersonation_needs_the_impersonate_verb() -> None:
    async def scenario(client: ClientFor) -> None:
        admin, ann = client("admin"), client("ann")
        await setup_namespaces(admin)
        as_ann = {"Impersonate-User": "ann"}
        await until_code(lambda: admin.get("/api/v1/namespaces/web/pods", headers=as_ann), 200)
        r = await admin.get("/api/v1/namespaces/other/pods", headers=as_ann)
        assert r.status_code == 403 and 'User "ann" cannot list' in r.json()["message"]
        me = await admin.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", json={}, headers=as_ann)
        assert me.json()["status"]["userInfo"]["username"] == "ann"
        refused = await ann.get("/api/v1/namespaces/web/pods", headers={"Impersonate-User": "bob"})
        assert refused.status_code == 403
        assert refused.json()["message"] == (
            'users "bob" is forbidden: User "ann" cannot impersonate resource "users" in API group "" '
            "at the cluster scope"
        )
        groups_alone = await admin.get("/api/v1/pods", headers={"Impersonate-Group": "devs"})
        assert groups_alone.status_code == 400
        too_long = await admin.get("/api/v1/pods", headers={"Impersonate-User": "x" * 2000})
        assert too_long.status_code == 400 and "longer than 1024 bytes" in too_long.json()["message"]
        not_utf8 = await admin.get("/api/v1/pods", headers={"Impersonate-User": b"\xff\xfe"})
        assert not_utf8.status_code == 400 and "not UTF-8" in not_utf8.json()["message"]
        many = [("Impersonate-User", "ann")] + [("Impersonate-Group", f"g{i}") for i in range(100)]
        assert (await admin.get("/api/v1/pods", headers=many)).status_code == 400
        nobody = await client(None).get("/api/v1/pods", headers={"Impersonate-User": "admin"})
        assert nobody.status_code == 401  # no credentials: impersonation is never considered

    run(scenario)


def test_anonymous_requests() -> None:
    async def refused(client: ClientFor) -> None:
        r = await client(None).get("/version")
        assert r.status_code == 401 and r.json()["reason"] == "Unauthorized"

    async def allowed(client: ClientFor) -> None:
        anyone = client(None)
        assert (await anyone.get("/version")).status_code == 200
        r = await anyone.get("/api/v1/namespaces/default/pods")
        assert r.status_code == 403 and 'User "system:anonymous" cannot list' in r.json()["message"]

    run(refused)
    run(allowed, anonymous=True)
