"""`raftkube up --apiserver upstream` and `bench apiserver --servers kube-apiserver` without
peers: refused with exit 2 and the build command before anything starts; and the RBAC grants
our components get on kube-apiserver (components.cli.upstream_up)."""

from __future__ import annotations

import os
from pathlib import Path

from components.cli.upstream_up import grants
from machinery.bootstrap_policy import bootstrap_objects
from tests.support.cli import raftkube


def test_up_upstream_without_peers_exits_2_naming_the_build_command(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env_cache = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = raftkube(
        "up", "--apiserver", "upstream", "--data-dir", str(data), "--free-ports", env={**os.environ, **env_cache}
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "raftkube peers build --only etcd,kube-apiserver" in proc.stderr
    assert not (data / "etcd").exists() and not (data / "apiserver" / "pid").exists()


def test_bench_apiserver_with_kube_apiserver_but_no_peers_exits_2(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = raftkube(
        "bench", "apiserver", "--servers", "raftkube,kube-apiserver", "--quick", "--json", str(tmp_path / "r.json"),
        env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "raftkube peers build --only etcd,kube-apiserver" in proc.stderr
    assert not (tmp_path / "r.json").exists()


def test_components_are_granted_the_roles_our_apiserver_gives_them() -> None:
    roles = {r["metadata"]["name"]: r for r in bootstrap_objects()[0]}
    made = dict(((obj["kind"], obj["metadata"]["name"]), obj) for _, obj in grants())
    for name in ("kube-scheduler", "kube-controller-manager"):
        role = made[("ClusterRole", f"raftkube:{name}")]
        assert role["rules"] == roles[f"system:{name}"]["rules"]
        binding = made[("ClusterRoleBinding", f"raftkube:{name}")]
        assert binding["roleRef"]["name"] == f"raftkube:{name}"
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": f"system:{name}"}
        ]
    # kube's own system:* roles are left to kube; the kubelets get nothing beyond the Node authorizer
    assert all(not n.startswith("system:") for _, n in made)
    assert all(path.startswith("/apis/rbac.authorization.k8s.io/v1/cluster") for path, _ in grants())


def test_storage_goes_only_with_the_upstream_apiserver_and_a_data_dir_of_its_own(tmp_path: Path) -> None:
    """`--storage` picks kube-apiserver's storage: refused (exit 2, nothing started) without
    `--apiserver upstream`, and `--storage raftkube` in a data dir that holds etcd 3.6's data."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state")}
    data = tmp_path / "data"
    proc = raftkube("up", "--storage", "raftkube", "--data-dir", str(data), "--free-ports", env=env)
    assert proc.returncode == 2 and "--apiserver upstream" in proc.stderr, proc.stdout + proc.stderr
    assert not data.exists() or not any(data.iterdir())
    (data / "etcd").mkdir(parents=True)
    proc = raftkube(
        "up", "--apiserver", "upstream", "--storage", "raftkube", "--data-dir", str(data), "--free-ports", env=env
    )
    assert proc.returncode == 2 and "etcd 3.6's data" in proc.stderr, proc.stdout + proc.stderr
    assert not (data / "store").exists()
