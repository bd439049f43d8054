"""`raftkube up/status/down` and `raftkube apiserver` as a user runs them: real processes, kubectl, HTTPS."""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from apiserver.launcher import LocalApiserver
from components.cli.launcher import LocalComponent
from store.launcher import LocalCluster
from tests.apiserver.support import kubectl_binary
from tests.support.cli import raftkube, raftkube_interactive
from tests.support.modes import mode
from tests.support.paths import HOST_NETWORK


def _config(tmp: Path, members: int) -> Path:
    cfg = tmp / "cluster.toml"
    cfg.write_text(
        f"[store]\nmembers = {members}\n[store.raft]\ntick_ms = 20\n[apiserver]\nstartup_timeout = 30.0\n"
        + HOST_NETWORK
    )
    return cfg


def _stop(d: Path) -> None:
    for name in ("controller-manager", "scheduler"):
        LocalComponent(d, name).stop(timeout=5)
    LocalApiserver(d).stop(timeout=5)
    LocalCluster(d).stop_all(timeout=5)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    tmp = tmp_path_factory.mktemp("up")
    d = tmp / "rk"
    proc = raftkube("up", "--detach", "--free-ports", "--data-dir", str(d), "--config", str(_config(tmp, 3)))
    try:
        assert proc.returncode == 0, proc.stderr + proc.stdout
        assert f"export KUBECONFIG={(d / 'kubeconfig').resolve()}" in proc.stdout
        assert "apiserver" in proc.stdout and "ready" in proc.stdout
        yield d
    finally:
        _stop(d)


def _alive(pid: int) -> bool:
    """Alive and not a zombie (the processes are not our children: we cannot reap them)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _ca_context(d: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(d / "apiserver" / "pki" / "ca.crt"))


def _url(d: Path) -> str:
    endpoint = LocalApiserver(d).recorded()
    assert endpoint is not None
    return endpoint.url


def test_kubeconfig_is_private_and_kubectl_reads_readyz(data_dir: Path) -> None:
    kubeconfig = data_dir / "kubeconfig"
    assert mode(kubeconfig) == 0o600
    doc = yaml.safe_load(kubeconfig.read_text())
    assert doc["current-context"] == "raftkube"
    assert doc["clusters"][0]["cluster"]["server"] == _url(data_dir)
    for context in ("raftkube", "raftkube-token"):
        out = subprocess.run(
            [str(kubectl_binary(33)), "--kubeconfig", str(kubeconfig), "--context", context, "get", "--raw", "/readyz"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert (out.returncode, out.stdout.strip()) == (0, "ok"), out.stderr


def test_requests_without_or_with_wrong_credentials_get_401_status(data_dir: Path) -> None:
    with httpx.Client(verify=_ca_context(data_dir)) as c:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = c.get(f"{_url(data_dir)}/readyz", headers=headers)
            assert r.status_code == 401
            body = r.json()
            assert (body["kind"], body["status"], body["reason"], body["code"]) == (
                "Status",
                "Failure",
                "Unauthorized",
                401,
            )
        token = LocalApiserver(data_dir).pki.admin_token()
        assert c.get(f"{_url(data_dir)}/readyz", headers={"Authorization": f"Bearer {token}"}).text == "ok"


def test_status_shows_every_part(data_dir: Path) -> None:
    proc = raftkube("status", "--data-dir", str(data_dir), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    parts = ["store member 1", "store member 2", "store member 3", "apiserver", "controller-manager", "scheduler"]
    parts += ["kubelet-node-1", "kubelet-node-2"]  # cluster.toml's [kubelets] count
    deadline = time.monotonic() + 30
    while len(rows) < len(parts) + 2 and time.monotonic() < deadline:  # the nodes, once registered
        time.sleep(0.5)
        rows = json.loads(raftkube("status", "--data-dir", str(data_dir), "-o", "json").stdout)
    assert [r["part"] for r in rows] == [*parts, "node node-1", "node node-2"]
    processes, nodes = rows[: len(parts)], rows[len(parts) :]
    assert all(r["healthy"] and r["pid"] for r in processes)
    assert rows[3]["role"] == "ready" and rows[3]["url"] == _url(data_dir)
    assert all(r["role"] == "running" and r["url"].startswith("http://127.0.0.1:") for r in processes[4:])
    assert [(r["role"], r["healthy"]) for r in nodes] == [("Ready", True)] * 2
    human = raftkube("status", "--data-dir", str(data_dir)).stdout
    assert (
        "apiserver" in human
        and "leader" in human
        and "controller-manager" in human
        and "scheduler" in human
        and "UNHEALTHY" not in human
    )


def test_store_kill_leader_works_on_the_same_data_dir(data_dir: Path) -> None:
    """The store's own commands find its members; the apiserver keeps answering /readyz meanwhile."""
    proc = raftkube("store", "kill", "leader", "--data-dir", str(data_dir), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    killed = json.loads(proc.stdout)["member"]
    rows = json.loads(raftkube("status", "--data-dir", str(data_dir), "-o", "json").stdout)
    assert next(r for r in rows if r["part"] == f"store member {killed}")["role"] == "down"
    deadline = time.monotonic() + 20
    with httpx.Client(verify=_ca_context(data_dir)) as c:
        token = LocalApiserver(data_dir).pki.admin_token()
        while True:
            r = c.get(f"{_url(data_dir)}/readyz", headers={"Authorization": f"Bearer {token}"}, timeout=6)
            if r.status_code == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert r.status_code == 200
    assert raftkube("store", "start", str(killed), "--data-dir", str(data_dir)).returncode == 0


def test_up_on_a_running_cluster_is_refused(data_dir: Path) -> None:
    """A detached cluster holds no lock, but its apiserver runs: exit 2, saying what to do."""
    pid = LocalApiserver(data_dir).pid()
    proc = raftkube("up", "--detach", "--free-ports", "--data-dir", str(data_dir))
    assert proc.returncode == 2, proc.stdout
    assert f"a cluster already runs in {data_dir}" in proc.stderr and "raftkube down" in proc.stderr
    assert "Traceback" not in proc.stderr and LocalApiserver(data_dir).pid() == pid


def test_down_stops_every_process(data_dir: Path) -> None:
    cluster, apiserver = LocalCluster(data_dir), LocalApiserver(data_dir)
    names = ("controller-manager", "scheduler", "kubelet-node-1", "kubelet-node-2")
    components = [LocalComponent(data_dir, n).pid() for n in names]
    pids = [p for p in (*(cluster.pid(m) for m in cluster.member_ids()), apiserver.pid(), *components) if p]
    assert len(pids) == 8
    supervising = int((data_dir / "up.lock").read_text())  # the detached `up`, which `down` releases first
    proc = raftkube("down", "--data-dir", str(data_dir), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "supervisor": supervising,
        "components": ["controller-manager", "scheduler", "kubelet-node-1", "kubelet-node-2"],
        "apiserver": True,
        "apiservers": ["apiserver"],  # an HA set's: apiserver-1 .. -N
        "store": [1, 2, 3],
    }
    assert [p for p in [*pids, supervising] if _alive(p)] == []
    assert not (data_dir / "apiserver" / "pid").exists()
    rows = json.loads(raftkube("status", "--data-dir", str(data_dir), "-o", "json").stdout)
    assert {r["role"] for r in rows} == {"down"}


def test_foreground_up_stops_the_apiserver_and_the_store_on_ctrl_c(tmp_path: Path) -> None:
    d = tmp_path / "fg"
    proc = raftkube_interactive("up", "--free-ports", "--data-dir", str(d), "--config", str(_config(tmp_path, 1)))
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline and "Ctrl-C" not in line:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
        assert "Ctrl-C" in line, proc.stderr.read() if proc.stderr else ""
        components = [LocalComponent(d, n).pid() for n in ("controller-manager", "scheduler", "kubelet-node-1")]
        pids = [LocalCluster(d).pid(1), LocalApiserver(d).pid(), *components]
        assert None not in pids
        # a second `up` on the same data dir is refused, naming the first; nothing new starts
        again = raftkube("up", "--detach", "--free-ports", "--data-dir", str(d), "--config", str(_config(tmp_path, 1)))
        assert again.returncode == 2
        assert f"{d} is in use by `raftkube up` (pid {proc.pid})" in again.stderr
        assert LocalApiserver(d).pid() == pids[1]
        # what a part logs from now on shows up prefixed with its name; a part that dies is
        # said, restarted (components.cli.supervisor), and the status table comes back with it
        with LocalComponent(d, "scheduler").log_file.open("a") as f:
            f.write("a line the scheduler wrote\n")
        scheduler = components[1]
        assert scheduler is not None
        os.killpg(scheduler, signal.SIGKILL)
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            seen.append(proc.stdout.readline())
            if (
                any(re.match(rf"supervisor \| scheduler \(pid {scheduler}\) killed by SIGKILL", s) for s in seen)
                and any(re.match(r"scheduler\s+\| a line the scheduler wrote", s) for s in seen)
                and any(re.match(r"scheduler\s+\S+\s+\S+\s+\d+\s+1 \(killed by SIGKILL", s) for s in seen)
            ):
                break
        else:
            raise AssertionError(f"no merged log line, restart or new status table in: {seen}")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, (out, err)
        stopped = "stopped the controller-manager, the scheduler, the kubelet-node-1, the kubelet-node-2, the apiserver"
        assert f"{stopped} and store member(s) [1]" in out, (out, err)
        assert [p for p in pids if p is not None and _alive(p)] == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        _stop(d)


# ---------------------------------------------------------------------- bad usage
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--port", "0"], "--port must be from 1 to 65535"),
        (["--advertise-port", "70000"], "--advertise-port must be from 1 to 65535, got 70000"),
        (
            ["--etcd-compaction-interval", "5 minutes"],
            '--etcd-compaction-interval: time: unknown unit " minutes" in duration "5 minutes"',
        ),
        (["--etcd-compaction-interval=-1s"], "--etcd-compaction-interval: from 0 (never) to a week"),
        (["--metric-resolution", "500ms"], "--metric-resolution: from 1s to 3600s, got '500ms'"),
        (["--metric-resolution", "1d"], '--metric-resolution: time: unknown unit "d" in duration "1d"'),
        (["--tls-cert-file", "x.crt"], "give --tls-cert-file and --tls-private-key-file together"),
        (
            ["--client-ca-file", "/nonexistent/ca.crt"],
            "--client-ca-file: CA certificate /nonexistent/ca.crt is missing",
        ),
        ([], "--storage: no cluster in"),
        (["--storage", "http://x:1"], "--storage: storage URL scheme 'http' is not one of raftkube, etcd"),
        (["--storage", "raftkube://127.0.0.1:1"], "--storage: no store credentials in"),
    ],
)
def test_bad_apiserver_flags_exit_2_naming_the_flag(tmp_path: Path, flags: list[str], message: str) -> None:
    proc = raftkube("apiserver", "--data-dir", str(tmp_path / "rk"), *flags)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


def test_a_malformed_token_file_exits_2_naming_flag_and_line(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("good,alice,1\nbad\n")
    proc = raftkube("apiserver", "--data-dir", str(tmp_path / "rk"), "--token-auth-file", str(tokens))
    assert proc.returncode == 2
    assert f"--token-auth-file: token file {tokens}, line 2: needs at least 3 columns" in proc.stderr


def test_down_and_status_without_a_cluster_exit_2(tmp_path: Path) -> None:
    for command in ("down", "status"):
        proc = raftkube(command, "--data-dir", str(tmp_path / "none"))
        assert proc.returncode == 2 and "no cluster in" in proc.stderr
