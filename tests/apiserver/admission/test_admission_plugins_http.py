"""The built-in admission plugins through real HTTP requests (in-process app, in-memory storage):
PodSecurity, NamespaceLifecycle, Priority, TaintNodesByCondition, DefaultTolerationSeconds, RuntimeClass and
NodeRestriction, with kube's status codes and words."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from apiserver.auth.user import User
from tests.apiserver.gates_support import ClientFor, in_process
from tests.support.wait import eventually

USERS = {"n1": User("system:node:n1", ("system:nodes", "system:authenticated"))}
MERGE = {"content-type": "application/merge-patch+json"}
PSA = "pod-security.kubernetes.io/"


def run(scenario: Callable[[ClientFor], Awaitable[None]], **options: Any) -> None:
    async def go() -> None:
        async with in_process(USERS, **options) as client:
            await scenario(client)

    asyncio.run(go())


def pod(name: str = "p", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


async def namespace(admin: httpx.AsyncClient, name: str, **labels: str) -> None:
    r = await admin.post("/api/v1/namespaces", json={"metadata": {"name": name, "labels": labels}})
    assert r.status_code == 201, r.text


def warnings(r: httpx.Response) -> list[str]:
    out = []
    for h in r.headers.get_list("warning"):
        assert h.startswith('299 - "') and h.endswith('"'), h
        out.append(h[len('299 - "') : -1].replace('\\"', '"'))
    return out


RESTRICTED_MESSAGE = (
    'pods "p" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
    '(container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities '
    '(container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container '
    '"c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set '
    'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
)


def test_pod_security_enforces_and_warns_as_kube() -> None:
    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        await namespace(admin, "locked", **{PSA + "enforce": "restricted"})
        r = await admin.post("/api/v1/namespaces/locked/pods", json=pod())
        assert r.status_code == 403
        body = r.json()
        assert (body["reason"], body["message"]) == ("Forbidden", RESTRICTED_MESSAGE)
        assert body["details"] == {"name": "p", "kind": "pods"}
        assert warnings(r) == []  # no warning on a refused request
        good = pod(securityContext={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}})
        good["spec"]["containers"][0]["securityContext"] = {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        }
        assert (await admin.post("/api/v1/namespaces/locked/pods", json=good)).status_code == 201
        # templates are never refused: warn follows enforce, so a deployment gets the warning
        deployment = {
            "metadata": {"name": "d"},
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"hostNetwork": True, **pod()["spec"]}},
            },
        }
        r = await admin.post("/apis/apps/v1/namespaces/locked/deployments", json=deployment)
        assert r.status_code == 201, r.text
        assert warnings(r) == [
            'would violate PodSecurity "restricted:latest": host namespaces (hostNetwork=true), '
            + RESTRICTED_MESSAGE.split('"restricted:latest": ', 1)[1]
        ]
        await namespace(admin, "watched", **{PSA + "warn": "baseline", PSA + "warn-version": "v1.30"})
        r = await admin.post("/api/v1/namespaces/watched/pods", json=pod(hostPID=True))
        assert r.status_code == 201
        assert warnings(r) == ['would violate PodSecurity "baseline:v1.30": host namespaces (hostPID=true)']
        assert warnings(await admin.post("/api/v1/namespaces/watched/pods", json=pod("q"))) == []

    run(scenario)


def test_pod_security_namespace_labels_updates_and_existing_pods() -> None:
    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        r = await admin.post("/api/v1/namespaces", json={"metadata": {"name": "x", "labels": {PSA + "enforce": "max"}}})
        assert r.status_code == 422
        assert r.json()["message"] == (
            'Namespace "x" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "max": '
            "must be one of privileged, baseline, restricted"
        )
        await namespace(admin, "apps")
        for name in ("a", "b", "c"):
            r = await admin.post("/api/v1/namespaces/apps/pods", json=pod(name, hostNetwork=name != "c"))
            assert r.status_code == 201
        await eventually(lambda: _count_pods(admin, "apps", 3))
        r = await admin.patch(
            "/api/v1/namespaces/apps", json={"metadata": {"labels": {PSA + "enforce": "baseline"}}}, headers=MERGE
        )
        assert r.status_code == 200, r.text
        await eventually(lambda: _labelled(admin, "apps", PSA + "enforce=baseline"))
        assert warnings(r) == [
            'existing pods in namespace "apps" violate the new PodSecurity enforce level "baseline:latest"',
            "a (and 1 other pod): host namespaces",
        ]
        # a metadata-only update of a violating pod passes; a new image is checked
        r = await admin.patch(
            "/api/v1/namespaces/apps/pods/a", json={"metadata": {"labels": {"x": "y"}}}, headers=MERGE
        )
        assert r.status_code == 200, r.text
        image = {"spec": {"containers": [{"name": "c", "image": "nginx:2"}]}}
        r = await admin.patch(
            "/api/v1/namespaces/apps/pods/a",
            json=image,
            headers={"content-type": "application/strategic-merge-patch+json"},
        )
        assert r.status_code == 403
        assert r.json()["message"] == (
            'pods "a" is forbidden: violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)'
        )
        # lowering the level warns about nothing
        r = await admin.patch(
            "/api/v1/namespaces/apps", json={"metadata": {"labels": {PSA + "enforce": "privileged"}}}, headers=MERGE
        )
        assert (r.status_code, warnings(r)) == (200, [])

    run(scenario)


async def _labelled(admin: httpx.AsyncClient, ns: str, selector: str) -> bool:
    """Whether the namespaces cache (what admission reads) has the label yet."""
    found = await admin.get("/api/v1/namespaces", params={"labelSelector": selector})
    return ns in [n["metadata"]["name"] for n in found.json()["items"]]


async def _count_pods(admin: httpx.AsyncClient, ns: str, n: int) -> bool:
    return len((await admin.get(f"/api/v1/namespaces/{ns}/pods")).json()["items"]) == n


def test_namespace_lifecycle() -> None:
    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        r = await admin.post("/api/v1/namespaces/ghost/configmaps", json={"metadata": {"name": "c"}})
        assert (r.status_code, r.json()["message"]) == (404, 'namespaces "ghost" not found')
        # a namespace just created is found at once (a live read when the cache lags)
        await namespace(admin, "fresh")
        assert (
            await admin.post("/api/v1/namespaces/fresh/configmaps", json={"metadata": {"name": "c"}})
        ).status_code == 201
        assert (await admin.delete("/api/v1/namespaces/fresh")).status_code == 200
        r = await admin.post("/api/v1/namespaces/fresh/configmaps", json={"metadata": {"name": "d"}})
        assert r.status_code == 403
        assert r.json()["message"] == (
            'configmaps "d" is forbidden: '
            "unable to create new content in namespace fresh because it is being terminated"
        )
        assert r.json()["details"]["causes"] == [
            {
                "reason": "NamespaceTerminating",
                "message": "namespace fresh is being terminated",
                "field": "metadata.namespace",
            }
        ]
        # updates in a terminating namespace still pass
        r = await admin.patch("/api/v1/namespaces/fresh/configmaps/c", json={"data": {"k": "v"}}, headers=MERGE)
        assert r.status_code == 200
        for name in ("default", "kube-system", "kube-public"):
            r = await admin.delete(f"/api/v1/namespaces/{name}")
            assert (r.status_code, r.json()["message"]) == (
                403,
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
            )

    run(scenario)


def test_priority_and_default_tolerations() -> None:
    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        r = await admin.post("/api/v1/namespaces/default/pods", json=pod())
        spec = r.json()["spec"]
        assert (spec["priority"], spec["preemptionPolicy"]) == (0, "PreemptLowerPriority")
        assert spec["tolerations"] == [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ]
        own = [
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 5,
            }
        ]
        r = await admin.post(
            "/api/v1/namespaces/default/pods", json=pod("q", tolerations=own, priorityClassName="system-node-critical")
        )
        spec = r.json()["spec"]
        assert spec["priority"] == 2000001000
        assert [t["key"] for t in spec["tolerations"]] == [
            "node.kubernetes.io/unreachable",
            "node.kubernetes.io/not-ready",
        ]
        r = await admin.post("/api/v1/namespaces/default/pods", json=pod("r", priorityClassName="gold"))
        assert (r.status_code, r.json()["message"]) == (
            403,
            'pods "r" is forbidden: no PriorityClass with name gold was found',
        )
        r = await admin.post("/api/v1/namespaces/default/pods", json=pod("s", priority=7))
        assert r.json()["message"] == (
            'pods "s" is forbidden: the integer value of priority (7) must not be provided in pod spec; '
            "priority admission controller computed 0 from the given PriorityClass name"
        )

    run(scenario)


def test_node_restriction_and_not_ready_taint() -> None:
    async def scenario(client: ClientFor) -> None:
        admin, n1 = client("admin"), client("n1")
        r = await n1.post("/api/v1/nodes", json={"metadata": {"name": "n2"}})
        assert (r.status_code, r.json()["message"]) == (
            403,
            'nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"',
        )
        labels = {"node-restriction.kubernetes.io/pool": "a", "kubernetes.io/role": "x", "kubernetes.io/os": "linux"}
        r = await n1.post("/api/v1/nodes", json={"metadata": {"name": "n1", "labels": labels}})
        assert r.json()["message"] == (
            'nodes "n1" is forbidden: node "n1" is not allowed to set the following labels: '
            "kubernetes.io/role, node-restriction.kubernetes.io/pool"
        )
        r = await n1.post("/api/v1/nodes", json={"metadata": {"name": "n1", "labels": {"kubernetes.io/os": "linux"}}})
        assert r.status_code == 201, r.text
        assert r.json()["spec"]["taints"] == [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
        r = await n1.patch("/api/v1/nodes/n1", json={"spec": {"taints": []}}, headers=MERGE)
        assert r.json()["message"] == 'nodes "n1" is forbidden: node "n1" is not allowed to modify taints'
        r = await n1.patch(
            "/api/v1/nodes/n1", json={"metadata": {"labels": {"node.kubernetes.io/x": "1"}}}, headers=MERGE
        )
        assert r.status_code == 200, r.text
        lease = {"metadata": {"name": "n2"}, "spec": {"holderIdentity": "n2"}}
        r = await n1.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", json=lease)
        assert (r.status_code, r.json()["message"]) == (
            403,
            'leases.coordination.k8s.io "n2" is forbidden: can only access node lease with the same name as the '
            "requesting node",
        )
        lease["metadata"]["name"] = "n1"
        r = await n1.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", json=lease)
        assert r.status_code == 201, r.text
        # pod status: only pods bound to n1, and not their labels
        bound = pod("mine", nodeName="n1")
        bound["metadata"]["labels"] = {"a": "1"}
        assert (await admin.post("/api/v1/namespaces/default/pods", json=bound)).status_code == 201
        await eventually(lambda: _got(n1, "/api/v1/namespaces/default/pods/mine"))
        status = {"status": {"phase": "Running"}}
        r = await n1.patch("/api/v1/namespaces/default/pods/mine/status", json=status, headers=MERGE)
        assert r.status_code == 200, r.text
        # pods/status takes labels from the request (kube's podStatusStrategy); NodeRestriction refuses it
        relabel = {"metadata": {"labels": {"a": "2"}}, **status}
        r = await n1.patch("/api/v1/namespaces/default/pods/mine/status", json=relabel, headers=MERGE)
        assert (r.status_code, r.json()["message"]) == (
            403,
            'pods "mine" is forbidden: node "n1" cannot update labels through pod status',
        )

    run(scenario)


async def _got(c: httpx.AsyncClient, path: str) -> bool:
    return (await c.get(path)).status_code == 200


def test_runtime_class_refuses_an_unknown_class_and_gives_its_overhead() -> None:
    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        r = await admin.post("/api/v1/namespaces/default/pods", json=pod("u", runtimeClassName="nope"))
        assert (r.status_code, r.json()["reason"], r.json()["message"]) == (
            403,
            "Forbidden",
            'pods "u" is forbidden: pod rejected: RuntimeClass "nope" not found',
        )
        rc = {"metadata": {"name": "sandboxed"}, "handler": "runsc", "overhead": {"podFixed": {"cpu": "100m"}}}
        r = await admin.post("/apis/node.k8s.io/v1/runtimeclasses", json=rc)
        assert r.status_code == 201, r.text
        r = await admin.post("/api/v1/namespaces/default/pods", json=pod("v", runtimeClassName="sandboxed"))
        assert r.status_code == 201, r.text
        assert r.json()["spec"]["overhead"] == {"cpu": "100m"}

    run(scenario)
