"""The generated module Kubernetes is built in, from a recorded (trimmed) copy of
k8s.io/kubernetes v1.33.13's own go.mod."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.peers.gomod import (
    ETCD_ROOT_MODULE,
    GINKGO_MODULE,
    etcd_benchmark_module,
    etcd_module,
    kubernetes_module,
    newest_patch_before,
    required_version,
    staging_modules,
    staging_version,
)

RECORDED = (Path(__file__).parent / "data" / "kubernetes-v1.33.13.go.mod").read_text()


def test_each_staging_module_is_replaced_by_its_release() -> None:
    modules = staging_modules(RECORDED)
    assert len(modules) == 31 and modules[0] == "k8s.io/api" and "k8s.io/client-go" in modules
    text = kubernetes_module(RECORDED, "v1.33.13")
    assert "module raftkube.local/peers/kube\n" in text and "\ngo 1.24\n" in text
    assert "require k8s.io/kubernetes v1.33.13\n" in text
    for module in modules:
        assert f"{module} v0.33.13\n" in text
        assert f"\t{module} " in text
    assert "./staging" not in text


def test_only_staging_replaces_are_carried_over() -> None:
    """A replace of Kubernetes' that is not its staging tree is not ours to copy."""
    extra = RECORDED + "\nreplace github.com/some/fork => github.com/other/fork v1.0.0\n"
    extra += "replace k8s.io/lonely => ./staging/src/k8s.io/lonely\n"
    text = kubernetes_module(extra, "v1.33.2")
    assert "fork" not in text and "\tk8s.io/lonely => k8s.io/lonely v0.33.2\n" in text


def test_a_go_mod_without_staging_is_refused() -> None:
    with pytest.raises(ValueError, match="staging"):
        kubernetes_module("module k8s.io/kubernetes\n\ngo 1.24.0\n", "v1.33.13")


def test_versions() -> None:
    assert staging_version("v1.33.13") == "v0.33.13"
    with pytest.raises(ValueError):
        staging_version("1.33.13")
    assert required_version(RECORDED, GINKGO_MODULE) == "v2.21.0"
    assert required_version(RECORDED, "github.com/onsi/ginkgo") is None
    assert required_version("require github.com/onsi/ginkgo/v2 v2.1.0\n", GINKGO_MODULE) == "v2.1.0"


def test_etcd_module_requires_server_and_etcdctl_at_one_release() -> None:
    text = etcd_module("v3.6.17")
    assert "go.etcd.io/etcd/server/v3 v3.6.17" in text and "go.etcd.io/etcd/etcdctl/v3 v3.6.17" in text


def test_etcd_benchmark_module_requires_etcds_root_module_alone() -> None:
    """tools/benchmark is in go.etcd.io/etcd/v3; its siblings come from that module's own
    requirements (its replace directives do not count in a module that requires it)."""
    text = etcd_benchmark_module("v3.6.14")
    assert ETCD_ROOT_MODULE == "go.etcd.io/etcd/v3"
    assert "module raftkube.local/peers/etcd-benchmark\n" in text and "\ngo 1.24\n" in text
    assert "require go.etcd.io/etcd/v3 v3.6.14\n" in text
    assert "replace" not in text and "server/v3" not in text and "tools/v3" not in text


def test_a_staging_module_the_proxy_lacks_stands_in_at_an_older_patch() -> None:
    """The proxy does not serve k8s.io/sample-apiserver v0.33.13 (403), which e2e.test imports."""
    assert newest_patch_before(["v0.32.3", "v0.33.3", "v0.33.5", "v0.34.0", "v0.33.13"], "v0.33.13") == "v0.33.5"
    assert newest_patch_before(["v0.32.3", "v0.33.13"], "v0.33.13") is None
    text = kubernetes_module(RECORDED, "v1.33.13", {"k8s.io/sample-apiserver": "v0.33.5"})
    assert "\tk8s.io/sample-apiserver => k8s.io/sample-apiserver v0.33.5\n" in text
    assert "\tk8s.io/api => k8s.io/api v0.33.13\n" in text
