"""The apiserver is ready once its watch caches hold the bootstrap policy, not once they can show
they caught up with the whole storage: on a storage whose progress notifications are not
trusted (etcd before 3.4.31 / 3.5.13, as Debian's 3.4.23), an idle cache cannot show the latter
and readiness used to wait out the cache's timeout for the cluster roles and again for their
bindings."""

from __future__ import annotations

import asyncio
import time

from apiserver.http.app import build_app
from tests.apiserver.admin import Admin
from tests.apiserver.memstorage import MemStorage

FRESH_TIMEOUT_S = 3.0
"""The watch cache's wait for a consistent read (apiserver.watchcache.cacher)."""


def test_start_on_a_storage_without_progress_notifications_holds_the_policy_without_waiting() -> None:
    app = build_app(MemStorage(progress=False), Admin(), compaction_interval=0)
    api = app.api

    async def go() -> float:
        began = time.monotonic()
        async with app.running():
            took = time.monotonic() - began
            res = api.scope.by_path[("rbac.authorization.k8s.io", "v1", "clusterrolebindings")]
            bindings = await api.scope.caches[res].list(resource_version="0")  # what the cache holds now
            names = {o["metadata"]["name"] for o in bindings.items}
            assert "cluster-admin" in names and "system:kube-scheduler" in names, sorted(names)[:10]
        return took

    took = asyncio.run(go())
    assert took < FRESH_TIMEOUT_S, f"the start took {took:.1f}s: it waited out a cache's timeout"
