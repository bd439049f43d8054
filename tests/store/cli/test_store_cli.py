"""`raftkube store ...` as a user runs it: real processes, exit codes, human and JSON output."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.client.client import Client
from store.launcher import LocalCluster
from tests.support.cli import raftkube
from tests.support.etcd_env import exports
from tests.support.modes import not_private, umask
from tests.support.paths import ROOT


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("cli") / "rk"
    cfg = d.parent / "cluster.toml"
    cfg.write_text("[store]\nmembers = 3\n[store.raft]\ntick_ms = 20\n")
    proc = raftkube("store", "up", "--detach", "--free-ports", "--data-dir", str(d), "--config", str(cfg))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    try:
        yield d
    finally:
        LocalCluster(d).stop_all(timeout=5)


def test_up_prints_a_status_table_with_a_leader(data_dir: Path) -> None:
    """`store status` shows every member, exactly one leader, all healthy; JSON has the documented keys."""
    proc = raftkube("store", "status", "--data-dir", str(data_dir), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert len(rows) == 3
    for key in ("id", "client_url", "role", "term", "commit_index", "applied_index", "revision", "healthy"):
        assert all(key in r for r in rows), key
    assert sorted(r["role"] for r in rows) == ["follower", "follower", "leader"]
    human = raftkube("store", "status", "--data-dir", str(data_dir))
    assert "leader" in human.stdout and "HEALTH" in human.stdout


def test_members_lists_voters(data_dir: Path) -> None:
    """`store members` lists the three voters."""
    proc = raftkube("store", "members", "--data-dir", str(data_dir), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    members = json.loads(proc.stdout)["members"]
    assert [(m["id"], m["is_learner"]) for m in members] == [(1, False), (2, False), (3, False)]


def _wait_healthy(data_dir: Path, timeout: float = 15) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout
    rows: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        proc = raftkube("store", "status", "--data-dir", str(data_dir), "-o", "json", "--timeout", "1")
        rows = json.loads(proc.stdout)
        if proc.returncode == 0 and any(r["role"] == "leader" for r in rows):
            return rows
        time.sleep(0.2)
    raise AssertionError(f"cluster not healthy: {rows}")


def test_kill_leader_then_restart(data_dir: Path) -> None:
    """`store kill leader` SIGKILLs it; status shows it down; `store start` brings it back."""
    proc = raftkube("store", "kill", "leader", "--data-dir", str(data_dir), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    killed = json.loads(proc.stdout)["member"]
    status = json.loads(raftkube("store", "status", "--data-dir", str(data_dir), "-o", "json").stdout)
    assert next(r for r in status if r["id"] == killed)["role"] == "down"
    assert raftkube("store", "start", str(killed), "--data-dir", str(data_dir)).returncode == 0
    rows = _wait_healthy(data_dir)
    assert all(r["healthy"] for r in rows)


def test_pause_and_resume(data_dir: Path) -> None:
    """`store pause N` stops the process (state T); `store resume N` continues it."""
    assert raftkube("store", "pause", "2", "--data-dir", str(data_dir)).returncode == 0
    pid = LocalCluster(data_dir).pid(2)
    assert pid is not None
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state == "T"
    assert raftkube("store", "resume", "2", "--data-dir", str(data_dir)).returncode == 0
    _wait_healthy(data_dir)


def test_bad_member_and_missing_cluster_exit_2(data_dir: Path, tmp_path: Path) -> None:
    """Unknown member ids and missing clusters are usage errors (exit 2) with a clear message."""
    proc = raftkube("store", "kill", "9", "--data-dir", str(data_dir))
    assert proc.returncode == 2 and "no member 9" in proc.stderr
    proc = raftkube("store", "kill", "bogus", "--data-dir", str(data_dir))
    assert proc.returncode == 2 and "member id or `leader`" in proc.stderr
    proc = raftkube("store", "status", "--data-dir", str(tmp_path / "none"))
    assert proc.returncode == 2 and "no cluster" in proc.stderr
    proc = raftkube("store", "member", "remove", "42", "--data-dir", str(data_dir))
    assert proc.returncode == 2 and "member-not-found" in proc.stderr


def test_snapshot_save_and_restore(data_dir: Path, tmp_path: Path) -> None:
    """A saved backup restores into a new cluster directory that `store up` then serves."""
    backup = tmp_path / "backup.bin"
    proc = raftkube("store", "snapshot", "save", str(backup), "--data-dir", str(data_dir), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["size"] == backup.stat().st_size > 0
    new = tmp_path / "restored"
    proc = raftkube("store", "snapshot", "restore", str(backup), "--data-dir", str(new), "--members", "1")
    assert proc.returncode == 0, proc.stderr
    assert not_private(new) == []  # the backup copied into the member dir is data too
    again = raftkube("store", "snapshot", "restore", str(backup), "--data-dir", str(new))
    assert again.returncode == 2 and "already holds a cluster" in again.stderr
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"garbage")
    proc = raftkube("store", "snapshot", "restore", str(bad), "--data-dir", str(tmp_path / "x"))
    assert proc.returncode == 2 and "not a usable backup" in proc.stderr


def test_foreground_up_stops_everything_on_ctrl_c(tmp_path: Path) -> None:
    """`store up` in the foreground runs until SIGINT, then stops every member and exits 0."""
    d = tmp_path / "fg"
    cfg = tmp_path / "cluster.toml"
    cfg.write_text("[store]\nmembers = 1\n[store.raft]\ntick_ms = 20\n")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "components.cli",
            "store",
            "up",
            "--free-ports",
            "--data-dir",
            str(d),
            "--config",
            str(cfg),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and "Ctrl-C" not in line:
            line = proc.stdout.readline()
        assert "Ctrl-C" in line
        member_pid = LocalCluster(d).pid(1)
        assert member_pid is not None
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0
        assert "stopped member(s) [1]" in out
        with pytest.raises(ProcessLookupError):
            os.kill(member_pid, 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        LocalCluster(d).stop_all(timeout=5)


def test_up_refuses_bad_port_and_timeout_flags(tmp_path: Path) -> None:
    """Flags that override cluster.toml are checked: bad values exit 2 naming the flag."""
    d = str(tmp_path / "x")
    proc = raftkube("store", "up", "--detach", "--data-dir", d, "--client-port", "65000")
    assert proc.returncode == 2 and "--client-port 65000" in proc.stderr
    proc = raftkube("store", "up", "--detach", "--data-dir", d, "--startup-timeout", "0")
    assert proc.returncode == 2 and "--startup-timeout must be positive" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_up_keeps_the_data_dir_private_whatever_the_umask(tmp_path: Path) -> None:
    """Under umask 0 (which would give 0777 directories and 0644 files), after `store up`
    and enough writes for member snapshots, every directory under the data dir is 0700 and
    every file 0600: lock, WAL, snapshots, member.json, pid, member.log, cluster.json, TLS
    keys (certificates, public, are 0644 in those 0700 directories)."""
    d = tmp_path / "private"
    cfg = tmp_path / "cluster.toml"
    cfg.write_text("[store]\nsnapshot_count = 5\nsnapshot_catchup_entries = 2\n[store.raft]\ntick_ms = 20\n")

    async def writes(endpoints: list[str]) -> None:
        async with Client(endpoints, timeout=5, tls=LocalCluster(d).client_tls()) as c:
            for i in range(20):
                await c.put(b"private/%d" % i, b"secret")

    try:
        with umask(0):
            proc = raftkube("store", "up", "--detach", "--free-ports", "--data-dir", str(d), "--config", str(cfg))
            assert proc.returncode == 0, proc.stderr + proc.stdout
            asyncio.run(writes(LocalCluster(d).client_urls()))
        member = d / "store" / "member-1"
        assert {"LOCK", "member.json", "member.log", "pid", "wal", "snap", "tls"} <= {p.name for p in member.iterdir()}
        assert list((member / "snap").glob("*.snap")), "no member snapshot was taken"
        assert not_private(d) == []
    finally:
        LocalCluster(d).stop_all(timeout=5)


@pytest.mark.parametrize(("where", "bits", "who"), [("data", 0o775, "group"), ("store", 0o703, "others")])
def test_up_refuses_a_data_dir_others_can_write(tmp_path: Path, where: str, bits: int, who: str) -> None:
    """Exit 2 with the directory, who can write it and its mode; nothing is started or chmod-ed."""
    d = tmp_path / "shared"
    target = d if where == "data" else d / "store"
    target.mkdir(parents=True)
    target.chmod(bits)
    try:
        proc = raftkube("store", "up", "--detach", "--free-ports", "--data-dir", str(d))
    finally:
        if LocalCluster(d).exists():  # a regression would have started members: stop them
            LocalCluster(d).stop_all(timeout=5)
    assert proc.returncode == 2, proc.stderr + proc.stdout
    assert f"{target} is writable by {who} (mode {bits:04o})" in proc.stderr
    assert target.stat().st_mode & 0o777 == bits
    assert not (d / "store" / "cluster.json").exists()


def test_up_watch_output_limit_flag_reaches_the_members_settings_and_is_checked(tmp_path: Path) -> None:
    """`store up --watch-output-limit` overrides cluster.toml for a new cluster; 0 exits 2."""
    from components.cli.main import build_parser
    from store.cli.cluster import store_settings

    args = build_parser().parse_args(
        ["store", "up", "--data-dir", str(tmp_path / "y"), "--watch-output-limit", "123456789"]
    )
    assert store_settings(args).member_settings()["watch_output_limit"] == 123456789
    d = str(tmp_path / "x")
    proc = raftkube("store", "up", "--detach", "--data-dir", d, "--watch-output-limit", "0")
    assert proc.returncode == 2 and "--watch-output-limit must be a positive number of bytes" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_etcd_env_points_etcdctl_at_the_members(data_dir: Path, tmp_path: Path) -> None:
    """`eval $(raftkube store etcd-env)` is all etcdctl (Debian's 3.4) needs: it writes and reads
    through the members' etcd API with the admin certificate, and a snapshot it saves restores
    into a new raftkube cluster."""
    proc = raftkube("store", "etcd-env", "--data-dir", str(data_dir))
    assert proc.returncode == 0, proc.stderr
    env = exports(proc.stdout)
    members = LocalCluster(data_dir).members()
    assert env["ETCDCTL_API"] == "3"
    assert env["ETCDCTL_ENDPOINTS"].split(",") == ["https://" + m.client_url.split("://")[1] for m in members]
    assert {env[f"ETCDCTL_{v}"] for v in ("CACERT", "CERT", "KEY")} == {
        str((data_dir / "store" / "pki" / f).resolve()) for f in ("ca.crt", "admin.crt", "admin.key")
    }
    missing = raftkube("store", "etcd-env", "--data-dir", str(tmp_path / "none"))
    assert missing.returncode == 2 and "no cluster" in missing.stderr
    etcdctl = shutil.which("etcdctl")
    if etcdctl is None:
        pytest.skip("etcdctl (Debian's etcd-client, installed by .ci/run) is not on PATH")
    shell = {**os.environ, **env}

    def ctl(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [etcdctl, *args], env={**shell, **extra}, capture_output=True, text=True, timeout=30, check=False
        )

    assert ctl("put", "from-etcdctl", "hello").stdout.strip() == "OK"
    assert ctl("get", "from-etcdctl", "--print-value-only").stdout.strip() == "hello"
    snap = tmp_path / "etcdctl.db"
    first = env["ETCDCTL_ENDPOINTS"].split(",")[0]  # etcdctl saves from one member only
    saved = ctl("snapshot", "save", str(snap), ETCDCTL_ENDPOINTS=first)
    assert saved.returncode == 0 and snap.exists(), saved.stderr
    new = tmp_path / "from-etcdctl"
    proc = raftkube("store", "snapshot", "restore", str(snap), "--data-dir", str(new), "--members", "1")
    assert proc.returncode == 0 and "restored revision" in proc.stdout, proc.stderr
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(snap.read_bytes()[:-1] + b"!")
    proc = raftkube("store", "snapshot", "restore", str(damaged), "--data-dir", str(tmp_path / "d"))
    assert proc.returncode == 2 and "damaged" in proc.stderr
