"""A real apiserver process for tests, over either storage backend.

`raftkube`: `raftkube up --detach --free-ports` (three store members and the apiserver, as a
user starts them).  `etcd`: a real etcd 3.4 and `raftkube apiserver --storage etcd://...`.
Either way the test talks HTTPS with the admin token, or runs a real kubectl with the
kubeconfig; every process is stopped by pid at the end.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from apiserver.launcher import Endpoint, LocalApiserver
from apiserver.pki import BALANCER
from components.cli.apiserver_set import ApiserverSet
from components.cli.launcher import COMPONENTS, LocalComponent
from machinery.process.launch import free_ports
from store.launcher import LocalCluster
from tests.store.mvcc.etcd import running_etcd
from tests.support.cli import raftkube
from tests.support.paths import HOST_NETWORK

# Where the versioned kubectl binaries live beside the gcloud dispatcher; PATH is looked at first.
KUBECTL_DIR = Path("/usr/lib/google-cloud-sdk/bin")
KUBECTL_MINORS = (31, 32, 33)
BACKENDS = ("raftkube", "etcd")


def kubectl_binary(minor: int) -> Path:
    """kubectl 1.<minor>; the test fails (never skips) when it is not installed."""
    name = f"kubectl.1.{minor}"
    found = shutil.which(name)
    if found:
        return Path(found)
    path = KUBECTL_DIR / name
    if not path.exists():
        raise AssertionError(
            f"{name} is not installed (looked on PATH and in {KUBECTL_DIR}): the compatibility tests need it"
        )
    return path


@dataclass
class ApiserverUnderTest:
    backend: str
    data_dir: Path
    url: str
    cache_dir: Path

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    @property
    def ca(self) -> Path:
        return self.data_dir / "apiserver" / "pki" / "ca.crt"

    @property
    def token(self) -> str:
        token = LocalApiserver(self.data_dir).pki.admin_token()
        assert token, f"no admin token in {self.data_dir}"
        return token

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def http(self, timeout: float = 30.0) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            verify=self.ssl_context(),
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=timeout,
        )

    def kubectl(
        self,
        *args: str,
        minor: int = 33,
        stdin: str | None = None,
        timeout: float = 60,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(kubectl_binary(minor)), "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir)]
        return subprocess.run(
            [*argv, *args],
            capture_output=True,
            text=True,
            input=stdin,
            timeout=timeout,
            check=False,
            env={**os.environ, **(env or {})},
        )

    def ok(self, *args: str, **kw: Any) -> str:
        """kubectl's stdout; the test fails with kubectl's stderr when it exits non-zero."""
        proc = self.kubectl(*args, **kw)
        assert proc.returncode == 0, f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}\n{proc.stdout}"
        return proc.stdout


def _fast_config(tmp: Path, more: str = "", apiservers: int = 1) -> Path:
    cfg = tmp / "cluster.toml"
    # pods on the host's network unless a test asks for the pod network: what most tests check
    # needs no proxy or DNS, and a pod network is one per machine (its bridges are node-named)
    host = "" if "[kubelets]" in more else HOST_NETWORK
    cfg.write_text(
        "[store]\nmembers = 3\n[store.raft]\ntick_ms = 20\n[apiserver]\nstartup_timeout = 60.0\n"
        f"count = {apiservers}\n" + host + more
    )
    return cfg


def _wait_for_default_service_account(server: ApiserverUnderTest, timeout: float = 30.0) -> None:
    """Until default/default exists (bounded: a config without the serviceaccount controller
    goes on without it)."""
    deadline = time.monotonic() + timeout
    with server.http(timeout=5) as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if http.get("/api/v1/namespaces/default/serviceaccounts/default").status_code == 200:
                    return
            time.sleep(0.1)


def _every_stop(stops: list[Callable[[], object]]) -> None:
    """Run every stop even when one raises (a fixture's teardown must not leave the store
    running because the apiserver's stop failed); then raise the first failure."""
    failures: list[BaseException] = []
    for stop in stops:
        try:
            stop()
        except Exception as e:  # collected, and the first raised below
            failures.append(e)
    if failures:
        raise failures[0]


@contextlib.contextmanager
def running_apiserver(
    tmp: Path,
    backend: str,
    *,
    components: bool = False,
    kubelets: int = 0,
    hollow: int = 0,
    config: str = "",
    apiservers: int = 1,
) -> Iterator[ApiserverUnderTest]:
    """`apiservers`: [apiserver] count (more than one: an HA set behind the balancer).
    `components`: keep the controller-manager and scheduler `up` starts (by default they are
    stopped: tests of the apiserver, and of controllers run in-process, want no other writer).
    `kubelets`: how many local nodes `up` runs (none by default: a test's nodes are its own);
    `hollow`: how many hollow nodes; `config`: more cluster.toml (the components' flags)."""
    data_dir = tmp / "rk"
    cache = tmp / "kube-cache"
    if backend == "raftkube":
        try:
            proc = raftkube(
                "up",
                "--detach",
                "--free-ports",
                "--data-dir",
                str(data_dir),
                "--config",
                str(_fast_config(tmp, config, apiservers)),
                "--kubelets",
                str(kubelets),
                "--hollow-nodes",
                str(hollow),
                timeout=120,
            )
            assert proc.returncode == 0, proc.stderr + proc.stdout
            endpoint = LocalApiserver(data_dir).recorded()
            assert endpoint is not None
            if not components:
                # As a cluster is once `up` has run a moment: the controller-manager has given
                # the default namespace its ServiceAccount (pods there wait for its token).
                # Stopped before that (a race, seen in CI), it never came, and a test's pod
                # never started.
                _wait_for_default_service_account(ApiserverUnderTest(backend, data_dir, endpoint.url, cache))
                for name in COMPONENTS:
                    if name != BALANCER:  # an HA set's front door stays
                        LocalComponent(data_dir, name).stop(timeout=5)
            yield ApiserverUnderTest(backend, data_dir, endpoint.url, cache)
        finally:
            stops: list[Callable[[], object]] = []
            if kubelets or hollow:  # kubelets and their containers too
                stops.append(lambda: raftkube("down", "--data-dir", str(data_dir), timeout=60))
            stops += [functools.partial(LocalComponent(data_dir, name).stop, timeout=5) for name in COMPONENTS]
            stops += [functools.partial(a.stop, timeout=5) for a in ApiserverSet(data_dir).everyone()]
            stops += [functools.partial(LocalCluster(data_dir).stop_all, timeout=5)]
            _every_stop(stops)
        return
    (tmp / "etcd").mkdir(mode=0o700)
    with running_etcd(tmp / "etcd") as etcd:
        server = LocalApiserver(data_dir)
        endpoint = Endpoint("127.0.0.1", free_ports(1)[0], "etcd://" + etcd.url.split("://", 1)[1])
        try:
            server.start(endpoint)
            server.wait_ready(endpoint, 60)
            server.write_kubeconfig(endpoint)
            yield ApiserverUnderTest(backend, data_dir, endpoint.url, cache)
        finally:
            server.stop(timeout=5)
