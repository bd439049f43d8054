"""The daemonset controller: where a daemon pod belongs (units), its revision history (units),
and against a real apiserver: a pod per eligible node, a node that stops matching loses its
pod, a failed pod is replaced, a rolling update replaces pods within maxUnavailable, a
rollback keeps the pods still on the old template, and the status counts."""

from __future__ import annotations

import asyncio
from typing import Any

from components.controllers import _history as history
from components.controllers._daemon_nodes import daemon_tolerations, node_of, placement, pod_spec_for
from components.controllers.daemonset import DaemonSetController
from components.controllers.runner import running
from tests.apiserver.support import ApiserverUnderTest
from tests.components.controllers.test_replicaset_support import api, kubelet, make_namespace, pods_of
from tests.support.wait import eventually


def ds_body(name: str, image: str = "busybox:1.36", **pod_spec: Any) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "uid": f"uid-{name}", "namespace": "ns"},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": image}], **pod_spec},
            },
        },
    }


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}


# -- units --------------------------------------------------------------------------------------


def test_placement_follows_selector_affinity_and_taints() -> None:
    plain = ds_body("d")
    assert placement(plain, node("n1")) == (True, True)
    picky = ds_body("d", nodeSelector={"disk": "ssd"})
    assert placement(picky, node("n1")) == (False, False)
    assert placement(picky, node("n1", {"disk": "ssd"})) == (True, True)
    no_schedule = node("n1", taints=[{"key": "gpu", "effect": "NoSchedule"}])
    no_execute = node("n1", taints=[{"key": "gpu", "effect": "NoExecute"}])
    assert placement(plain, no_schedule) == (False, True)  # not placed, but one there may stay
    assert placement(plain, no_execute) == (False, False)
    tolerant = ds_body("d", tolerations=[{"key": "gpu", "operator": "Exists"}])
    assert placement(tolerant, no_execute) == (True, True)
    cordoned = node("n1", taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}])
    assert placement(plain, cordoned) == (True, True)  # daemons tolerate a cordon
    named = ds_body("d", nodeName="n2")
    assert placement(named, node("n1")) == (False, False)


def test_the_pod_names_its_node_by_affinity_and_carries_daemon_tolerations() -> None:
    ds = ds_body(
        "d", hostNetwork=True, affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    )
    pod_spec = pod_spec_for(ds, "n7")
    terms = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n7"]}]}]
    assert "preferredDuringSchedulingIgnoredDuringExecution" in pod_spec["affinity"]["nodeAffinity"]
    keys = {(t["key"], t["effect"]) for t in pod_spec["tolerations"]}
    assert ("node.kubernetes.io/unschedulable", "NoSchedule") in keys
    assert ("node.kubernetes.io/network-unavailable", "NoSchedule") in keys
    assert node_of({"spec": pod_spec}) == "n7"
    assert len(daemon_tolerations(pod_spec)) == len(pod_spec["tolerations"])  # idempotent


def test_revision_data_is_gos_json_and_matches_its_template() -> None:
    ds = ds_body("d")
    revision = history.new_revision(ds, "DaemonSet", "apps/v1", 3)
    assert revision["metadata"]["name"] == f"d-{history.current_hash(ds)}"
    assert revision["metadata"]["labels"][history.REVISION_HASH_LABEL] == history.current_hash(ds)
    assert history.data_text(revision["data"]).startswith(
        '{"spec":{"template":{"$patch":"replace","metadata":{"creationTimestamp":null'
    )
    assert history.matches(ds, revision)
    changed = ds_body("d", image="busybox:1.37")
    assert not history.matches(changed, revision)
    assert history.current_hash(changed) != history.current_hash(ds)
    old = [
        {"metadata": {"name": f"r{i}", "labels": {history.REVISION_HASH_LABEL: f"h{i}"}}, "revision": i}
        for i in range(1, 6)
    ]
    pruned = history.to_prune(old, in_use={"h1"}, current="r5", limit=2)
    assert [r["metadata"]["name"] for r in pruned] == ["r2"]


# -- against the apiserver --------------------------------------------------------------------


def ds_path(ns: str, name: str = "") -> str:
    return f"/apis/apps/v1/namespaces/{ns}/daemonsets" + (f"/{name}" if name else "")


def test_a_daemonset_runs_on_every_eligible_node_and_rolls(cluster: ApiserverUnderTest) -> None:
    async def go() -> None:
        ns = "ds"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            for name, labels in (("n1", {"pool": "a"}), ("n2", {"pool": "a"}), ("n3", {"pool": "b"})):
                await client.create("/api/v1/nodes", {"metadata": {"name": name, "labels": labels}})
                # admission taints a new node not-ready (NoSchedule), which daemon pods do not
                # tolerate; these nodes have no kubelet to make them ready
                await client.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
            async with running(client, [DaemonSetController]), kubelet(client, ns):
                body = ds_body("agent", nodeSelector={"pool": "a"})
                for member in ("uid", "namespace"):
                    del body["metadata"][member]
                await client.create(ds_path(ns), body)

                async def by_node() -> dict[str, list[dict[str, Any]]]:
                    found: dict[str, list[dict[str, Any]]] = {}
                    for p in await pods_of(client, ns):
                        if not p["metadata"].get("deletionTimestamp"):
                            found.setdefault(node_of(p), []).append(p)
                    return found

                async def placed(nodes: set[str]) -> bool:
                    now = await by_node()
                    return set(now) == nodes and all(len(v) == 1 for v in now.values())

                await eventually(lambda: placed({"n1", "n2"}), what="a pod on n1 and n2")

                async def status_is(**want: int) -> bool:
                    st = (await client.get(ds_path(ns, "agent"))).get("status") or {}
                    return all(st.get(k, 0) == v for k, v in want.items())

                await eventually(
                    lambda: status_is(desiredNumberScheduled=2, currentNumberScheduled=2, numberReady=2),
                    what="status 2/2 ready",
                )
                revisions = await client.get(f"/apis/apps/v1/namespaces/{ns}/controllerrevisions")
                assert len(revisions["items"]) == 1 and revisions["items"][0]["revision"] == 1

                # n2 stops matching: its pod goes; n3 starts matching: it gets one
                await client.patch("/api/v1/nodes/n2", {"metadata": {"labels": {"pool": "b"}}})
                await client.patch("/api/v1/nodes/n3", {"metadata": {"labels": {"pool": "a"}}})
                await eventually(lambda: placed({"n1", "n3"}), what="pods follow the node labels")

                # a failed pod is replaced
                first = (await by_node())["n1"][0]
                await client.patch(
                    f"/api/v1/namespaces/{ns}/pods/{first['metadata']['name']}/status", {"status": {"phase": "Failed"}}
                )

                async def replaced() -> bool:
                    now = await by_node()
                    return [p["metadata"]["name"] for p in now.get("n1", [])] not in ([], [first["metadata"]["name"]])

                await eventually(replaced, what="the failed pod replaced")

                # a rolling update replaces every pod; a rollback keeps those still on it
                before = {n: p[0]["metadata"]["name"] for n, p in (await by_node()).items()}
                await client.patch(
                    ds_path(ns, "agent"),
                    {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}}},
                    patch_type="strategic",
                )

                async def all_on(image: str) -> bool:
                    now = await by_node()
                    return set(now) == {"n1", "n3"} and all(
                        len(v) == 1 and v[0]["spec"]["containers"][0]["image"] == image for v in now.values()
                    )

                await eventually(lambda: all_on("busybox:1.37"), what="rolled to 1.37")
                after = {n: p[0]["metadata"]["name"] for n, p in (await by_node()).items()}
                assert not set(before.values()) & set(after.values())
                await client.patch(
                    ds_path(ns, "agent"),
                    {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}},
                    patch_type="strategic",
                )
                await eventually(lambda: all_on("busybox:1.36"), what="rolled back to 1.36")
                revisions = await client.get(f"/apis/apps/v1/namespaces/{ns}/controllerrevisions")
                numbers = sorted(r["revision"] for r in revisions["items"])
                assert numbers == [2, 3], numbers  # the first template came back as revision 3
                await eventually(
                    lambda: status_is(desiredNumberScheduled=2, updatedNumberScheduled=2, numberAvailable=2),
                    what="status after the rollback",
                )

                # a new node of the pool gets its daemon
                await client.create("/api/v1/nodes", {"metadata": {"name": "n4", "labels": {"pool": "a"}}})
                await client.patch("/api/v1/nodes/n4", {"spec": {"taints": None}})
                await eventually(lambda: placed({"n1", "n3", "n4"}), what="a pod on the new node")

    asyncio.run(go())


def test_revision_data_is_stored_in_gos_key_order() -> None:
    """What the apiserver serves back is these keys in this order: they must be Go's."""
    import orjson

    data = history.new_revision(ds_body("d"), "DaemonSet", "apps/v1", 1)["data"]
    assert orjson.dumps(data).decode() == history.data_text(data)


def test_a_surging_rollout_starts_the_new_pod_before_the_old_one_goes(cluster: ApiserverUnderTest) -> None:
    """maxSurge 1, maxUnavailable 0: a node gets its new pod beside the old one, one node at a
    time, and loses the old pod only once the new one is available; no node is ever without a
    running daemon."""

    async def go() -> None:
        ns = "surge"
        async with api(cluster) as client:
            await make_namespace(client, ns)
            for name in ("s1", "s2"):
                await client.create("/api/v1/nodes", {"metadata": {"name": name, "labels": {"pool": "s"}}})
                await client.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
            async with running(client, [DaemonSetController]), kubelet(client, ns) as fake:
                body = ds_body("agent", nodeSelector={"pool": "s"})
                body["spec"]["updateStrategy"] = {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                }
                for member in ("uid", "namespace"):
                    del body["metadata"][member]
                await client.create(ds_path(ns), body)

                async def images() -> dict[str, list[str]]:
                    found: dict[str, list[str]] = {}
                    for p in await pods_of(client, ns):
                        if not p["metadata"].get("deletionTimestamp"):
                            found.setdefault(node_of(p), []).append(p["spec"]["containers"][0]["image"])
                    return {n: sorted(v) for n, v in found.items()}

                async def are(want: dict[str, list[str]]) -> bool:
                    return await images() == want

                one = {"s1": ["busybox:1.36"], "s2": ["busybox:1.36"]}
                await eventually(lambda: are(one), what="a pod on each node")
                await asyncio.sleep(0.3)  # the fake kubelet makes them ready
                fake.paused = True  # new pods stay unavailable: the surge holds
                await client.patch(
                    ds_path(ns, "agent"),
                    {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}}},
                    patch_type="strategic",
                )

                async def surging() -> bool:
                    now = await images()
                    both = [n for n, v in now.items() if v == ["busybox:1.36", "busybox:1.37"]]
                    return len(both) == 1 and all(v == ["busybox:1.36"] for n, v in now.items() if n not in both)

                await eventually(surging, what="one node surging")
                await asyncio.sleep(1.0)
                assert await surging(), await images()  # maxSurge 1: the other node waits; no old pod went
                fake.paused = False
                done = {"s1": ["busybox:1.37"], "s2": ["busybox:1.37"]}
                await eventually(lambda: are(done), what="rolled to 1.37 by surging")

    asyncio.run(go())
