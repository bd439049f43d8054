"""apiserver/kubernetes_service.py: `default/kubernetes`, its Endpoints and EndpointSlice made,
brought back when deleted and fixed when changed, over real registries (in-memory storage)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from apiserver import default_service_cidr
from apiserver.config import load_apiserver_settings
from apiserver.kubernetes_service import KubernetesService, first_address, keep_forever, reconcile
from apiserver.registry.deletion import DeleteOptions
from apiserver.registry.generic import Registry
from machinery.process.config import ConfigError
from tests.apiserver.kinds_support import find, registry, run

TARGET = KubernetesService.of("10.96.0.0/16", "192.0.2.10", 6443)


def registries() -> tuple[Registry, Registry, Registry]:
    return (
        registry(find("", "services")),
        registry(find("", "endpoints")),
        registry(find("discovery.k8s.io", "endpointslices")),
    )


def test_first_address_and_bad_ranges() -> None:
    assert first_address("10.96.0.0/16") == "10.96.0.1"
    assert first_address("fd00:10:96::/112") == "fd00:10:96::1"
    for bad in ("10.96.0.1/16", "10.96.0.0/33", "nonsense", "10.0.0.0/31"):
        with pytest.raises(ValueError):
            first_address(bad)


def test_bad_range_in_cluster_toml_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text('[apiserver]\nservice_cluster_ip_range = "10.96.0.1/16"\n')
    with pytest.raises(ConfigError, match=r"apiserver\.service_cluster_ip_range"):
        load_apiserver_settings(config)
    config.write_text('[apiserver]\nservice_cluster_ip_range = "10.100.0.0/24"\n')
    settings = load_apiserver_settings(config)
    flags = settings.flags()
    assert flags[flags.index("--service-cluster-ip-range") + 1] == "10.100.0.0/24"


def test_made_with_kubes_shape() -> None:
    services, endpoints, slices = registries()

    async def go() -> None:
        await reconcile(TARGET, services, endpoints, slices)
        svc = await services.get("default", "kubernetes")
        assert svc["spec"]["clusterIP"] == "10.96.0.1" and svc["spec"]["type"] == "ClusterIP"
        assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]
        assert svc["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
        ep = await endpoints.get("default", "kubernetes")
        assert ep["subsets"] == [
            {"addresses": [{"ip": "192.0.2.10"}], "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}
        ]
        sl = await slices.get("default", "kubernetes")
        assert sl["addressType"] == "IPv4"
        assert [e["addresses"] for e in sl["endpoints"]] == [["192.0.2.10"]]
        assert sl["ports"] == [{"name": "https", "port": 6443, "protocol": "TCP"}]

    run(go())


def test_deleted_comes_back_changed_is_fixed_and_foreign_labels_stay() -> None:
    services, endpoints, slices = registries()

    async def go() -> None:
        await reconcile(TARGET, services, endpoints, slices)
        await endpoints.delete("default", "kubernetes", DeleteOptions())
        svc = await services.get("default", "kubernetes")
        svc["spec"]["ports"][0]["port"] = 8443
        svc["metadata"]["labels"]["team"] = "x"
        await services.update("default", "kubernetes", svc)
        sl = await slices.get("default", "kubernetes")
        sl["endpoints"] = [{"addresses": ["198.51.100.1"]}]
        await slices.update("default", "kubernetes", sl)

        await reconcile(TARGET, services, endpoints, slices)
        assert (await endpoints.get("default", "kubernetes"))["subsets"][0]["addresses"] == [{"ip": "192.0.2.10"}]
        svc = await services.get("default", "kubernetes")
        assert svc["spec"]["ports"][0]["port"] == 443 and svc["metadata"]["labels"]["team"] == "x"
        assert (await slices.get("default", "kubernetes"))["endpoints"][0]["addresses"] == ["192.0.2.10"]
        # a round with nothing to fix writes nothing
        before = (await services.get("default", "kubernetes"))["metadata"]["resourceVersion"]
        await reconcile(TARGET, services, endpoints, slices)
        assert (await services.get("default", "kubernetes"))["metadata"]["resourceVersion"] == before

    run(go())


def test_another_cluster_ip_is_left_alone() -> None:
    """The ClusterIP is immutable: a Service made with another one is kept as it is (no error loop)."""
    services, endpoints, slices = registries()
    other = KubernetesService.of("10.100.0.0/16", "192.0.2.10", 6443)

    async def go() -> None:
        await reconcile(other, services, endpoints, slices)
        await reconcile(TARGET, services, endpoints, slices)
        assert (await services.get("default", "kubernetes"))["spec"]["clusterIP"] == "10.100.0.1"

    run(go())


def test_loop_runs_rounds_until_cancelled() -> None:
    services, endpoints, slices = registries()
    rounds: list[float] = []

    async def sleep(seconds: float) -> None:
        rounds.append(seconds)
        if len(rounds) == 1:
            await endpoints.delete("default", "kubernetes", DeleteOptions())
        if len(rounds) == 3:
            raise asyncio.CancelledError

    async def go() -> None:
        with pytest.raises(asyncio.CancelledError):
            await keep_forever(TARGET, services, endpoints, slices, interval=0.5, sleep=sleep)
        await endpoints.get("default", "kubernetes")

    run(go())
    assert rounds == [0.5, 0.5, 0.5]


def test_the_default_service_cidr_is_made_and_ready_and_one_made_otherwise_is_left() -> None:

    cidrs = registry(find("networking.k8s.io", "servicecidrs"))

    async def go() -> None:
        assert await default_service_cidr.reconcile(cidrs, ["10.96.0.0/16"]) == "created"
        got = await cidrs.get(None, "kubernetes")
        assert got["spec"]["cidrs"] == ["10.96.0.0/16"]
        (ready,) = got["status"]["conditions"]
        assert (ready["type"], ready["status"], ready["message"]) == (
            "Ready",
            "True",
            default_service_cidr.READY_MESSAGE,
        )
        assert await default_service_cidr.reconcile(cidrs, ["10.96.0.0/16"]) == ""  # kept: nothing to do
        await cidrs.delete(None, "kubernetes", DeleteOptions())
        await cidrs.create(None, {"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.100.0.0/16"]}})
        assert await default_service_cidr.reconcile(cidrs, ["10.96.0.0/16"]) == "mismatched"
        assert "conditions" not in ((await cidrs.get(None, "kubernetes")).get("status") or {})

    run(go())
