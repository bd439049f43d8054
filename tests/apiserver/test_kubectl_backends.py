"""The storage-facing kubectl commands (get, apply, delete, get -w) on BOTH backends: the
raftkube store and etcd 3.4, each kubectl 1.31/1.32/1.33.  What they print must not depend on
where the objects live (resourceVersions, list order, watch events, 404s)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.apiserver.kubectl_support import MINORS, Kubectl, configmap, deployment, json_of, kubectl_running, rows
from tests.apiserver.support import ApiserverUnderTest


@pytest.fixture(scope="module")
def api(apiserver: ApiserverUnderTest) -> Any:
    with apiserver.http() as client:
        yield client


@pytest.fixture(params=MINORS, ids=lambda m: f"kubectl-1.{m}")
def k(apiserver: ApiserverUnderTest, request: pytest.FixtureRequest, tmp_path: Path) -> Kubectl:
    return Kubectl(apiserver, int(request.param), tmp_path)


def test_apply_get_and_delete(k: Kubectl) -> None:
    name = f"be-{k.minor}"
    path = k.file(deployment(name, replicas=1))
    assert k("apply", "-f", path) == f"deployment.apps/{name} created\n"
    assert k("apply", "-f", path) == f"deployment.apps/{name} unchanged\n"
    path = k.file(deployment(name, replicas=2))
    assert k("apply", "-f", path) == f"deployment.apps/{name} configured\n"
    table = rows(k("get", "deployments", "-A", "-l", f"app={name}"))
    assert table[0] == ["NAMESPACE", "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert table[1][:5] == ["default", name, "0/2", "0", "0"]
    live = yaml.safe_load(k("get", "deployment", name, "-o", "yaml"))
    assert live["spec"]["replicas"] == 2 and live["metadata"]["generation"] == 2
    listed = json_of(k, "deployments", "-l", f"app={name}")
    assert [i["metadata"]["resourceVersion"] for i in listed["items"]] == [live["metadata"]["resourceVersion"]]
    ssa = k.file(configmap(f"be-ssa-{k.minor}", {"be": name}, a="1"))
    assert k("apply", "--server-side", "-f", ssa) == f"configmap/be-ssa-{k.minor} serverside-applied\n"
    assert k("delete", "-f", path) == f'deployment.apps "{name}" deleted\n'
    assert k("delete", "cm", "-l", f"be={name}") == f'configmap "be-ssa-{k.minor}" deleted\n'
    gone = k.fails("get", "deployment", name)
    assert gone.strip() == f'Error from server (NotFound): deployments.apps "{name}" not found'


def test_get_watch_sees_a_create_an_update_and_a_delete(k: Kubectl, api: httpx.Client) -> None:
    label = f"bw-{k.minor}"
    k("create", "-f", k.file(configmap(f"bw0-{k.minor}", {"w": label}, a="1")))
    with kubectl_running(k.server, "get", "cm", "-w", "-l", f"w={label}", "-o", "name", minor=k.minor) as watch:
        assert watch.next_line() == f"configmap/bw0-{k.minor}"
        body = configmap(f"bw1-{k.minor}", {"w": label}, a="1")
        assert api.post("/api/v1/namespaces/default/configmaps", json=body).status_code == 201
        assert watch.next_line() == f"configmap/bw1-{k.minor}"
        patch = json.dumps({"data": {"a": "2"}})
        headers = {"Content-Type": "application/merge-patch+json"}
        r = api.patch(f"/api/v1/namespaces/default/configmaps/bw0-{k.minor}", content=patch, headers=headers)
        assert r.status_code == 200, r.text
        assert watch.next_line() == f"configmap/bw0-{k.minor}"
        assert api.delete(f"/api/v1/namespaces/default/configmaps/bw1-{k.minor}").status_code == 200
        assert watch.next_line() == f"configmap/bw1-{k.minor}"
        assert watch.proc.poll() is None
