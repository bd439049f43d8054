"""Growing a raftkube store the etcd way: `etcdctl member add` registers a member, `etcdctl
member update` moves its peer URL, `raftkube store member add NAME --id ID` starts it (the step
where an etcd operator starts the etcd process), `etcdctl member promote` makes it a voter, and
etcd clients then use it like any member.  Debian's etcdctl 3.4 (and, under the `peers`
marker, the etcdctl 3.6 `raftkube peers build` builds) against a 3-member store started by
the CLI, with the TLS files `raftkube store etcd-env` points at."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from machinery.process.launch import free_ports
from machinery.process.peers import peer_path
from store.launcher import LocalCluster
from tests.support.cli import raftkube
from tests.support.etcd_env import etcdctl_env

TIMEOUT = 30


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A 3-member store started by the CLI, stopped (by pid) whatever happens."""
    d = tmp_path / "rk"
    cfg = tmp_path / "cluster.toml"
    cfg.write_text("[store]\nmembers = 3\n[store.raft]\ntick_ms = 20\n")
    proc = raftkube("store", "up", "--detach", "--free-ports", "--data-dir", str(d), "--config", str(cfg))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    try:
        yield d
    finally:
        LocalCluster(d).stop_all(timeout=5)


def _etcdctl(data_dir: Path, flavor: str) -> Any:
    if flavor == "3.4":
        binary = shutil.which("etcdctl")
        if binary is None:
            pytest.skip("etcdctl (Debian's etcd-client, installed by .ci/run) is not on PATH")
    else:
        binary = str(peer_path("etcdctl"))
        if not Path(binary).exists():
            pytest.fail(f"etcdctl 3.6 is not built ({binary}): run `raftkube peers build`", pytrace=False)
    env = etcdctl_env(data_dir)

    def ctl(*args: str, endpoint: str = "") -> subprocess.CompletedProcess[str]:
        """etcdctl on every member (ETCDCTL_ENDPOINTS), or on `endpoint` alone."""
        use = {k: v for k, v in env.items() if k != "ETCDCTL_ENDPOINTS"} if endpoint else env
        argv = [binary, f"--endpoints={endpoint}", *args] if endpoint else [binary, *args]
        return subprocess.run(argv, env=use, capture_output=True, text=True, timeout=TIMEOUT, check=False)

    return ctl


def _members(ctl: Any) -> dict[int, dict[str, Any]]:
    proc = ctl("member", "list", "-w", "json")
    assert proc.returncode == 0, proc.stderr
    return {m["ID"]: m for m in json.loads(proc.stdout)["members"]}


@pytest.mark.parametrize("flavor", ["3.4", pytest.param("3.6", id="3.6", marks=pytest.mark.peers)])
def test_a_member_added_and_moved_with_etcdctl_is_started_by_raftkube_and_promoted(data_dir: Path, flavor: str) -> None:
    ctl = _etcdctl(data_dir, flavor)
    assert ctl("put", "before-m4", "v").returncode == 0
    first, moved = free_ports(2)

    added = ctl("member", "add", "m4", f"--peer-urls=https://127.0.0.1:{first}", "--learner")
    assert added.returncode == 0, added.stderr
    m = re.search(r"Member +([0-9a-f]+) added (?:as learner )?to cluster", added.stdout)
    assert m, added.stdout
    hex_id = m[1]
    new_id = int(hex_id, 16)
    assert 'ETCD_NAME="m4"' in added.stdout
    unstarted = _members(ctl)[new_id]
    assert unstarted["peerURLs"] == [f"https://127.0.0.1:{first}"] and unstarted["isLearner"]
    assert not unstarted.get("name") and not unstarted.get("clientURLs")  # etcd's "unstarted"
    assert "unstarted" in ctl("member", "list").stdout

    # etcd's refusals, with etcd's words
    taken = ctl("member", "add", "m5", f"--peer-urls=https://127.0.0.1:{first}")
    assert taken.returncode != 0 and "etcdserver: Peer URLs already exists" in taken.stderr
    missing = ctl("member", "update", "abcdef", f"--peer-urls=https://127.0.0.1:{moved}")
    assert missing.returncode != 0 and "etcdserver: member not found" in missing.stderr

    updated = ctl("member", "update", hex_id, f"--peer-urls=https://127.0.0.1:{moved}")
    assert updated.returncode == 0 and "updated" in updated.stdout, updated.stderr
    assert _members(ctl)[new_id]["peerURLs"] == [f"https://127.0.0.1:{moved}"]

    started = raftkube("store", "member", "add", "m4", "--id", str(new_id), "--data-dir", str(data_dir))
    assert started.returncode == 0, started.stderr + started.stdout
    assert "took over member" in started.stdout
    again = raftkube("store", "member", "add", "m4b", "--id", str(new_id), "--data-dir", str(data_dir))
    assert again.returncode == 2 and "started already" in again.stderr
    nobody = raftkube("store", "member", "add", "m9", "--id", "999", "--data-dir", str(data_dir))
    assert nobody.returncode == 2 and "no such member" in nobody.stderr

    deadline = time.monotonic() + TIMEOUT  # the learner catches up from the moved peer URL
    while (promoted := ctl("member", "promote", hex_id)).returncode != 0:
        assert "in sync with leader" in promoted.stderr, promoted.stderr
        assert time.monotonic() < deadline, promoted.stderr
        time.sleep(0.2)
    voter = _members(ctl)[new_id]
    assert voter["name"] == "m4" and not voter.get("isLearner")
    assert voter["peerURLs"] == [f"https://127.0.0.1:{moved}"]
    (url,) = voter["clientURLs"]

    on_it = ctl("get", "before-m4", "--print-value-only", endpoint=url)
    assert on_it.returncode == 0 and on_it.stdout.strip() == "v", on_it.stderr
    assert ctl("put", "through-m4", "w", endpoint=url).returncode == 0
    assert ctl("get", "through-m4", "--print-value-only").stdout.strip() == "w"
    assert len(_members(ctl)) == 4
