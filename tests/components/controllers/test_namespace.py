"""The namespace controller: its pure parts, and against a real apiserver a deleted namespace
is emptied (content with a finalizer holds it, reported in its conditions) and then goes."""

from __future__ import annotations

from components.client import kubeconfig
from components.client.rest import NotFoundError, RestClient
from components.controllers._infra_namespace import (
    CONDITION_TYPES,
    CONTENT_REMAINING,
    FINALIZERS_REMAINING,
    Outcome,
    Target,
    conditions,
    preferred_once,
    targets,
)
from components.controllers.namespace import NamespaceController
from components.controllers.runner import running
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_endpoints_support import namespace, pod, run, until


def test_targets_are_namespaced_listable_deletable_and_not_subresources() -> None:
    doc = {
        "resources": [
            {"name": "pods", "namespaced": True, "verbs": ["list", "delete", "deletecollection"]},
            {"name": "pods/status", "namespaced": True, "verbs": ["get", "patch"]},
            {"name": "nodes", "namespaced": False, "verbs": ["list", "delete"]},
            {"name": "bindings", "namespaced": True, "verbs": ["create"]},
            {"name": "widgets", "namespaced": True, "verbs": ["list", "delete"]},
        ]
    }
    assert targets("v1", doc) == [Target("", "v1", "pods", True), Target("", "v1", "widgets", False)]
    found = targets(
        "autoscaling/v2", {"resources": [{"name": "hpas", "namespaced": True, "verbs": ["list", "delete"]}]}
    )
    again = targets(
        "autoscaling/v1", {"resources": [{"name": "hpas", "namespaced": True, "verbs": ["list", "delete"]}]}
    )
    assert preferred_once(found + again) == found
    assert found[0].group_resource == "hpas.autoscaling"


def test_conditions_say_what_remains_and_keep_transition_times() -> None:
    outcome = Outcome(remaining={"configmaps": 2}, finalizers={"example.com/hold": 1})
    first = conditions([], outcome, "T1")
    by_type = {c["type"]: c for c in first}
    assert set(by_type) == set(CONDITION_TYPES)
    assert by_type[CONTENT_REMAINING]["status"] == "True"
    assert by_type[CONTENT_REMAINING]["reason"] == "SomeResourcesRemain"
    assert by_type[CONTENT_REMAINING]["message"] == "Some resources are remaining: configmaps has 2 resource instances"
    assert by_type[FINALIZERS_REMAINING]["message"] == (
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    )
    assert by_type["NamespaceDeletionDiscoveryFailure"]["reason"] == "ResourcesDiscovered"
    later = {c["type"]: c for c in conditions(first, Outcome(), "T2")}
    assert later[CONTENT_REMAINING]["status"] == "False"
    assert later[CONTENT_REMAINING]["lastTransitionTime"] == "T2"
    assert later["NamespaceDeletionDiscoveryFailure"]["lastTransitionTime"] == "T1"
    assert conditions(conditions([], Outcome(), "T1"), Outcome(), "T3") == conditions([], Outcome(), "T1")


def test_a_deleted_namespace_is_emptied_and_then_goes(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            ns = await namespace(client, "ns-doomed")
            keep = await namespace(client, "ns-kept")
            for n in (ns, keep):
                await client.create(f"/api/v1/namespaces/{n}/configmaps", {"metadata": {"name": "plain"}})
            await client.create(
                f"/api/v1/namespaces/{ns}/configmaps",
                {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}},
            )
            await client.create(f"/api/v1/namespaces/{ns}/secrets", {"metadata": {"name": "s"}})
            await pod(client, ns, "p", {"app": "x"})
            await client.create(
                f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", {"metadata": {"name": "l"}, "spec": {}}
            )
            await client.delete(f"/api/v1/namespaces/{ns}")
            async with running(client, [NamespaceController]):

                async def held_only() -> bool:
                    got = await client.get(f"/api/v1/namespaces/{ns}")
                    by_type = {c["type"]: c for c in (got.get("status") or {}).get("conditions") or []}
                    c = by_type.get(FINALIZERS_REMAINING)
                    return c is not None and c["status"] == "True"

                await until(held_only)
                got = await client.get(f"/api/v1/namespaces/{ns}")
                assert got["status"]["phase"] == "Terminating"
                by_type = {c["type"]: c for c in got["status"]["conditions"]}
                assert by_type[CONTENT_REMAINING]["message"] == (
                    "Some resources are remaining: configmaps has 1 resource instances"
                )
                names = [
                    i["metadata"]["name"] for i in (await client.get(f"/api/v1/namespaces/{ns}/configmaps"))["items"]
                ]
                assert names == ["held"]
                for path in ("secrets", "pods", "serviceaccounts"):
                    assert (await client.get(f"/api/v1/namespaces/{ns}/{path}"))["items"] == []
                leases = await client.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases")
                assert leases["items"] == []

                # the finalizer's owner lets go: the namespace empties and goes
                await client.patch(f"/api/v1/namespaces/{ns}/configmaps/held", {"metadata": {"finalizers": None}})

                async def gone() -> bool:
                    try:
                        await client.get(f"/api/v1/namespaces/{ns}")
                        return False
                    except NotFoundError:
                        return True

                await until(gone)
                # another namespace is untouched
                assert (await client.get(f"/api/v1/namespaces/{keep}/configmaps/plain"))["metadata"]["name"] == "plain"
                assert (await client.get(f"/api/v1/namespaces/{keep}"))["status"]["phase"] == "Active"

    run(go)
