"""The persistentvolume controller: which volume a claim gets (units), and against a real
apiserver: the default class `standard` and the DefaultStorageClass admission, a static
volume bound, a local volume provisioned on the node of the claim's first pod
(WaitForFirstConsumer), a released volume deleted (its node told) or retained as its policy says,
and a bound claim expanded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from components.client.rest import ForbiddenError
from components.controllers import _volume_binding as vb
from components.controllers.persistentvolume import PersistentVolumeController
from components.controllers.runner import running
from machinery import local_volumes
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_replicaset_support import api, make_namespace
from tests.support.wait import eventually


def pv(
    name: str, size: str, cls: str = "", modes: tuple[str, ...] = ("ReadWriteOnce",), **extra: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": extra.pop("labels", {})},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": list(modes),
            "storageClassName": cls,
            "hostPath": {"path": f"/tmp/{name}"},
            **extra,
        },
    }


def pvc(name: str, size: str, cls: str | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}, **extra}
    if cls is not None:
        spec["storageClassName"] = cls
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "uid": f"u-{name}"},
        "spec": spec,
    }


def test_the_smallest_fitting_volume_wins_and_a_reserved_one_first() -> None:
    claim = pvc("c", "2Gi", "")
    claim["metadata"]["namespace"] = "ns"
    small, big, wrong = pv("small", "1Gi"), pv("big", "10Gi"), pv("rwx", "5Gi", modes=("ReadWriteMany",))
    fit = pv("fit", "3Gi")
    assert vb.best_volume([small, big, wrong, fit], claim) is fit
    reserved = pv("reserved", "20Gi", claimRef={"namespace": "ns", "name": "c"})
    assert vb.best_volume([fit, reserved], claim) is reserved
    other = pv("other", "3Gi", claimRef={"namespace": "ns", "name": "d"})
    assert vb.best_volume([other], claim) is None
    labelled = pv("fast", "3Gi", labels={"speed": "fast"})
    picky = pvc("p", "1Gi", "", selector={"matchLabels": {"speed": "fast"}})
    picky["metadata"]["namespace"] = "ns"
    assert vb.best_volume([fit, labelled], picky) is labelled
    assert vb.best_volume([pv("gold", "3Gi", "gold")], claim) is None  # another class


def test_a_local_volume_lives_on_its_node() -> None:
    node = {"metadata": {"name": "n1", "annotations": {vb.VOLUME_DIR_ANNOTATION: "/var/lib/rk/local-volumes"}}}
    sc = {"metadata": {"name": "standard"}, "reclaimPolicy": "Retain"}
    made = vb.provisioned(pvc("c", "2Gi", "standard"), sc, node)
    assert made is not None
    assert made["metadata"]["name"] == "pvc-u-c"
    assert made["spec"]["hostPath"] == {"path": "/var/lib/rk/local-volumes/pvc-u-c", "type": "DirectoryOrCreate"}
    term = made["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term["values"] == ["n1"] and made["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert vb.provisioned(pvc("c", "2Gi"), sc, {"metadata": {"name": "n2"}}) is None


def test_claims_bind_provision_and_release(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "pv"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            node = {
                "metadata": {"name": "disk-node", "annotations": {vb.VOLUME_DIR_ANNOTATION: "/tmp/rk-test-volumes"}}
            }
            await client.create("/api/v1/nodes", node)
            async with running(client, [PersistentVolumeController]):
                classes = await client.get("/apis/storage.k8s.io/v1/storageclasses")
                assert [c["metadata"]["name"] for c in classes["items"]] == ["standard"]

                # a static volume of no class, for a claim asking for no class
                await client.create("/api/v1/persistentvolumes", pv("static-1", "5Gi"))
                await client.create(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", pvc("plain", "1Gi", ""))

                async def phase(name: str) -> str | None:
                    claim = await client.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}")
                    return (claim.get("status") or {}).get("phase")

                async def bound(name: str) -> bool:
                    return await phase(name) == "Bound"

                await eventually(lambda: bound("plain"), what="the static volume bound")
                plain = await client.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/plain")
                assert plain["spec"]["volumeName"] == "static-1" and plain["status"]["capacity"] == {"storage": "5Gi"}

                # the default class, filled in by admission; provisioned once a pod is on a node
                made = await client.create(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", pvc("data", "2Gi"))
                assert made["spec"]["storageClassName"] == "standard"
                await asyncio.sleep(0.5)
                assert await phase("data") == "Pending"  # WaitForFirstConsumer: no pod yet
                pod = {
                    "metadata": {"name": "user"},
                    "spec": {
                        "nodeName": "disk-node",
                        "containers": [{"name": "c", "image": "busybox"}],
                        "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
                    },
                }
                await client.create(f"/api/v1/namespaces/{ns}/pods", pod)
                await eventually(lambda: bound("data"), what="a local volume provisioned and bound")
                data = await client.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data")
                volume = await client.get(f"/api/v1/persistentvolumes/{data['spec']['volumeName']}")
                assert volume["spec"]["hostPath"]["path"].startswith("/tmp/rk-test-volumes/pvc-")
                assert volume["status"]["phase"] == "Bound"

                # deleted claims: Delete removes the volume (once no pod names the claim), Retain
                # keeps it Released
                await client.delete(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data")
                await client.delete(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/plain")

                async def gone() -> bool:
                    names = [v["metadata"]["name"] for v in (await client.get("/api/v1/persistentvolumes"))["items"]]
                    return volume["metadata"]["name"] not in names

                async def released_while_mounted() -> bool:
                    kept = await client.get(f"/api/v1/persistentvolumes/{volume['metadata']['name']}")
                    return (kept.get("status") or {}).get("phase") == "Released"

                await eventually(released_while_mounted, what="the volume Released")
                await asyncio.sleep(1.0)
                assert not await gone()  # the pod still names the claim: its directory stays
                await client.delete(f"/api/v1/namespaces/{ns}/pods/user", {"gracePeriodSeconds": 0})

                await eventually(gone, what="the provisioned volume deleted")
                # its node was told first, for its kubelet to remove the directory
                told = await client.get("/api/v1/nodes/disk-node")
                assert local_volumes.released(told["metadata"]["annotations"]) == [volume["metadata"]["name"]]

                async def released() -> bool:
                    static = await client.get("/api/v1/persistentvolumes/static-1")
                    return (static.get("status") or {}).get("phase") == "Released"

                await eventually(released, what="the static volume Released and kept")

    asyncio.run(go())


def test_a_claim_of_an_unknown_class_waits_and_says_why(cluster: ApiserverUnderTest) -> None:
    """Bad input: a claim naming a StorageClass that does not exist stays Pending with kube's
    ProvisioningFailed event, and the claims beside it still bind."""

    async def go() -> None:
        ns = "pv-unknown"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            async with running(client, [PersistentVolumeController]):
                claims = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
                await client.create(claims, pvc("lost", "1Gi", "no-such-class"))
                await client.create("/api/v1/persistentvolumes", pv("static-u", "1Gi"))
                await client.create(claims, pvc("fine", "1Gi", ""))

                async def said() -> list[str]:
                    got = await client.get(f"/api/v1/namespaces/{ns}/events")
                    return [
                        e["message"]
                        for e in got.get("items") or []
                        if e["involvedObject"]["name"] == "lost" and e["reason"] == "ProvisioningFailed"
                    ]

                messages = await eventually(said, what="the ProvisioningFailed event")
                assert messages == ['storageclass.storage.k8s.io "no-such-class" not found']

                async def phase(name: str) -> str | None:
                    return ((await client.get(f"{claims}/{name}")).get("status") or {}).get("phase")

                await eventually(lambda: _is(phase("fine"), "Bound"), what="the other claim bound")
                assert await phase("lost") == "Pending"

    asyncio.run(go())


async def _is(value: Any, want: str) -> bool:
    return await value == want


def test_a_bound_claim_of_an_expandable_class_grows_its_volume(cluster: ApiserverUnderTest) -> None:
    """allowVolumeExpansion: a bound local claim asking for more gets it (the volume's capacity,
    then the claim's, with kube's Resizing and VolumeResizeSuccessful events); a claim of a class
    that does not allow it is refused with kube's 403."""

    async def go() -> None:
        ns = "pv-expand"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            node = {"metadata": {"name": "grow-node", "annotations": {vb.VOLUME_DIR_ANNOTATION: "/tmp/rk-grow"}}}
            await client.create("/api/v1/nodes", node)
            classes = "/apis/storage.k8s.io/v1/storageclasses"
            for name, expands in (("elastic", True), ("rigid", False)):
                await client.create(
                    classes,
                    {
                        "metadata": {"name": name},
                        "provisioner": vb.PROVISIONER,
                        "volumeBindingMode": "Immediate",
                        "allowVolumeExpansion": expands,
                    },
                )
            claims = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
            async with running(client, [PersistentVolumeController]):
                await client.create(claims, pvc("grows", "1Gi", "elastic"))
                await client.create(claims, pvc("stays", "1Gi", "rigid"))

                async def capacity(name: str) -> str | None:
                    got = await client.get(f"{claims}/{name}")
                    return ((got.get("status") or {}).get("capacity") or {}).get("storage")

                for name in ("grows", "stays"):
                    await eventually(lambda n=name: _is(capacity(n), "1Gi"), what=f"{name} bound")

                await client.patch(f"{claims}/grows", {"spec": {"resources": {"requests": {"storage": "3Gi"}}}})
                await eventually(lambda: _is(capacity("grows"), "3Gi"), what="the claim's capacity grown")
                grown = await client.get(f"{claims}/grows")
                volume = await client.get(f"/api/v1/persistentvolumes/{grown['spec']['volumeName']}")
                assert volume["spec"]["capacity"] == {"storage": "3Gi"}
                assert grown["status"]["allocatedResources"] == {"storage": "3Gi"}
                assert "allocatedResourceStatuses" not in grown["status"] and "conditions" not in grown["status"]

                async def reasons() -> list[str] | None:
                    got = await client.get(f"/api/v1/namespaces/{ns}/events")
                    said = sorted(
                        e["reason"]
                        for e in got.get("items") or []
                        if e["involvedObject"]["name"] == "grows" and "Resiz" in e["reason"]
                    )
                    return said if len(said) == 2 else None

                assert await eventually(reasons, what="the resize events") == ["Resizing", "VolumeResizeSuccessful"]

                with pytest.raises(ForbiddenError) as refused:
                    await client.patch(f"{claims}/stays", {"spec": {"resources": {"requests": {"storage": "3Gi"}}}})
                assert "the storageclass that provisions the pvc must support resize" in str(refused.value)
                assert await capacity("stays") == "1Gi"

    asyncio.run(go())
