"""`raftkube store up --hosts netns` (root): every member on a host of its own, a network
namespace with its own address, the same ports on each, as on separate machines.  etcdctl
reaches each member at its address with certificate checks on (the member certificates name
the addresses); a member added later gets the next host; a member killed and started again
keeps its host; `store down` leaves no namespace, link or process behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from machinery.process.hosts import NETNS_DIR
from machinery.process.iproute import link_exists
from store.launcher import LocalCluster
from tests.support.cli import raftkube
from tests.support.etcd_env import etcdctl_env
from tests.support.network import free_cidr

TIMEOUT = 60


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    d = tmp_path / "rk"
    subnet = free_cidr()
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(f'[store]\nmembers = 3\nhosts_subnet = "{subnet}"\n[store.raft]\ntick_ms = 20\n')
    proc = raftkube("store", "up", "--hosts", "netns", "--detach", "--data-dir", str(d), "--config", str(cfg))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    try:
        yield d, subnet
    finally:
        LocalCluster(d).stop_all(timeout=5)


def test_each_member_runs_on_a_host_of_its_own_and_down_removes_the_hosts(cluster: tuple[Path, str]) -> None:
    data_dir, subnet = cluster
    base = subnet.rsplit(".", 1)[0]
    status = raftkube("store", "status", "--data-dir", str(data_dir), "-o", "json")
    assert status.returncode == 0, status.stderr
    rows = json.loads(status.stdout)
    assert sorted(r["client_url"] for r in rows) == [f"tcp://{base}.{10 + i}:2379" for i in (1, 2, 3)]
    assert all(r["healthy"] for r in rows)
    local = LocalCluster(data_dir)
    net = local.host_network()
    assert net is not None and net.hosts() == ["m1", "m2", "m3"]
    for m in (1, 2, 3):  # the member process is in its host's namespace
        pid = local.pid(m)
        assert pid is not None
        assert os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(net.netns_path(f"m{m}")).st_ino

    etcdctl = shutil.which("etcdctl")
    if etcdctl is not None:  # CI installs it; the address checks above hold without it
        env = etcdctl_env(data_dir)
        for m in (1, 2, 3):  # each member by its address, its certificate checked against it
            url = f"https://{base}.{10 + m}:2379"
            one = {k: v for k, v in env.items() if k != "ETCDCTL_ENDPOINTS"}
            argv = [etcdctl, f"--endpoints={url}", "put", f"k{m}", "v"]
            put = subprocess.run(argv, env=one, capture_output=True, text=True, timeout=TIMEOUT, check=False)
            assert put.returncode == 0 and put.stdout.strip() == "OK", put.stderr

    added = raftkube("store", "member", "add", "m4", "--data-dir", str(data_dir), "-o", "json")
    assert added.returncode == 0, added.stderr
    m4 = json.loads(added.stdout)["member"]
    assert m4["client_url"] == f"tcp://{base}.14:2379" and m4["peer_url"] == f"tcp://{base}.14:2380"
    assert raftkube("store", "kill", "2", "--data-dir", str(data_dir)).returncode == 0
    assert raftkube("store", "start", "2", "--data-dir", str(data_dir)).returncode == 0
    assert net.hosts() == ["m1", "m2", "m3", "m4"]

    down = raftkube("store", "down", "--data-dir", str(data_dir))
    assert down.returncode == 0, down.stderr
    assert net.hosts() == [] and not link_exists(net.bridge)
    assert not any(link_exists(net.veth(f"m{m}")) for m in (1, 2, 3, 4))
    assert not list(NETNS_DIR.glob(f"rkh-{net.key}-*"))
    assert all(local.pid(m) is None for m in (1, 2, 3, 4))
