"""The event recorder against a real apiserver: a repeat bumps the count of the event already
written, the involved object carries its field path, a cluster-scoped object's events live in
"default", and the spam filter lets 25 events of one object through, then one per 5 minutes."""

from __future__ import annotations

import asyncio
from typing import Any

from components.client import kubeconfig
from components.client.events import SPAM_BURST, SPAM_REFILL_S, WARNING, EventRecorder, ObjectRef
from components.client.rest import RestClient
from tests.apiserver.support import ApiserverUnderTest


async def _events(client: RestClient, ns: str, uid: str) -> list[dict[str, Any]]:
    got = await client.get(f"/api/v1/namespaces/{ns}/events", {"fieldSelector": f"involvedObject.uid={uid}"})
    return list(got.get("items") or [])


def test_a_repeat_bumps_the_count_and_the_reference_is_kubes(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            recorder = EventRecorder(client, "kubelet", "node-1", host="node-1")
            ref = ObjectRef("v1", "Pod", "default", "web", "uid-ev-1", "7", "spec.containers{app}")
            for _ in range(3):
                recorder.record(ref, WARNING, "Unhealthy", "Liveness probe failed: refused")
                await recorder.flush()
            recorder.record(ObjectRef("v1", "Node", "", "node-1", "node-1"), "Normal", "Starting", "Starting kubelet.")
            await recorder.flush()
            [event] = await _events(client, "default", "uid-ev-1")
            assert event["count"] == 3 and event["type"] == "Warning" and event["reason"] == "Unhealthy"
            assert event["involvedObject"] == {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": "default",
                "name": "web",
                "uid": "uid-ev-1",
                "resourceVersion": "7",
                "fieldPath": "spec.containers{app}",
            }
            assert event["source"] == {"component": "kubelet", "host": "node-1"}
            assert event["reportingComponent"] == "kubelet" and event["reportingInstance"] == "node-1"
            [node_event] = await _events(client, "default", "node-1")
            assert node_event["involvedObject"]["kind"] == "Node" and node_event["reason"] == "Starting"

    asyncio.run(go())


def test_the_spam_filter_bounds_one_objects_events(cluster: ApiserverUnderTest) -> None:
    now = [1000.0]

    async def go() -> None:
        async with RestClient(kubeconfig.load(cluster.kubeconfig)) as client:
            recorder = EventRecorder(client, "kubelet", "node-1", clock=lambda: now[0])
            ref = ObjectRef("v1", "Pod", "default", "noisy", "uid-ev-2")
            for i in range(SPAM_BURST + 5):
                recorder.record(ref, WARNING, "Failed", f"Error: attempt {i}")
            await recorder.flush()
            assert len(await _events(client, "default", "uid-ev-2")) == SPAM_BURST and recorder.filtered == 5
            now[0] += SPAM_REFILL_S  # one more token
            recorder.record(ref, WARNING, "Failed", "Error: later")
            recorder.record(ref, WARNING, "Failed", "Error: later still")
            await recorder.flush()
            assert len(await _events(client, "default", "uid-ev-2")) == SPAM_BURST + 1 and recorder.filtered == 6
            # another object has its own bucket
            recorder.record(ObjectRef("v1", "Pod", "default", "quiet", "uid-ev-3"), WARNING, "Failed", "Error: x")
            await recorder.flush()
            assert len(await _events(client, "default", "uid-ev-3")) == 1

    asyncio.run(go())
