"""managedFields are recorded before admission (as kube's handler does), so they meet objects
that validation has not refused yet: a malformed one must still get validation's 422, never a
500 from the field walker (found by the hostile-body fuzz of the webhook configurations)."""

from __future__ import annotations

import asyncio

from tests.apiserver.gates_support import in_process


def test_malformed_keyed_lists_get_422_not_500() -> None:
    async def go() -> None:
        async with in_process({}) as client:
            admin = client("admin")
            hooks = await admin.post(
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                json={"metadata": {"generateName": "fuzz-"}, "webhooks": [None]},
            )
            assert hooks.status_code == 422, hooks.text
            pod = await admin.post(
                "/api/v1/namespaces/default/pods", json={"metadata": {"name": "p"}, "spec": {"containers": [True]}}
            )
            assert pod.status_code == 422, pod.text

    asyncio.run(go())
