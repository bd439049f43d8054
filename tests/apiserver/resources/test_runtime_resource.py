"""A kind defined at run time is served through the same path as the built-in ones.

The CustomResourceDefinition issue will build `ResourceDef`s from CRDs while the server runs;
this builds one by hand (a made-up Widget with status and scale subresources, as a CRD with
`subresources: {status: {}, scale: {...}}` declares them, and one with an update strategy of
its own) and serves it in process: discovery lists it and its subresources, and every verb and
subresource works without a line of code that names it.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import httpx
import orjson

import apiserver.http
from apiserver.http.app import build_app
from apiserver.http.subresources.object_view import STATUS_VIEW, ObjectViewHandler
from apiserver.http.subresources.scale import ScaleHandler
from apiserver.registry.strategy import UpdateStrategy
from apiserver.resources import catalog
from apiserver.resources.base import ResourceDef, Subresource
from machinery.objects import Obj
from tests.apiserver.admin import Admin
from tests.apiserver.memstorage import MemStorage

GROUP = "example.com"
WIDGETS_URL = f"/apis/{GROUP}/v1/namespaces/default/widgets"


def _selector(widget: Obj) -> str:
    """As a CRD's scale.labelSelectorPath (.status.selector) reads it."""
    status = widget.get("status")
    return str(status.get("selector", "")) if isinstance(status, dict) else ""


OWNER = UpdateStrategy("owner", takes=("spec", "owner"), moves_generation=True)


def widgets() -> ResourceDef:
    """Built from data alone, as the CRD issue will build one."""
    return ResourceDef(
        GROUP,
        "v1",
        "Widget",
        "widgets",
        "widget",
        True,
        short_names=("wd",),
        subresources=(
            Subresource("scale", "Scale", "autoscaling", "v1", handler=ScaleHandler(_selector)),
            Subresource("status", "Widget", handler=STATUS_VIEW),
            # a subresource of its own, with a strategy built here: it writes spec.owner only
            Subresource("owner", "Widget", handler=ObjectViewHandler(OWNER)),
        ),
    )


def test_a_kind_built_at_run_time_is_served_with_its_subresources() -> None:
    app = build_app(MemStorage(progress=True), Admin(), resources=(*catalog(), widgets()), compaction_interval=0)

    async def go() -> None:
        async with app.running():
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="https://apiserver") as client:
                await exercise(client)

    asyncio.run(go())


async def exercise(client: httpx.AsyncClient) -> None:
    # discovery: the resource and its subresources, from the same declarations
    listed = (await client.get(f"/apis/{GROUP}/v1")).json()["resources"]
    names = {r["name"]: r for r in listed}
    assert set(names) == {"widgets", "widgets/owner", "widgets/scale", "widgets/status"}
    assert names["widgets/scale"]["kind"] == "Scale" and names["widgets/scale"]["group"] == "autoscaling"
    assert names["widgets"]["shortNames"] == ["wd"]

    # create: status is the status subresource's (dropped on create)
    made = await client.post(
        WIDGETS_URL, json={"metadata": {"name": "w"}, "spec": {"replicas": 2}, "status": {"replicas": 9}}
    )
    assert made.status_code == 201, made.text
    assert made.json()["spec"] == {"replicas": 2} and "status" not in made.json()

    # /status writes status only
    status = {"replicas": 2, "selector": "app=w"}
    put = await client.put(f"{WIDGETS_URL}/w/status", json={**made.json(), "spec": {"replicas": 7}, "status": status})
    assert put.status_code == 200, put.text
    assert put.json()["spec"] == {"replicas": 2} and put.json()["status"] == status

    # /owner: its own strategy takes spec.owner alone and moves the generation
    sent = {**put.json(), "spec": {"replicas": 5, "owner": "ann"}, "status": {}}
    sent["metadata"] = {**sent["metadata"], "labels": {"x": "y"}}
    owned = await client.put(f"{WIDGETS_URL}/w/owner", json=sent)
    assert owned.status_code == 200, owned.text
    assert owned.json()["spec"] == {"replicas": 2, "owner": "ann"} and owned.json()["status"] == status
    assert "labels" not in owned.json()["metadata"] and owned.json()["metadata"]["generation"] == 2
    repatched = await client.patch(
        f"{WIDGETS_URL}/w/owner",
        content=orjson.dumps({"spec": {"owner": None, "replicas": 6}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert repatched.status_code == 200 and repatched.json()["spec"] == {"replicas": 2}, repatched.text

    # /scale: the Scale view, written through spec.replicas (PUT and PATCH)
    scale = (await client.get(f"{WIDGETS_URL}/w/scale")).json()
    assert scale["kind"] == "Scale" and scale["spec"] == {"replicas": 2}
    assert scale["status"] == {"replicas": 2, "selector": "app=w"}
    scaled = await client.put(f"{WIDGETS_URL}/w/scale", json={**scale, "spec": {"replicas": 3}})
    assert scaled.status_code == 200 and scaled.json()["spec"] == {"replicas": 3}, scaled.text
    patched = await client.patch(
        f"{WIDGETS_URL}/w/scale",
        content=orjson.dumps({"spec": {"replicas": 4}}),
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200 and patched.json()["spec"] == {"replicas": 4}, patched.text
    assert (await client.get(f"{WIDGETS_URL}/w")).json()["spec"] == {"replicas": 4}

    # what the definition does not declare is refused as for any kind
    assert (await client.post(f"{WIDGETS_URL}/w/scale", json={})).status_code == 405
    assert (await client.get(f"{WIDGETS_URL}/w/eviction")).status_code == 404

    # list, a Table, delete
    items = (await client.get(WIDGETS_URL)).json()["items"]
    assert [i["metadata"]["name"] for i in items] == ["w"]
    table = await client.get(WIDGETS_URL, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert table.json()["rows"][0]["cells"][0] == "w"
    assert (await client.delete(f"{WIDGETS_URL}/w")).status_code == 200
    assert (await client.get(f"{WIDGETS_URL}/w")).status_code == 404


def test_the_router_and_the_verb_handlers_name_no_resource() -> None:
    """What differs between kinds is in their definitions: the router and the verb handlers
    neither compare with a served resource's or subresource's name (`sub == "exec"`,
    `res.plural == "nodes"`) nor look one up by a tuple naming it (`("policy", "v1", ...)`)."""
    http = Path(apiserver.http.__file__).parent
    names = {r.plural for r in catalog()} | {s.name for r in catalog() for s in r.subresources}
    for path in (http / "router.py", *sorted((http / "handlers").glob("*.py"))):
        tree = ast.parse(path.read_text())
        branches = [n for n in ast.walk(tree) if isinstance(n, (ast.Compare, ast.Tuple))]
        strings = {c.value for b in branches for c in ast.walk(b) if isinstance(c, ast.Constant)}
        assert not names & strings, f"{path.name} names {sorted(names & strings)}"
