"""`raftkube up --pod-network`: the flag lies over cluster.toml's [kubelets] pod_network, the
kubelets `up` starts get it, and netns without root is refused naming the flag (exit 2); `down`
after an `up` that ran no pod leaves no node bridge or route on this machine."""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

import pytest

from components.cli import cluster, cluster_network
from components.cli.main import build_parser
from components.kubelet import podnet
from components.kubelet.config import load_kubelet_settings
from machinery.process.command import UsageError
from tests.support.cli import raftkube


def _args(tmp_path: Path, *argv: str) -> argparse.Namespace:
    config = tmp_path / "cluster.toml"
    config.write_text('[kubelets]\ncount = 2\npod_network = "host"\n')
    return build_parser().parse_args(["up", "--config", str(config), *argv])


def test_the_flag_lies_over_cluster_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert cluster._kubelet_settings(_args(tmp_path)).pod_network == "host"
    settings = cluster._kubelet_settings(_args(tmp_path, "--pod-network", "netns"))
    assert settings.pod_network == "netns"
    assert settings.network_args("node-1") == ("--pod-network", "netns", "--pod-cidr", "10.244.1.0/24")


def test_netns_without_root_is_refused_naming_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(UsageError, match="--pod-network netns needs root"):
        cluster._kubelet_settings(_args(tmp_path, "--pod-network", "netns"))


def test_auto_is_the_pod_network_where_it_can_be_had(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """cluster.toml's default: netns as root with `ip` and `nft`, else the host's network, said once."""
    assert load_kubelet_settings(Path("/nonexistent/cluster.toml")).pod_network == "auto"
    monkeypatch.setattr(cluster_network.os, "geteuid", lambda: 0)
    monkeypatch.setattr(cluster_network.shutil, "which", lambda tool: f"/usr/sbin/{tool}")
    assert cluster_network.resolve("auto") == "netns" and capsys.readouterr().err == ""
    monkeypatch.setattr(cluster_network.shutil, "which", lambda tool: None if tool == "nft" else f"/usr/sbin/{tool}")
    assert cluster_network.resolve("auto") == "host"
    assert "pods share the host's network (the pod network: it needs nft on PATH)" in capsys.readouterr().err
    monkeypatch.setattr(cluster_network.os, "geteuid", lambda: 1000)
    assert cluster_network.resolve("auto") == "host" and "it needs root" in capsys.readouterr().err
    assert cluster_network.resolve("host") == "host" and cluster_network.resolve("netns") == "netns"


@pytest.mark.skipif(os.geteuid() != 0, reason="the pod network needs root")
def test_down_after_an_up_without_pods_leaves_no_bridge(tmp_path: Path) -> None:
    """A kubelet makes its node's bridge when it starts, before any pod: `down` removes it all
    the same (a bridge left holding 10.244.1.1 hid the next cluster's node-1 from its pods)."""
    config = tmp_path / "cluster.toml"
    config.write_text('[store]\nmembers = 1\n[kubelets]\ncount = 2\npod_network = "netns"\n')
    data_dir = tmp_path / "rk"
    bridges = [podnet.bridge_name(node) for node in ("node-1", "node-2")]
    up = raftkube(
        "up", "--detach", "--free-ports", "--data-dir", str(data_dir), "--config", str(config), "--hollow-nodes", "0",
        timeout=120,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        assert all(podnet.link_exists(b) for b in bridges)
    finally:
        down = raftkube("down", "--data-dir", str(data_dir), timeout=120)
    assert down.returncode == 0, down.stderr
    assert [b for b in bridges if podnet.link_exists(b)] == []
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True, check=True, timeout=10).stdout
    assert [r for r in routes.splitlines() if r.startswith("10.244.")] == []
