"""What a pod's env and volumes read: each ConfigMap and Secret it names, projected ones
included, read once per TTL however often the pod is synced (a GET per pod per second would be
the apiserver's whole load with a thousand pods), read again after it, and a missing one read
as None.  The apiserver is a recording stand-in here; the kubelet end-to-end tests use the
real one."""

from __future__ import annotations

import asyncio

from components.client.rest import NotFoundError
from components.kubelet.podsources import CACHE_TTL_S, PodSources, references
from machinery.objects import Obj

POD: Obj = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
    "spec": {
        "containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "env"}}]}],
        "volumes": [
            {"name": "v", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}]}},
            {"name": "s", "secret": {"secretName": "creds"}},
        ],
    },
}


class Apiserver:
    def __init__(self) -> None:
        self.gets: list[str] = []
        self.objects: dict[str, Obj] = {
            "/api/v1/namespaces/ns/configmaps/env": {"data": {"A": "1"}},
            "/api/v1/namespaces/ns/configmaps/kube-root-ca.crt": {"data": {"ca.crt": "PEM"}},
        }

    async def get(self, path: str) -> Obj:
        self.gets.append(path)
        if path not in self.objects:
            raise NotFoundError(404, "NotFound", f"{path} not found")
        return self.objects[path]


def test_references_include_projected_sources() -> None:
    assert references(POD) == ({"env", "kube-root-ca.crt"}, {"creds"})


def test_each_source_is_read_once_per_ttl_and_a_missing_one_is_none() -> None:
    api, now = Apiserver(), [0.0]
    sources = PodSources(api, clock=lambda: now[0])  # type: ignore[arg-type]
    for _ in range(5):  # five syncs within the TTL: four GETs (the kubernetes Service, missing here)
        got = asyncio.run(sources.read(POD, tokens=False))
    assert len(api.gets) == 4 and got.service_env == {}
    assert got.config_map("ns", "env") == {"data": {"A": "1"}} and got.secret("ns", "creds") is None
    api.objects["/api/v1/namespaces/ns/configmaps/env"] = {"data": {"A": "2"}}
    now[0] = CACHE_TTL_S  # expired: read again, the update seen
    got = asyncio.run(sources.read(POD, tokens=False))
    assert len(api.gets) == 8 and got.config_map("ns", "env") == {"data": {"A": "2"}}


def test_kubernetes_service_variables_come_from_its_endpoints() -> None:
    """The kubelet reads default/kubernetes and its Endpoints through its client, once per TTL."""
    api = Apiserver()
    api.objects["/api/v1/namespaces/default/services/kubernetes"] = {
        "metadata": {"name": "kubernetes"},
        "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]},
    }
    api.objects["/api/v1/namespaces/default/endpoints/kubernetes"] = {
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 6443}]}]
    }
    sources = PodSources(api)  # type: ignore[arg-type]
    for _ in range(3):
        got = asyncio.run(sources.read(POD, tokens=False))
    assert got.service_env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert got.service_env["KUBERNETES_SERVICE_PORT"] == "6443"
    assert sum("kubernetes" in path for path in api.gets) == 2


def test_the_namespaces_services_come_from_the_lister_and_allocatable_is_passed_on() -> None:
    """Every Service of the pod's namespace (the kubelet's informer), none of another's."""
    asked: list[str] = []
    web = {"metadata": {"name": "web", "namespace": "ns"}, "spec": {"clusterIP": "10.96.3.3", "ports": [{"port": 80}]}}

    def services(namespace: str) -> list[Obj]:
        asked.append(namespace)
        return [web] if namespace == "ns" else []

    sources = PodSources(Apiserver(), services=services)  # type: ignore[arg-type]
    got = asyncio.run(sources.read(POD, tokens=False, allocatable={"memory": "1Gi"}))
    assert asked == ["ns"] and got.service_env["WEB_SERVICE_HOST"] == "10.96.3.3"
    assert got.allocatable == {"memory": "1Gi"}
