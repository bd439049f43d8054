"""The endpoints and endpointslice controllers against a real apiserver: Endpoints and slices
follow pods becoming ready and unready, named ports resolve per pod, services without a
selector are left alone, and a deleted service takes its Endpoints along."""

from __future__ import annotations

import asyncio

from components.client import kubeconfig
from components.client.rest import NotFoundError, RestClient
from components.controllers.endpoints import EndpointsController
from components.controllers.endpointslice import EndpointSliceController
from components.controllers.runner import running
from machinery.objects import Obj
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_endpoints_support import namespace, pod, run, set_pod_status, until

HTTP = [{"name": "http", "containerPort": 8080}]


async def endpoints(client: RestClient, ns: str, name: str) -> Obj | None:
    try:
        return await client.get(f"/api/v1/namespaces/{ns}/endpoints/{name}")
    except NotFoundError:
        return None


def ips(subsets: list[Obj], field: str) -> list[str]:
    return sorted(a["ip"] for s in subsets for a in s.get(field) or [])


async def slices(client: RestClient, ns: str, svc: str) -> list[Obj]:
    got = await client.get(
        f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
        {"labelSelector": f"kubernetes.io/service-name={svc}"},
    )
    return list(got.get("items") or [])


def test_endpoints_and_slices_follow_pods(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            ns = await namespace(client, "ep-follow")
            # a pod that exists before the controllers start
            await pod(client, ns, "a", {"app": "web"}, ports=HTTP)
            await set_pod_status(client, ns, "a", "10.1.0.1", ready=True)
            svc = {
                "metadata": {"name": "web", "labels": {"tier": "front"}},
                "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
            }
            await client.create(f"/api/v1/namespaces/{ns}/services", svc)
            await client.create(
                f"/api/v1/namespaces/{ns}/services",
                {"metadata": {"name": "manual"}, "spec": {"ports": [{"port": 80}]}},
            )
            async with running(client, [EndpointsController, EndpointSliceController]):

                async def state(ready: list[str], not_ready: list[str]) -> bool:
                    ep = await endpoints(client, ns, "web")
                    if ep is None:
                        return False
                    subsets = ep.get("subsets") or []
                    if (ips(subsets, "addresses"), ips(subsets, "notReadyAddresses")) != (ready, not_ready):
                        return False
                    got = {
                        e["addresses"][0]: e["conditions"]["ready"]
                        for s in await slices(client, ns, "web")
                        for e in s.get("endpoints") or []
                    }
                    return got == {**{ip: True for ip in ready}, **{ip: False for ip in not_ready}}

                await until(lambda: state(["10.1.0.1"], []))
                ep = await endpoints(client, ns, "web")
                assert ep is not None
                assert ep["subsets"][0]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
                assert ep["subsets"][0]["addresses"][0]["targetRef"]["name"] == "a"
                assert ep["metadata"]["labels"] == {"tier": "front"}
                (piece,) = await slices(client, ns, "web")
                assert piece["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == (
                    "endpointslice-controller.k8s.io"
                )
                assert piece["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
                assert piece["metadata"]["ownerReferences"][0]["name"] == "web"

                # a second pod: not ready, then ready; its named port is another number
                await pod(client, ns, "b", {"app": "web"}, ports=[{"name": "http", "containerPort": 9090}])
                await set_pod_status(client, ns, "b", "10.1.0.2", ready=False)
                await until(lambda: state(["10.1.0.1"], ["10.1.0.2"]))
                await set_pod_status(client, ns, "b", "10.1.0.2", ready=True)
                await until(lambda: state(["10.1.0.1", "10.1.0.2"], []))
                ep = await endpoints(client, ns, "web")
                assert ep is not None
                assert sorted(s["ports"][0]["port"] for s in ep["subsets"]) == [8080, 9090]
                assert len(await slices(client, ns, "web")) == 2

                # the first becomes unready, then is deleted; a pod without the label is ignored
                await set_pod_status(client, ns, "a", "10.1.0.1", ready=False)
                await until(lambda: state(["10.1.0.2"], ["10.1.0.1"]))
                await pod(client, ns, "other", {"app": "db"}, ports=HTTP)
                await set_pod_status(client, ns, "other", "10.1.0.9", ready=True)
                await client.delete(f"/api/v1/namespaces/{ns}/pods/a")
                await until(lambda: state(["10.1.0.2"], []))
                assert len(await slices(client, ns, "web")) == 1

                # quiet once settled: nothing rewritten
                ep = await endpoints(client, ns, "web")
                assert ep is not None
                before = (
                    ep["metadata"]["resourceVersion"],
                    [s["metadata"]["resourceVersion"] for s in await slices(client, ns, "web")],
                )
                await asyncio.sleep(0.5)
                ep = await endpoints(client, ns, "web")
                assert ep is not None
                after = (
                    ep["metadata"]["resourceVersion"],
                    [s["metadata"]["resourceVersion"] for s in await slices(client, ns, "web")],
                )
                assert before == after

                # the selector-less service got nothing; the deleted service's endpoints go
                assert await endpoints(client, ns, "manual") is None
                assert await slices(client, ns, "manual") == []
                await client.delete(f"/api/v1/namespaces/{ns}/services/web")

                async def gone() -> bool:
                    return await endpoints(client, ns, "web") is None and await slices(client, ns, "web") == []

                await until(gone)

    run(go)


def test_endpoints_without_a_service_written_meanwhile_are_the_users_leftovers_at_start_are_not(
    cluster: ApiserverUnderTest,
) -> None:
    """As kube's: an Endpoints object with no Service, made or changed while the controller runs,
    stays (the conformance lifecycle spec writes one); one found at the controller's start goes."""

    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            ns = await namespace(client, "ep-mine")
            body = {"metadata": {"name": "leftover"}, "subsets": [{"addresses": [{"ip": "10.9.0.1"}]}]}
            await client.create(f"/api/v1/namespaces/{ns}/endpoints", body)
            async with running(client, [EndpointsController]):
                await until(lambda: _gone(client, ns, "leftover"))
                mine = {"metadata": {"name": "mine"}, "subsets": [{"addresses": [{"ip": "10.9.0.2"}]}]}
                await client.create(f"/api/v1/namespaces/{ns}/endpoints", mine)
                held = await endpoints(client, ns, "mine")
                assert held is not None
                held["metadata"]["labels"] = {"changed": "yes"}
                await client.replace(f"/api/v1/namespaces/{ns}/endpoints/mine", held)
                await asyncio.sleep(1.0)
                assert await endpoints(client, ns, "mine") is not None

    run(go)


async def _gone(client: RestClient, ns: str, name: str) -> bool:
    return await endpoints(client, ns, name) is None
