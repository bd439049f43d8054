"""`raftkube controller-manager` as its own process with its own identity: it runs the
controllers, answers /healthz and /metrics, hands over to a standby when killed, stops
cleanly on SIGTERM, and refuses bad flags with status 2."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from apiserver.pki import ApiserverPKI
from components.client import kubeconfig
from components.controller_manager import add_arguments, controller_makers, options
from components.controllers.endpointslicemirroring import EndpointSliceMirroringController
from components.controllers.nodelifecycle import NodeLifecycleController
from components.controllers.rootcacertpublisher import RootCACertPublisher
from machinery.process.launch import free_ports
from tests.apiserver.support import ApiserverUnderTest


def start(cluster: ApiserverUnderTest, port: int, *extra: str) -> subprocess.Popen[bytes]:
    kubeconfig = ApiserverPKI.of(cluster.data_dir).kubeconfig_of("controller-manager")
    argv = [sys.executable, "-m", "components.cli", "controller-manager", "--kubeconfig", str(kubeconfig)]
    argv += ["--health-port", str(port), "--leader-elect-lease-duration", "3", "--leader-elect-renew-deadline", "2"]
    argv += ["--leader-elect-retry-period", "0.5", *extra]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def wait_for(check: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout:.0f} s: {what}"
        time.sleep(0.1)


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status, r.read().decode()
    except OSError:
        return 0, ""


def has_default_account(admin: httpx.Client, ns: str) -> bool:
    return admin.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default").status_code == 200


def has_root_ca(admin: httpx.Client, ns: str, ca: str) -> bool:
    r = admin.get(f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt")
    return r.status_code == 200 and r.json().get("data") == {"ca.crt": ca}


def test_runs_controllers_and_hands_over(cluster: ApiserverUnderTest, processes: list[subprocess.Popen[bytes]]) -> None:
    first_port, second_port = free_ports(2)
    processes.append(start(cluster, first_port))
    wait_for(lambda: get(f"http://127.0.0.1:{first_port}/healthz") == (200, "ok"), what="the first one's /healthz")
    with cluster.http() as admin:
        admin.post("/api/v1/namespaces", json={"metadata": {"name": "cm-one"}}).raise_for_status()
        wait_for(lambda: has_default_account(admin, "cm-one"), what="a default account from the first one")
        # published with the controller-manager's own identity (RBAC), the kubeconfig's CA by default
        ca = ApiserverPKI.of(cluster.data_dir).ca.read_text()
        wait_for(lambda: has_root_ca(admin, "cm-one", ca), what="kube-root-ca.crt from the first one")
        status, metrics = get(f"http://127.0.0.1:{first_port}/metrics")
        assert status == 200 and 'raftkube_controller_reconciles_total{controller="serviceaccount"}' in metrics
        processes.append(start(cluster, second_port))
        wait_for(lambda: get(f"http://127.0.0.1:{second_port}/healthz")[0] == 200, what="the standby's /healthz")
        lease = admin.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager").json()
        holder = lease["spec"]["holderIdentity"]
        os.killpg(processes[0].pid, signal.SIGKILL)  # a crash: no release
        processes[0].communicate(timeout=10)
        admin.post("/api/v1/namespaces", json={"metadata": {"name": "cm-two"}}).raise_for_status()
        wait_for(lambda: has_default_account(admin, "cm-two"), what="a default account from the standby")
        lease = admin.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager").json()
        assert lease["spec"]["holderIdentity"] not in ("", holder)
    processes[1].send_signal(signal.SIGTERM)
    _, err = processes[1].communicate(timeout=15)
    assert processes[1].returncode == 0, err.decode()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--controllers", "nope"], "--controllers: unknown controller 'nope'"),
        (["--health-port", "70000"], "--health-port must be from 0 to 65535"),
        (["--health-address", "localhost"], "--health-address must be an IP address, got 'localhost'"),
        (["--kubeconfig", "/nonexistent/kubeconfig"], "/nonexistent/kubeconfig: no such file"),
        (["--root-ca-file", "/nonexistent/ca.crt"], "--root-ca-file: /nonexistent/ca.crt: No such file"),
        (["--root-ca-file", __file__], "not PEM certificates"),
        (["--node-monitor-grace-period", "nan"], "--node-monitor-grace-period must be a positive number of seconds"),
        (
            ["--horizontal-pod-autoscaler-sync-period", "0"],
            "--horizontal-pod-autoscaler-sync-period must be a positive number of seconds",
        ),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(tmp_path: Path, args: list[str], says: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "components.cli", "controller-manager", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECONFIG": str(tmp_path / "absent")},
    )
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_the_root_ca_publisher_needs_a_ca() -> None:
    """A kubeconfig without a CA (system trust store) and no --root-ca-file: refused at start,
    unless the publisher is not selected."""
    opts = options(parser().parse_args([]))
    no_ca = kubeconfig.ClientConfig(server="https://127.0.0.1:6443")
    with pytest.raises(ValueError, match="--root-ca-file"):
        controller_makers(opts, no_ca)
    opts = options(parser().parse_args(["--controllers", "*,-root-ca-cert-publisher"]))
    assert RootCACertPublisher not in controller_makers(opts, no_ca)


def test_the_node_monitor_grace_period_reaches_the_node_lifecycle_controller() -> None:
    config = kubeconfig.ClientConfig(server="https://127.0.0.1:6443", ca_data=b"-")
    for args, grace in (([], 40.0), (["--node-monitor-grace-period", "15"], 15.0)):
        makers = controller_makers(options(parser().parse_args(args)), config)
        [maker] = [m for m in makers if getattr(m, "func", None) is NodeLifecycleController]
        assert maker.keywords == {"grace_period": grace}  # type: ignore[attr-defined]


def test_the_mirroring_limit_reaches_the_mirroring_controller() -> None:
    config = kubeconfig.ClientConfig(server="https://127.0.0.1:6443", ca_data=b"-")
    for args, limit in (([], 1000), (["--mirroring-max-endpoints-per-subset", "5"], 5)):
        makers = controller_makers(options(parser().parse_args(args)), config)
        [maker] = [m for m in makers if getattr(m, "func", None) is EndpointSliceMirroringController]
        assert maker.keywords == {"max_endpoints_per_subset": limit}  # type: ignore[attr-defined]
    for bad in ("0", "1001"):
        with pytest.raises(ValueError, match="--mirroring-max-endpoints-per-subset must be from 1 to 1000"):
            options(parser().parse_args(["--mirroring-max-endpoints-per-subset", bad]))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p
