"""An operator's view of a CustomResourceDefinition: the official `kubernetes` package's dynamic
client creates a CRD with two served versions, watches its custom resources as an informer
does (list, then watch from the list's resourceVersion, re-watch from the last one seen on any
break) and sees every change, across a restart of the apiserver process, in both versions."""

from __future__ import annotations

import threading
import time
from typing import Any

from kubernetes import client as k8s
from kubernetes import dynamic
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from tests.apiserver.support import ApiserverUnderTest, raftkube

GROUP = "ops.example.com"
SCHEMA = {
    "type": "object",
    "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}}}},
}


def crd() -> dict[str, Any]:
    version = {"served": True, "schema": {"openAPIV3Schema": SCHEMA}, "subresources": {"status": {}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"backups.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "backups", "singular": "backup", "kind": "Backup"},
            "versions": [{"name": "v1", "storage": True, **version}, {"name": "v1beta1", "storage": False, **version}],
        },
    }


def client_for(api: ApiserverUnderTest) -> dynamic.DynamicClient:
    config = k8s.Configuration()
    config.host = api.url
    config.ssl_ca_cert = str(api.ca)
    config.api_key = {"authorization": api.token}
    config.api_key_prefix = {"authorization": "Bearer"}
    return dynamic.DynamicClient(k8s.ApiClient(config))


def resource(client: dynamic.DynamicClient, version: str) -> Any:
    deadline = time.monotonic() + 30
    while True:
        try:
            client.resources.invalidate_cache()
            return client.resources.get(api_version=f"{GROUP}/{version}", kind="Backup")
        except ResourceNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Informer(threading.Thread):
    """List, then watch from the list's revision; on any break, watch again from the last
    revision seen (what client-go's reflector does, minus the cache)."""

    def __init__(self, client: dynamic.DynamicClient, version: str) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.version = version
        self.seen: list[tuple[str, str, int | None]] = []
        self.stopping = threading.Event()
        self.breaks = 0

    def run(self) -> None:
        backups = resource(self.client, self.version)
        listed = backups.get(namespace="default")
        revision = listed.metadata.resourceVersion
        for item in listed.items:
            self.seen.append(("LISTED", item.metadata.name, item.spec.size))
        while not self.stopping.is_set():
            try:
                for event in backups.watch(namespace="default", resource_version=revision, timeout=5):
                    obj = event["raw_object"]
                    revision = obj["metadata"]["resourceVersion"]
                    assert obj["apiVersion"] == f"{GROUP}/{self.version}"
                    self.seen.append((event["type"], obj["metadata"]["name"], obj["spec"].get("size")))
                    if self.stopping.is_set():
                        return
            except Exception:  # the apiserver went away: re-watch from `revision`
                self.breaks += 1
                time.sleep(0.5)


def test_an_operator_watches_custom_resources_across_an_apiserver_restart(
    raftkube_apiserver: ApiserverUnderTest,
) -> None:
    api = raftkube_apiserver
    client = client_for(api)
    crds = client.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.create(body=crd())
    v1 = resource(client, "v1")
    v1.create(
        namespace="default", body={"apiVersion": f"{GROUP}/v1", "kind": "Backup", "metadata": {"name": "a"}, "spec": {}}
    )

    informers = [Informer(client_for(api), "v1"), Informer(client_for(api), "v1beta1")]
    for informer in informers:
        informer.start()
    deadline = time.monotonic() + 30
    while not all(i.seen for i in informers) and time.monotonic() < deadline:
        time.sleep(0.1)

    beta = resource(client, "v1beta1")
    beta.create(
        namespace="default",
        body={"apiVersion": f"{GROUP}/v1beta1", "kind": "Backup", "metadata": {"name": "b"}, "spec": {"size": 3}},
    )
    restarted = raftkube("restart", "apiserver", "--data-dir", str(api.data_dir), timeout=90)
    assert restarted.returncode == 0, restarted.stderr
    after = client_for(api)
    resource(after, "v1").patch(
        namespace="default",
        name="a",
        body={"spec": {"size": 5}},
        content_type="application/merge-patch+json",
    )
    resource(after, "v1").delete(namespace="default", name="b")

    wanted = [("LISTED", "a", 1), ("ADDED", "b", 3), ("MODIFIED", "a", 5), ("DELETED", "b", 3)]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(i.seen != wanted for i in informers):
        time.sleep(0.2)
    for informer in informers:
        informer.stopping.set()
        assert informer.seen == wanted, (informer.version, informer.seen)
    assert any(i.breaks for i in informers), "the restart broke no watch: it did not test the re-watch"
