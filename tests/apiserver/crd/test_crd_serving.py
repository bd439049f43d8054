"""A CustomResourceDefinition, stored, is served: in process, through the real app and storage
interface, as a client sees it (create the CRD, wait for Established, use the kind, delete it)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import orjson

from apiserver.http.app import build_app
from tests.apiserver.admin import Admin
from tests.apiserver.memstorage import MemStorage

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GROUP = "stable.example.com"
WIDGETS = f"/apis/{GROUP}/v1/namespaces/default/widgets"
MERGE = {"Content-Type": "application/merge-patch+json"}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}


def widget_crd(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": copy.deepcopy(SCHEMA)},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                    "selectableFields": [{"jsonPath": ".spec.color"}],
                }
            ],
            **spec,
        },
    }


def serve(exercise: Callable[[httpx.AsyncClient], Awaitable[None]]) -> None:
    app = build_app(MemStorage(progress=True), Admin(), compaction_interval=0)

    async def go() -> None:
        async with app.running():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="https://apiserver") as client:
                await asyncio.wait_for(exercise(client), 30)

    asyncio.run(go())


async def until(check: Callable[[], Awaitable[bool]], what: str, seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.05)):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def established(client: httpx.AsyncClient, name: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    async def check() -> bool:
        crd = (await client.get(f"{CRDS}/{name}")).json()
        found.update(crd)
        return any(c["type"] == "Established" and c["status"] == "True" for c in crd["status"].get("conditions", []))

    await until(check, f"{name} Established")
    return found


def test_a_stored_crd_is_served_validated_defaulted_and_deleted_with_its_objects() -> None:
    async def exercise(client: httpx.AsyncClient) -> None:
        made = await client.post(CRDS, json=widget_crd())
        assert made.status_code == 201, made.text
        crd = await established(client, f"widgets.{GROUP}")
        assert crd["status"]["acceptedNames"]["kind"] == "Widget"
        assert crd["status"]["storedVersions"] == ["v1"]
        assert {c["type"] for c in crd["status"]["conditions"]} == {"NamesAccepted", "Established"}

        listed = (await client.get(f"/apis/{GROUP}/v1")).json()["resources"]
        assert {r["name"] for r in listed} == {"widgets", "widgets/status"}
        assert GROUP in {g["name"] for g in (await client.get("/apis")).json()["groups"]}

        # defaulted, pruned (Warn names the field), validated
        made = await client.post(WIDGETS, json={"metadata": {"name": "a"}, "spec": {"size": 3, "bogus": 1}})
        assert made.status_code == 201, made.text
        assert made.json()["spec"] == {"size": 3, "color": "red"}
        assert made.json()["apiVersion"] == f"{GROUP}/v1" and made.json()["kind"] == "Widget"
        assert 'unknown field \\"spec.bogus\\"' in made.headers.get("warning", "")
        strict = await client.post(
            WIDGETS + "?fieldValidation=Strict", json={"metadata": {"name": "s"}, "spec": {"size": 1, "bogus": 1}}
        )
        assert strict.status_code == 400 and 'unknown field "spec.bogus"' in strict.json()["message"], strict.text
        kept = await client.post(WIDGETS, json={"metadata": {"name": "k"}, "spec": {"size": 1, "extra": {"any": 1}}})
        assert kept.json()["spec"]["extra"] == {"any": 1}, kept.text
        bad = await client.post(
            WIDGETS, json={"metadata": {"name": "b"}, "spec": {"size": 11, "color": "green", "tags": [1, "x", "y"]}}
        )
        assert bad.status_code == 422, bad.text
        causes = {c["field"]: c["message"] for c in bad.json()["details"]["causes"]}
        assert "less than or equal to 10" in causes["spec.size"]
        assert causes["spec.color"].startswith('Unsupported value: "green"')
        assert "must be of type string" in causes["spec.tags[0]"]
        missing = await client.post(WIDGETS, json={"metadata": {"name": "m"}, "spec": {}})
        assert missing.status_code == 422 and missing.json()["details"]["causes"][0]["field"] == "spec.size"

        # status only through /status; a field selector on a selectable field; a Table
        put = await client.put(f"{WIDGETS}/a/status", json={**made.json(), "status": {"ready": True}})
        assert put.status_code == 200 and put.json()["status"] == {"ready": True}, put.text
        blue = await client.post(WIDGETS, json={"metadata": {"name": "c"}, "spec": {"size": 2, "color": "blue"}})
        assert blue.status_code == 201
        selected = (await client.get(WIDGETS + "?fieldSelector=spec.color=blue")).json()["items"]
        assert [w["metadata"]["name"] for w in selected] == ["c"]
        table = (await client.get(WIDGETS, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})).json()
        assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size"]
        assert [r["cells"] for r in table["rows"]] == [["a", 3], ["c", 2], ["k", 1]]

        # stored under kube's key layout
        storage = client._transport.app.api.storage  # type: ignore[attr-defined]
        assert await storage.get(f"/registry/{GROUP}/widgets/default/a") is not None

        # deleting the CRD deletes its objects, then the CRD, then the kind is not served
        gone = await client.delete(f"{CRDS}/widgets.{GROUP}")
        assert gone.status_code == 200, gone.text

        async def withdrawn() -> bool:
            return (await client.get(f"{CRDS}/widgets.{GROUP}")).status_code == 404

        await until(withdrawn, "the CRD to go")

        async def unserved() -> bool:
            return (await client.get(WIDGETS)).status_code == 404

        await until(unserved, "the kind to be withdrawn")
        assert await storage.get(f"/registry/{GROUP}/widgets/default/a") is None

    serve(exercise)


def test_a_default_added_later_shows_on_objects_stored_before_it() -> None:
    async def exercise(client: httpx.AsyncClient) -> None:
        crd = widget_crd()
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] = []
        assert (await client.post(CRDS, json=crd)).status_code == 201
        await established(client, f"widgets.{GROUP}")
        assert (await client.post(WIDGETS, json={"metadata": {"name": "a"}, "spec": {}})).status_code == 201
        patch = [{"op": "add", "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/default", "value": {}}]
        patch.append(
            {
                "op": "add",
                "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size/default",
                "value": 5,
            }
        )
        patched = await client.patch(
            f"{CRDS}/widgets.{GROUP}",
            content=orjson.dumps(patch),
            headers={"Content-Type": "application/json-patch+json"},
        )
        assert patched.status_code == 200, patched.text

        async def defaulted() -> bool:
            got = await client.get(f"{WIDGETS}/a")
            return got.status_code == 200 and got.json()["spec"].get("size") == 5

        await until(defaulted, "the new default on read")

    serve(exercise)


def test_crd_validation_refuses_what_kube_refuses() -> None:
    async def exercise(client: httpx.AsyncClient) -> None:
        wrong_name = widget_crd()
        wrong_name["metadata"]["name"] = "gadgets.stable.example.com"
        two_storage = widget_crd()
        two_storage["spec"]["versions"].append({**two_storage["spec"]["versions"][0], "name": "v2"})
        untyped = widget_crd()
        untyped["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"] = {}
        no_dot = widget_crd(group="example")
        no_dot["metadata"]["name"] = "widgets.example"
        cases = {
            "metadata.name": wrong_name,
            "spec.versions": two_storage,
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].type": untyped,
            "spec.group": no_dot,
        }
        for field, body in cases.items():
            got = await client.post(CRDS, json=body)
            assert got.status_code == 422, (field, got.text)
            assert field in {c["field"] for c in got.json()["details"]["causes"]}, (field, got.text)

    serve(exercise)


def test_a_conflicting_crd_is_not_served_and_says_why() -> None:
    async def exercise(client: httpx.AsyncClient) -> None:
        assert (await client.post(CRDS, json=widget_crd())).status_code == 201
        await established(client, f"widgets.{GROUP}")
        other = widget_crd()
        other["metadata"]["name"] = f"gizmos.{GROUP}"
        other["spec"]["names"] = {"plural": "gizmos", "kind": "Widget"}
        assert (await client.post(CRDS, json=other)).status_code == 201

        async def refused() -> bool:
            conds = (await client.get(f"{CRDS}/gizmos.{GROUP}")).json()["status"].get("conditions", [])
            return any(c["type"] == "NamesAccepted" and c["status"] == "False" for c in conds)

        await until(refused, "NamesAccepted=False")
        assert (await client.get(f"/apis/{GROUP}/v1/namespaces/default/gizmos")).status_code == 404

    serve(exercise)


def test_strict_apply_names_repeated_yaml_keys_and_warn_warns() -> None:
    async def exercise(client: httpx.AsyncClient) -> None:
        assert (await client.post(CRDS, json=widget_crd())).status_code == 201
        await established(client, f"widgets.{GROUP}")
        body = f"apiVersion: {GROUP}/v1\nkind: Widget\nmetadata:\n  name: y\nspec:\n  size: 1\n  size: 2\n"
        headers = {"Content-Type": "application/apply-patch+yaml"}
        strict = await client.patch(
            f"{WIDGETS}/y?fieldManager=m&fieldValidation=Strict", content=body.encode(), headers=headers
        )
        assert strict.status_code == 400, strict.text
        assert 'line 7: key "size" already set in map' in strict.json()["message"]
        warned = await client.patch(f"{WIDGETS}/y?fieldManager=m", content=body.encode(), headers=headers)
        assert warned.status_code == 201 and warned.json()["spec"]["size"] == 2, warned.text
        assert "already set in map" in warned.headers.get("warning", "")

    serve(exercise)


def test_cel_rules_refuse_with_their_message_and_transition_rules_see_the_old_value() -> None:
    async def exercise(client: httpx.AsyncClient) -> None:
        crd = widget_crd()
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        spec["properties"]["most"] = {"type": "integer"}
        spec["x-kubernetes-validations"] = [
            {"rule": "!has(self.most) || self.size <= self.most", "message": "size must not exceed most"},
            {"rule": "self.color == oldSelf.color", "message": "color is immutable", "fieldPath": ".color"},
        ]
        bad = copy.deepcopy(crd)
        bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"] = [
            {"rule": "self.size <"}
        ]
        refused = await client.post(CRDS, json=bad)
        assert refused.status_code == 422, refused.text
        assert "x-kubernetes-validations[0].rule" in refused.json()["details"]["causes"][0]["field"]
        assert "compilation failed" in refused.text

        assert (await client.post(CRDS, json=crd)).status_code == 201
        await established(client, f"widgets.{GROUP}")
        over = await client.post(WIDGETS, json={"metadata": {"name": "a"}, "spec": {"size": 5, "most": 3}})
        assert over.status_code == 422, over.text
        cause = over.json()["details"]["causes"][0]
        assert cause["field"] == "spec" and cause["message"] == 'Invalid value: "object": size must not exceed most'
        made = await client.post(WIDGETS, json={"metadata": {"name": "a"}, "spec": {"size": 2, "most": 3}})
        assert made.status_code == 201, made.text
        changed = await client.patch(f"{WIDGETS}/a", content=orjson.dumps({"spec": {"color": "blue"}}), headers=MERGE)
        assert changed.status_code == 422, changed.text
        cause = changed.json()["details"]["causes"][0]
        assert cause["field"] == "spec.color" and "color is immutable" in cause["message"]
        same = await client.patch(f"{WIDGETS}/a", content=orjson.dumps({"spec": {"size": 3}}), headers=MERGE)
        assert same.status_code == 200, same.text

    serve(exercise)
