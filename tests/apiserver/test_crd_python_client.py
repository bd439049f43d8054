"""An operator's view of a CustomResourceDefinition: the official `kubernetes` package's dynamic
client creates a CRD with two served versions, watches its custom resources as an informer
does (list, then watch from the list's resourceVersion, re-watch from the last one seen on a
break, list again on 410 Gone) and knows every change, across a restart of the apiserver
process, in both versions."""

from __future__ import annotations

import contextlib
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
    """client-go's reflector, minus the cache: list, then watch from the list's revision; on a
    break, watch again from the last revision seen; on 410 Gone (that revision is older than a
    restarted server's watch cache, as kube's cacher answers), list again.  `state` is what the
    informer believes the namespace holds; `seen` every event, a relist as RELISTED."""

    def __init__(self, client: dynamic.DynamicClient, version: str) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.version = version
        self.seen: list[tuple[str, str, int | None]] = []
        self.state: dict[str, int | None] = {}
        self.stopping = threading.Event()
        self.breaks = 0
        self.relists = 0

    def _list(self, backups: Any, how: str) -> str:
        listed = backups.get(namespace="default")
        self.state = {item.metadata.name: item.spec.size for item in listed.items}
        self.seen += [(how, name, size) for name, size in sorted(self.state.items())]
        return str(listed.metadata.resourceVersion)

    def run(self) -> None:
        backups = resource(self.client, self.version)
        revision = self._list(backups, "LISTED")
        while not self.stopping.is_set():
            try:
                for event in backups.watch(namespace="default", resource_version=revision, timeout=5):
                    obj = event["raw_object"]
                    revision = obj["metadata"]["resourceVersion"]
                    assert obj["apiVersion"] == f"{GROUP}/{self.version}"
                    name, size = obj["metadata"]["name"], obj["spec"].get("size")
                    self.seen.append((event["type"], name, size))
                    if event["type"] == "DELETED":
                        self.state.pop(name, None)
                    else:
                        self.state[name] = size
                    if self.stopping.is_set():
                        return
            except Exception as e:  # the apiserver went away: re-watch from `revision`, or list again
                self.breaks += 1
                time.sleep(0.5)
                if getattr(e, "status", None) == 410:
                    with contextlib.suppress(Exception):  # still down: the next break tries again
                        revision = self._list(backups, "RELISTED")
                        self.relists += 1


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
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(("ADDED", "b", 3) not in i.seen for i in informers):
        time.sleep(0.1)
    for informer in informers:  # watched live, in both versions
        assert informer.seen == [("LISTED", "a", 1), ("ADDED", "b", 3)], (informer.version, informer.seen)

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

    # after the restart each informer resumes its watch or, told 410, lists again; either way it
    # ends up believing what is true, and a change after its relist comes as an event
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(i.state != {"a": 5} for i in informers):
        time.sleep(0.2)
    for informer in informers:
        informer.stopping.set()
        assert informer.state == {"a": 5}, (informer.version, informer.seen)
        resumed = informer.seen[2:]
        assert resumed[-1] in (("DELETED", "b", 3), ("RELISTED", "a", 5)), (informer.version, informer.seen)
    assert any(i.breaks for i in informers), "the restart broke no watch: it did not test the re-watch"
