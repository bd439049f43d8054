"""The endpointslicemirroring controller against a real apiserver, walking kube's conformance
spec ("should mirror a custom Endpoints resource through create update and delete"), then a
Service that gains a selector: its mirrored slices go."""

from __future__ import annotations

import asyncio

from components.client import kubeconfig
from components.client.rest import RestClient
from components.controllers.endpointslicemirroring import EndpointSliceMirroringController
from components.controllers.runner import running
from machinery.objects import Obj
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_endpoints_support import namespace, run, until

WAIT_S = 12.0  # the conformance spec's own bound per step
NAME = "example-custom-endpoints"


async def slices(client: RestClient, ns: str) -> list[Obj]:
    got = await client.get(
        f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
        {"labelSelector": f"kubernetes.io/service-name={NAME}"},
    )
    return list(got.get("items") or [])


def only(found: list[Obj], ip: str, port: int) -> Obj | None:
    """The one slice, when it holds just `ip` on just `port`."""
    if len(found) != 1:
        return None
    (s,) = found
    if [p.get("port") for p in s.get("ports") or []] != [port]:
        return None
    if [e.get("addresses") for e in s.get("endpoints") or []] != [[ip]]:
        return None
    return s


def endpoints(ip: str, port: int) -> Obj:
    return {"metadata": {"name": NAME}, "subsets": [{"ports": [{"port": port}], "addresses": [{"ip": ip}]}]}


def test_mirrors_a_custom_endpoints_through_create_update_and_delete(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            ns = await namespace(client, "mirror")
            services = f"/api/v1/namespaces/{ns}/services"
            eps = f"/api/v1/namespaces/{ns}/endpoints"
            await client.create(
                services,
                {"metadata": {"name": NAME}, "spec": {"ports": [{"name": "example", "port": 80, "protocol": "TCP"}]}},
            )
            async with running(client, [EndpointSliceMirroringController]):
                made = await client.create(eps, endpoints("10.1.2.3", 80))

                async def mirrored(ip: str, port: int) -> Obj | None:
                    return only(await slices(client, ns), ip, port)

                first = await until(lambda: mirrored("10.1.2.3", 80), WAIT_S)
                meta = first["metadata"]
                assert meta["labels"]["endpointslice.kubernetes.io/managed-by"] == (
                    "endpointslicemirroring-controller.k8s.io"
                )
                assert first["addressType"] == "IPv4"
                assert first["endpoints"][0]["conditions"] == {"ready": True}
                (owner,) = meta["ownerReferences"]
                assert (owner["kind"], owner["name"], owner["uid"]) == ("Endpoints", NAME, made["metadata"]["uid"])
                # as wanted, it is left alone (its own watch event does not make it written again)
                await asyncio.sleep(1.0)
                assert [s["metadata"]["resourceVersion"] for s in await slices(client, ns)] == [meta["resourceVersion"]]

                # the address and the port change: the same slice follows (updated in place)
                await client.replace(f"{eps}/{NAME}", {**made, "subsets": endpoints("10.2.3.4", 8080)["subsets"]})
                moved = await until(lambda: mirrored("10.2.3.4", 8080), WAIT_S)
                assert moved["metadata"]["name"] == meta["name"]

                await client.delete(f"{eps}/{NAME}")
                await until(lambda: _none(client, ns), WAIT_S)

                # mirrored again, then the service gains a selector: not ours to mirror any more
                await client.create(eps, endpoints("10.3.4.5", 80))
                await until(lambda: mirrored("10.3.4.5", 80), WAIT_S)
                await client.patch(f"{services}/{NAME}", {"spec": {"selector": {"app": "x"}}})
                await until(lambda: _none(client, ns), WAIT_S)

    run(go)


async def _none(client: RestClient, ns: str) -> bool:
    return not await slices(client, ns)
