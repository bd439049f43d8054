"""Hollow nodes in-process against a real cluster: twenty nodes register Ready with their
Leases, each acting as `system:node:<name>` through one connection pool; pods bound to them
run on the fake runtime (Running and Ready, an image-only container, a container that exits
by its annotation); deleting them is confirmed by their node.  And `raftkube hollow-nodes`
refuses bad flags with exit 2."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from components.client import kubeconfig
from components.client.rest import ApiError, ForbiddenError, NotFoundError, RestClient
from components.kubelet.fake_runtime import EXIT_CODE, RUN_SECONDS
from components.kubelet.hollow import HollowNodes
from tests.apiserver.support import ApiserverUnderTest
from tests.support.cli import raftkube
from tests.support.wait import eventually

COUNT = 20
WAIT_S = 30.0
NAMES = [f"hn-{i}" for i in range(1, COUNT + 1)]


def ready(obj: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or ()
    )


def test_hollow_nodes_register_run_pods_and_confirm_deletions(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as admin:
            hollow = HollowNodes(admin, NAMES, {"cpu": "4", "memory": "8Gi", "pods": "110"}, {}, sync_period=1.0)
            task = asyncio.create_task(hollow.run())
            try:

                async def all_ready() -> bool:
                    nodes = (await admin.get("/api/v1/nodes"))["items"]
                    return {n["metadata"]["name"] for n in nodes if ready(n)} >= set(NAMES)

                await eventually(all_ready, f"{COUNT} hollow nodes Ready")

                async def all_leased() -> bool:
                    path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
                    return {le["spec"]["holderIdentity"] for le in (await admin.get(path))["items"]} >= set(NAMES)

                await eventually(all_leased, "a Lease per hollow node")
                addresses = set()
                for name in NAMES[:3]:
                    node = await admin.get(f"/api/v1/nodes/{name}")
                    addresses.add(node["status"]["addresses"][0]["address"])
                assert len(addresses) == 3  # each its own InternalIP
                # a hollow node is its own system:node identity: another node's objects are out of reach
                as_first = admin.impersonating(f"system:node:{NAMES[0]}", ("system:nodes",))
                with pytest.raises(ForbiddenError):
                    await as_first.patch(f"/api/v1/nodes/{NAMES[1]}/status", {"status": {}})
                for i in range(2 * COUNT):
                    annotations = {RUN_SECONDS: "1", EXIT_CODE: "0"} if i == 0 else {}
                    pod = {
                        "metadata": {"name": f"hp-{i}", "annotations": annotations},
                        "spec": {
                            "nodeName": NAMES[i % COUNT],
                            "restartPolicy": "Never" if i == 0 else "Always",
                            "containers": [{"name": "c", "image": "nginx:1.27"}],
                        },
                    }
                    await admin.create("/api/v1/namespaces/default/pods", pod)

                async def phases() -> dict[str, str] | None:
                    pods = (await admin.get("/api/v1/namespaces/default/pods"))["items"]
                    got = {p["metadata"]["name"]: (p.get("status") or {}).get("phase", "") for p in pods}
                    want_running = all(got.get(f"hp-{i}") == "Running" for i in range(1, 2 * COUNT))
                    return got if want_running and got.get("hp-0") == "Succeeded" else None

                await eventually(phases, "39 pods Running and the one with a run time Succeeded")
                web = await admin.get("/api/v1/namespaces/default/pods/hp-1")
                assert ready(web) and web["status"]["podIP"] == web["status"]["hostIP"]
                await admin.request("DELETE", "/api/v1/namespaces/default/pods", params={"labelSelector": ""})

                async def none_left() -> bool:
                    return not (await admin.get("/api/v1/namespaces/default/pods"))["items"]

                await eventually(none_left, "every deletion confirmed by its hollow node")
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                for name in NAMES:
                    with contextlib.suppress(NotFoundError, ApiError):
                        await admin.delete(f"/api/v1/nodes/{name}")

    asyncio.run(go())


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--count", "0"], "--count"),
        (["--count", "5001"], "--count"),
        (["--count", "3", "--prefix", "Bad_"], "--prefix"),
        (["--count", "3", "--sync-period", "0"], "--sync-period"),
        (["--count", "3", "--capacity", "cpu"], "--capacity"),
        (["--count", "3", "--capacity", "cpu=lots"], "--capacity"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(args: list[str], flag: str) -> None:
    proc = raftkube("hollow-nodes", "--kubeconfig", "/nonexistent", *args)
    assert proc.returncode == 2 and flag in proc.stderr, proc.stderr
