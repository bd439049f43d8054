"""ServiceAccount admission through HTTP: the default account, the projected token volume in
every container, automount turned off by the pod or its account, a missing named account."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.apiserver.gates_support import in_process

PODS = "/api/v1/namespaces/default/pods"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "c", "image": "busybox"}],
            "initContainers": [{"name": "i", "image": "x"}],
            **spec,
        },
    }


def test_service_account_admission() -> None:
    async def go() -> None:
        async with in_process({}) as client:
            admin = client("admin")
            made = await admin.post(PODS, json=pod("plain"))
            assert made.status_code == 201, made.text
            spec = made.json()["spec"]
            assert spec["serviceAccountName"] == "default" == spec["serviceAccount"]
            (volume,) = spec["volumes"]
            assert volume["name"].startswith("kube-api-access-") and len(volume["name"]) == len("kube-api-access-") + 5
            sources = volume["projected"]["sources"]
            assert sources[0] == {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}
            for c in spec["containers"] + spec["initContainers"]:
                assert c["volumeMounts"] == [
                    {
                        "name": volume["name"],
                        "readOnly": True,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    }
                ]
            off = await admin.post(PODS, json=pod("off", automountServiceAccountToken=False))
            assert "volumes" not in off.json()["spec"]
            missing = await admin.post(PODS, json=pod("lost", serviceAccountName="robot"))
            assert missing.status_code == 403
            assert missing.json()["message"] == (
                'pods "lost" is forbidden: error looking up service account default/robot: '
                'serviceaccount "robot" not found'
            )
            sa = {"metadata": {"name": "robot"}, "automountServiceAccountToken": False}
            assert (await admin.post("/api/v1/namespaces/default/serviceaccounts", json=sa)).status_code == 201
            for _ in range(500):
                r = await admin.post(PODS, json=pod("robot", serviceAccountName="robot"))
                if r.status_code == 201:
                    break
                await asyncio.sleep(0.01)
            assert r.status_code == 201 and "volumes" not in r.json()["spec"]

    asyncio.run(go())
