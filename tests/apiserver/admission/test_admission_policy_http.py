"""ValidatingAdmissionPolicy through real HTTP requests (in-process app, in-memory storage):
policies and bindings come from a test source (the resource modules serving them are another
change), namespaces and params from the server's own watch caches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from apiserver.admission import assembly
from apiserver.admission.policy.plugin import ValidatingAdmissionPolicy
from apiserver.admission.policy.source import LivePolicies
from apiserver.admission.policy.wiring import param_lookup
from tests.apiserver.admission.policy_support import Objects, binding, policy
from tests.apiserver.gates_support import ClientFor, in_process

ON = "/api/v1/namespaces/on/configmaps"
CONFIGMAP_RULES = [
    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}
]


@pytest.fixture
def sources(monkeypatch: pytest.MonkeyPatch) -> tuple[Objects, Objects]:
    policies, bindings = Objects(), Objects()

    def factory(ctx: assembly.AdmissionContext) -> ValidatingAdmissionPolicy:
        namespaces = ctx.caches[("", "namespaces")]
        return ValidatingAdmissionPolicy(
            LivePolicies(policies, bindings), lambda name: namespaces.get_object(None, name), param_lookup(ctx.caches)
        )

    monkeypatch.setitem(assembly.PLUGINS, "ValidatingAdmissionPolicy", factory)
    return policies, bindings


def run(scenario: Callable[[ClientFor], Awaitable[None]]) -> None:
    async def go() -> None:
        async with in_process({}) as client:
            await scenario(client)

    asyncio.run(go())


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": data}


async def eventually(call: Callable[[], Awaitable[httpx.Response]], code: int, seconds: float = 10.0) -> httpx.Response:
    """The watch caches apply writes asynchronously: retry until `call` answers `code`."""
    started = time.monotonic()
    while True:
        r = await call()
        if r.status_code == code:
            return r
        assert time.monotonic() - started < seconds, f"still {r.status_code} after {seconds} s: {r.text}"
        await asyncio.sleep(0.02)


def test_deny_warn_and_params_over_http(sources: tuple[Objects, Objects]) -> None:
    policies, bindings = sources
    policies.put(
        policy(
            "small-configmaps",
            [{"expression": "size(object.data) <= (params == null ? 2 : int(params.data.max))", "reason": "Forbidden"}],
            rules=CONFIGMAP_RULES,
            paramKind={"apiVersion": "v1", "kind": "ConfigMap"},
            matchConditions=[{"name": "not-limits", "expression": "object.metadata.name != 'limits'"}],
        )
    )
    bindings.put(
        binding(
            "small-configmaps-b",
            "small-configmaps",
            matchResources={"namespaceSelector": {"matchLabels": {"policy": "on"}}},
        )
    )

    async def scenario(client: ClientFor) -> None:
        admin = client("admin")
        for name, labels in (("on", {"policy": "on"}), ("off", {})):
            r = await admin.post("/api/v1/namespaces", json={"metadata": {"name": name, "labels": labels}})
            assert r.status_code == 201, r.text
        big = configmap("big", a="1", b="2", c="3")
        # wait (with dry runs, which are admitted but not stored) until the caches saw the namespaces
        await eventually(lambda: admin.post(f"{ON}?dryRun=All", json=big), 403)
        r = await admin.post(ON, json=big)
        assert r.status_code == 403
        why = (
            "ValidatingAdmissionPolicy 'small-configmaps' with binding 'small-configmaps-b' denied request: "
            "failed expression: size(object.data) <= (params == null ? 2 : int(params.data.max))"
        )
        assert r.json() == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f'configmaps "big" is forbidden: {why}',
            "reason": "Forbidden",
            "code": 403,
            "details": {"kind": "configmaps", "name": "big", "causes": [{"message": why}]},
        }
        assert (await admin.post("/api/v1/namespaces/off/configmaps", json=big)).status_code == 201
        assert (await admin.post("/api/v1/namespaces/on/configmaps", json=configmap("ok", a="1"))).status_code == 201

        # params from the server's configmaps cache, by name in the request's namespace
        bindings.put(
            binding(
                "small-configmaps-b",
                "small-configmaps",
                paramRef={"name": "limits", "parameterNotFoundAction": "Deny"},
                matchResources={"namespaceSelector": {"matchLabels": {"policy": "on"}}},
            )
        )
        r = await admin.post("/api/v1/namespaces/on/configmaps", json=configmap("x"))
        assert r.status_code == 422 and "no params found for policy binding" in r.json()["message"]
        # (params are looked up before match conditions run, as in kube: the params' own write is refused too)
        bindings.put(binding("small-configmaps-b", "small-configmaps", ["Audit"]))
        limits = configmap("limits", max="5")
        assert (await admin.post("/api/v1/namespaces/on/configmaps", json=limits)).status_code == 201
        bindings.put(
            binding(
                "small-configmaps-b",
                "small-configmaps",
                paramRef={"name": "limits", "parameterNotFoundAction": "Deny"},
                matchResources={"namespaceSelector": {"matchLabels": {"policy": "on"}}},
            )
        )
        await eventually(lambda: admin.post(f"{ON}?dryRun=All", json=big), 201)
        assert (await admin.post(ON, json=big)).status_code == 201

        # Warn: the write goes through with kube's warning header
        bindings.put(binding("small-configmaps-b", "small-configmaps", ["Warn"]))
        r = await admin.post("/api/v1/namespaces/off/configmaps", json=configmap("big2", a="1", b="2", c="3"))
        assert r.status_code == 201, r.text
        assert r.headers.get_list("warning") == [
            "299 - \"Validation failed for ValidatingAdmissionPolicy 'small-configmaps' with binding "
            "'small-configmaps-b': "
            'failed expression: size(object.data) <= (params == null ? 2 : int(params.data.max))"'
        ]
        ok = await admin.post("/api/v1/namespaces/off/configmaps", json=configmap("small"))
        assert ok.status_code == 201 and "warning" not in ok.headers

    run(scenario)
