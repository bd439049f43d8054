"""A whole cluster as a user starts it, `raftkube up --detach` on free ports in a temp dir, for
the end-to-end tests that drive it with kubectl; always brought down by `raftkube down` and then
by pid, whatever happened (a part `down` missed is stopped by `also_stop`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from apiserver.launcher import LocalApiserver
from store.launcher import LocalCluster
from tests.apiserver.support import ApiserverUnderTest
from tests.support.cli import raftkube


@contextmanager
def detached_cluster(
    tmp: Path, config: str, *up_args: str, also_stop: Callable[[Path], None] = lambda data_dir: None
) -> Iterator[ApiserverUnderTest]:
    """`config`: the cluster.toml text; `up_args`: more `raftkube up` flags (kubelets, upstream
    parts); `also_stop(data_dir)`: stops by pid what the test or its flags started besides."""
    data_dir = tmp / "rk"
    config_file = tmp / "cluster.toml"
    config_file.write_text(config)
    try:
        proc = raftkube(
            "up", "--detach", "--free-ports", "--data-dir", str(data_dir), "--config", str(config_file), *up_args,
            timeout=240,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr + proc.stdout
        endpoint = LocalApiserver(data_dir).recorded()
        assert endpoint is not None
        yield ApiserverUnderTest("raftkube", data_dir, endpoint.url, tmp / "kube-cache")
    finally:
        raftkube("down", "--data-dir", str(data_dir), timeout=120)
        also_stop(data_dir)
        LocalApiserver(data_dir).stop(timeout=5)
        LocalCluster(data_dir).stop_all(timeout=5)
