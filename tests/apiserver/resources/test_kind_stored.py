"""The kinds served from their schema (`apiserver/resources/_stored.py`): each one created, read,
listed, watched, its status written and deleted through the real HTTP stack; structural validation
from the schema; kube's defaults; Table columns as kube's printers; protobuf."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import httpx
import orjson
import pytest

from apiserver.http.app import build_app
from apiserver.resources import catalog
from apiserver.resources.base import ResourceDef
from tests.apiserver.admin import Admin
from tests.apiserver.kinds_support import causes, cells, create, find, headers, rejected
from tests.apiserver.memstorage import MemStorage
from tests.apiserver.resources.stored_samples import SAMPLES, TEMPLATE


def _url(res: ResourceDef, name: str = "") -> str:
    base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
    ns = "/namespaces/default" if res.namespaced else ""
    return f"{base}{ns}/{res.plural}" + (f"/{name}" if name else "")


def _serve(exercise: Any) -> None:
    app = build_app(MemStorage(progress=True), Admin(), resources=catalog(), compaction_interval=0)

    async def go() -> None:
        async with app.running():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="https://apiserver") as client:
                await exercise(client)

    asyncio.run(go())


KEPT_BY_THE_APISERVER = {"ServiceCIDR": {"kubernetes"}, "IPAddress": {"10.96.0.1"}}


@pytest.mark.parametrize("key", sorted(SAMPLES), ids=lambda k: f"{k[0] or 'core'}/{k[1]}")
def test_round_trip_over_http(key: tuple[str, str]) -> None:
    res = find(*key)
    body = {
        "apiVersion": res.group_version,
        "kind": res.kind,
        "metadata": {"name": "x1"},
        **copy.deepcopy(SAMPLES[key]),
    }
    if res.kind == "IPAddress":
        body["metadata"]["name"] = "10.0.0.5"

    async def exercise(client: httpx.AsyncClient) -> None:
        made = await client.post(_url(res), json=body)
        assert made.status_code == 201, made.text
        name = made.json()["metadata"]["name"]
        got = (await client.get(_url(res, name))).json()
        assert got["kind"] == res.kind and got["metadata"]["uid"] == made.json()["metadata"]["uid"]
        listed = (await client.get(_url(res))).json()
        # what the apiserver keeps itself (the default ServiceCIDR, the kubernetes Service's
        # IPAddress) is there too, as in kube
        kept = KEPT_BY_THE_APISERVER.get(res.kind, set())
        names = [i["metadata"]["name"] for i in listed["items"] if i["metadata"]["name"] not in kept]
        assert listed["kind"] == res.list_kind and names == [name]
        watched = await client.get(_url(res), params={"watch": "1", "resourceVersion": "0", "timeoutSeconds": "1"})
        events = [orjson.loads(line) for line in watched.content.splitlines() if line.strip()]
        seen = [(e["type"], e["object"]["metadata"]["name"]) for e in events]
        assert [s for s in seen if s[1] not in kept] == [("ADDED", name)]
        if res.status_subresource:
            condition = {"type": "Ready", "status": "True", "reason": "Done", "message": ""}
            status: dict[str, Any] = {"conditions": [{**condition, "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
            if res.kind in ("PersistentVolume", "PersistentVolumeClaim"):
                status = {"phase": "Bound"}
            if res.kind == "VolumeAttachment":
                status = {"attached": True}
            put = await client.put(_url(res, name) + "/status", json={**got, "status": status})
            assert put.status_code == 200, put.text
            assert put.json()["status"] == {**(res.empty_status or {}), **status}  # kube: zero values stay
        table = await client.get(_url(res), headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        assert [r["cells"][0] for r in table.json()["rows"] if r["cells"][0] not in kept] == [name]
        gone = await client.delete(_url(res, name))
        assert gone.status_code == 200, gone.text
        assert (await client.get(_url(res, name))).status_code == 404

    _serve(exercise)


def test_discovery_lists_names_short_names_categories_and_subresources() -> None:
    async def exercise(client: httpx.AsyncClient) -> None:
        core = {r["name"]: r for r in (await client.get("/api/v1")).json()["resources"]}
        assert core["replicationcontrollers"]["shortNames"] == ["rc"]
        assert core["replicationcontrollers"]["categories"] == ["all"]
        assert {
            "replicationcontrollers/scale",
            "replicationcontrollers/status",
            "persistentvolumeclaims/status",
        } <= set(core)
        assert core["componentstatuses"]["verbs"] == ["get", "list"]
        apps = {r["name"]: r for r in (await client.get("/apis/apps/v1")).json()["resources"]}
        assert apps["statefulsets"]["shortNames"] == ["sts"] and "statefulsets/scale" in apps
        assert apps["daemonsets"]["shortNames"] == ["ds"] and "daemonsets/status" in apps
        certs = {r["name"] for r in (await client.get("/apis/certificates.k8s.io/v1")).json()["resources"]}
        assert certs == {
            "certificatesigningrequests",
            "certificatesigningrequests/approval",
            "certificatesigningrequests/status",
        }

    _serve(exercise)


def test_the_schema_refuses_a_wrong_type_and_a_missing_required_field() -> None:
    sc = find("storage.k8s.io", "storageclasses")
    assert rejected(sc, {"metadata": {"name": "s"}, "provisioner": "p", "allowVolumeExpansion": "yes"}, None) == [
        'allowVolumeExpansion: Invalid value: "yes": must be of type boolean'
    ]
    assert rejected(sc, {"metadata": {"name": "s"}}, None) == ["provisioner: Required value"]
    va = find("storage.k8s.io", "volumeattachments")
    assert rejected(va, {"metadata": {"name": "v"}, "spec": {"attacher": "a", "source": {}}}, None) == [
        "spec.nodeName: Required value"
    ]
    pvc = find("", "persistentvolumeclaims")
    assert causes(pvc, {"metadata": {"name": "c", "namespace": "d"}, "spec": {"accessModes": [5]}}) == [
        "spec.accessModes[0]: Invalid value: 5: must be of type string"
    ]
    sts = find("apps", "statefulsets")
    bad = copy.deepcopy(SAMPLES[("apps", "statefulsets")])
    bad["spec"]["replicas"] = "three"
    assert 'spec.replicas: Invalid value: "three": must be of type integer' in causes(
        sts, {"metadata": {"name": "s", "namespace": "d"}, **bad}
    )


def test_kube_defaults() -> None:
    pv = create(find("", "persistentvolumes"), {"metadata": {"name": "p"}, **SAMPLES[("", "persistentvolumes")]}, None)
    assert pv["spec"]["volumeMode"] == "Filesystem" and pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    pvc = create(
        find("", "persistentvolumeclaims"), {"metadata": {"name": "c"}, **SAMPLES[("", "persistentvolumeclaims")]}
    )
    assert pvc["spec"]["volumeMode"] == "Filesystem"
    sts = create(find("apps", "statefulsets"), {"metadata": {"name": "s"}, **SAMPLES[("apps", "statefulsets")]})
    assert sts["spec"]["replicas"] == 1 and sts["spec"]["podManagementPolicy"] == "OrderedReady"
    assert sts["spec"]["revisionHistoryLimit"] == 10
    assert sts["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert sts["spec"]["template"]["spec"]["restartPolicy"] == "Always"  # the pod template's defaults
    ds = create(find("apps", "daemonsets"), {"metadata": {"name": "d"}, **SAMPLES[("apps", "daemonsets")]})
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert ds["spec"]["revisionHistoryLimit"] == 10
    rc = create(find("", "replicationcontrollers"), {"metadata": {"name": "r"}, "spec": {"template": TEMPLATE}})
    assert rc["spec"]["replicas"] == 1 and rc["spec"]["selector"] == {"app": "a"}
    sc = create(find("storage.k8s.io", "storageclasses"), {"metadata": {"name": "s"}, "provisioner": "p"}, None)
    assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")


def test_tables_as_kube_prints_them() -> None:
    pv = find("", "persistentvolumes")
    assert [h for h, p in headers(pv) if p == 0] == [
        "Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass",
        "VolumeAttributesClass", "Reason", "Age",
    ]  # fmt: skip
    obj = {
        "metadata": {"name": "p", "creationTimestamp": "2023-11-14T22:13:00Z"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": "default", "name": "c"},
            "storageClassName": "standard",
            "volumeMode": "Filesystem",
        },
        "status": {"phase": "Bound"},
    }
    assert cells(pv, obj) == [
        "p",
        "1Gi",
        "RWO,RWX",
        "Retain",
        "Bound",
        "default/c",
        "standard",
        "<unset>",
        "",
        "20s",
        "Filesystem",
    ]
    csr = find("certificates.k8s.io", "certificatesigningrequests")
    assert [h for h, _ in headers(csr)] == ["Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"]
    sts = find("apps", "statefulsets")
    assert headers(sts) == [("Name", 0), ("Ready", 0), ("Age", 0), ("Containers", 1), ("Images", 1)]
    assert headers(find("", "podtemplates")) == [("Name", 0), ("Containers", 0), ("Images", 0), ("Pod Labels", 0)]


def test_csr_approval_writes_only_the_conditions() -> None:
    res = find("certificates.k8s.io", "certificatesigningrequests")
    body = {"metadata": {"name": "c"}, **SAMPLES[("certificates.k8s.io", "certificatesigningrequests")]}

    async def exercise(client: httpx.AsyncClient) -> None:
        made = (await client.post(_url(res), json=body)).json()
        approved = {"type": "Approved", "status": "True", "reason": "OK", "lastUpdateTime": "2024-01-01T00:00:00Z"}
        sent = {
            **made,
            "metadata": {**made["metadata"], "annotations": {"patchedapproval": "true"}},
            "spec": {**made["spec"], "signerName": "other.io/x"},
            "status": {"conditions": [approved], "certificate": "eA=="},
        }
        put = await client.put(_url(res, "c") + "/approval", json=sent)
        assert put.status_code == 200, put.text
        assert put.json()["status"] == {"conditions": [approved]}
        assert put.json()["spec"]["signerName"] == "example.com/signer"
        assert put.json()["metadata"]["annotations"] == {"patchedapproval": "true"}  # kube keeps the request's

    _serve(exercise)


def test_protobuf_round_trip() -> None:
    res = find("apps", "statefulsets")
    body = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "s"},
        **SAMPLES[("apps", "statefulsets")],
    }
    pb = "application/vnd.kubernetes.protobuf"

    async def exercise(client: httpx.AsyncClient) -> None:
        made = (await client.post(_url(res), json=body)).json()
        got = await client.get(_url(res, "s"), headers={"Accept": pb})
        assert got.status_code == 200 and got.headers["content-type"].startswith(pb), got.text
        put = await client.put(
            _url(res, "s"), content=got.content, headers={"Content-Type": pb, "Accept": "application/json"}
        )
        assert put.status_code == 200, put.text
        back = put.json()["spec"]
        # Go writes a template's zero creationTimestamp as null, as kube-apiserver's objects show
        assert back["template"]["metadata"].pop("creationTimestamp") is None
        assert back == made["spec"]
        sc = find("storage.k8s.io", "storageclasses")
        one = await client.post(_url(sc), json={"metadata": {"name": "f"}, "provisioner": "p"}, headers={"Accept": pb})
        assert one.status_code == 201 and one.headers["content-type"].startswith(pb), one.text

    _serve(exercise)


def test_csrs_are_selected_by_signer_name() -> None:
    """kube's CSR field selector (conformance "Certificates API should support CSR API
    operations" lists by spec.signerName); another field is kube's 400."""
    res = find("certificates.k8s.io", "certificatesigningrequests")
    sample = SAMPLES[("certificates.k8s.io", "certificatesigningrequests")]

    async def exercise(client: httpx.AsyncClient) -> None:
        for name, signer in (("a", "example.com/signer"), ("b", "other.io/x")):
            spec = {**sample["spec"], "signerName": signer}
            made = await client.post(_url(res), json={"metadata": {"name": name}, **sample, "spec": spec})
            assert made.status_code == 201, made.text
        got = await client.get(_url(res), params={"fieldSelector": "spec.signerName=other.io/x"})
        assert [i["metadata"]["name"] for i in got.json()["items"]] == ["b"]
        bad = await client.get(_url(res), params={"fieldSelector": "spec.username=x"})
        assert (bad.status_code, bad.json()["message"]) == (400, "field label not supported: spec.username")

    _serve(exercise)


def test_an_event_written_through_events_k8s_io_is_selected_by_both_apis() -> None:
    """conformance "Events API should ensure that an event can be fetched, patched, deleted, and
    listed": core/v1 lists it by `source` (its reporter), events.k8s.io by `reportingController`."""
    event = {
        "metadata": {"name": "e1"},
        "regarding": {"namespace": "default"},
        "eventTime": "2017-09-19T13:49:16.000000Z",
        "note": "This is e1",
        "action": "Do",
        "reason": "Test",
        "type": "Normal",
        "reportingController": "test-controller",
        "reportingInstance": "test-node",
    }

    async def exercise(client: httpx.AsyncClient) -> None:
        made = await client.post("/apis/events.k8s.io/v1/namespaces/default/events", json=event)
        assert made.status_code == 201, made.text
        core = await client.get("/api/v1/events", params={"fieldSelector": "source=test-controller"})
        assert [i["metadata"]["name"] for i in core.json()["items"]] == ["e1"]
        new = await client.get(
            "/apis/events.k8s.io/v1/events", params={"fieldSelector": "reportingController=test-controller"}
        )
        assert [i["metadata"]["name"] for i in new.json()["items"]] == ["e1"]
        other = await client.get("/apis/events.k8s.io/v1/events", params={"fieldSelector": "source=x"})
        assert (other.status_code, other.json()["message"]) == (400, "field label not supported: source")

    _serve(exercise)


def test_services_are_selected_by_cluster_ip_and_type() -> None:
    """kube's Service field selectors: kube-proxy lists Services with spec.clusterIP!=None (the
    headless ones are DNS's), and spec.type selects too; another field is kube's 400."""
    res = find("", "services")
    port = [{"port": 80, "protocol": "TCP"}]

    async def exercise(client: httpx.AsyncClient) -> None:
        for name, spec in (("headless", {"clusterIP": "None"}), ("plain", {}), ("np", {"type": "NodePort"})):
            made = await client.post(_url(res), json={"metadata": {"name": name}, "spec": {"ports": port, **spec}})
            assert made.status_code == 201, made.text
        proxied = await client.get(_url(res), params={"fieldSelector": "spec.clusterIP!=None"})
        assert sorted(i["metadata"]["name"] for i in proxied.json()["items"]) == ["np", "plain"]
        by_type = await client.get(_url(res), params={"fieldSelector": "spec.type=NodePort"})
        assert [i["metadata"]["name"] for i in by_type.json()["items"]] == ["np"]
        bad = await client.get(_url(res), params={"fieldSelector": "spec.ports=x"})
        assert (bad.status_code, bad.json()["message"]) == (400, "field label not supported: spec.ports")

    _serve(exercise)
