"""The cluster a chaos run works on: `raftkube up --detach` in a data dir of its own, an HA
control plane (3 store members, 2 apiservers behind the balancer, 2 controller-managers and 2
schedulers on short leases, hollow nodes), its parts found by their pid files, and `down` with
a check that no process it ever had is left.

The run goes through the product's own path (`up`, the supervisor that restarts what dies,
`down`), so what the checks pass on is what a user runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from apiserver.launcher import LocalApiserver
from apiserver.pki import BALANCER
from bench.chaos.apiserver_net import ApiserverNet
from components.cli import control_hosts
from components.cli.apiserver_set import ApiserverSet
from components.cli.launcher import LocalComponent
from machinery.canary import ENV as CANARY_ENV
from machinery.process.hosts import free_subnet
from store.chaos.kernel_net import KernelMesh
from store.cli.cluster import status_rows
from store.failpoints import HTTP_ENV as FAILPOINTS_HTTP_ENV
from store.launcher import LocalCluster

LEASE_FLAGS = [
    *("--leader-elect-lease-duration", "4", "--leader-elect-renew-deadline", "3"),
    *("--leader-elect-retry-period", "0.5"),
]
"""Short leases, so a killed leader's standby takes over within seconds (kube's are 15 s)."""
LEASE_DURATION_S = 4.0
HOLLOW = "hollow-nodes"
UP_TIMEOUT_S = 180.0


def config_text(apiservers: int, members: int, hosts_subnet: str = "") -> str:
    """`hosts_subnet`: the store members each on a host of its own on that LAN (root)."""
    hosts = f'hosts = "netns"\nhosts_subnet = "{hosts_subnet}"\n' if hosts_subnet else ""
    return (
        f"[store]\nmembers = {members}\n{hosts}"
        f'[apiserver]\ncount = {apiservers}\nstartup_timeout = 60.0\netcd_compaction_interval = "0"\n'
        f"[controller_manager]\nreplicas = 2\nargs = {json.dumps(LEASE_FLAGS)}\n"
        f"[scheduler]\nreplicas = 2\nargs = {json.dumps(LEASE_FLAGS)}\n"
        '[kubelets]\ncount = 0\npod_network = "host"\n'
    )


@dataclass
class ChaosCluster:
    data_dir: Path
    apiservers: int = 2
    members: int = 3
    hollow: int = 3
    canary: str = ""
    hosts: str = "local"
    """netns: every part but the balancer on a host of its own (network faults from the kernel;
    components.cli.control_hosts)."""
    seen_pids: set[int] = field(default_factory=set)
    """Every pid any part had while the run looked (the no-process-left check)."""
    mesh: KernelMesh | None = None
    apiserver_net: ApiserverNet | None = None
    mesh_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """One network change at a time (the mesh re-renders a member's whole table per change)."""
    unplugged: Counter[str] = field(default_factory=Counter)
    """The hosts whose cable is pulled, by how many faults at once."""
    net_faulted: set[str] = field(default_factory=set)
    """The links under a network fault now: "store" (every member's: the members share links,
    and a heal clears a link whole) or an apiserver's name.  A second fault there waits its
    turn as a fault with no target, so that the first one's heal cannot end it unseen."""
    cable_lock: threading.Lock = field(default_factory=threading.Lock)

    # ------------------------------------------------------------------ up and down
    def up(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.data_dir.parent / f"{self.data_dir.name}.toml"
        config.write_text(config_text(self.apiservers, self.members, free_subnet() if self.hosts == "netns" else ""))
        env = {**os.environ, FAILPOINTS_HTTP_ENV: "1"} | ({CANARY_ENV: self.canary} if self.canary else {})
        proc = self._raftkube(
            "up", "--detach", "--free-ports", "--data-dir", str(self.data_dir), "--config", str(config),
            "--hollow-nodes", str(self.hollow), timeout=UP_TIMEOUT_S, env=env,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"raftkube up failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        self.note_pids()
        if self.hosts == "netns":
            self.mesh = KernelMesh(self.store())
            self.apiserver_net = ApiserverNet.of(self.data_dir)

    def down(self) -> str:
        """`raftkube down`; its output."""
        self.note_pids()
        if self.mesh is not None:
            self.mesh.close()  # its delay proxies, if a fault left one
        proc = self._raftkube("down", "--data-dir", str(self.data_dir), timeout=180.0)
        return (proc.stdout + proc.stderr).strip()

    def left_behind(self, wait: float = 10.0) -> list[int]:
        """The pids of the run's parts still alive (after `down`, none may be)."""
        deadline = time.monotonic() + wait
        while True:
            alive = sorted(p for p in self.seen_pids if _alive(p))
            if not alive or time.monotonic() > deadline:
                return alive
            time.sleep(0.2)

    def _raftkube(
        self, *args: str, timeout: float, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "components.cli", *args],
            capture_output=True, text=True, timeout=timeout, check=False, env=env,
        )  # fmt: skip

    # ------------------------------------------------------------------ parts
    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    def store(self) -> LocalCluster:
        return LocalCluster(self.data_dir)

    def apiserver_parts(self) -> list[LocalApiserver]:
        return ApiserverSet(self.data_dir).serving()

    def apiserver_urls(self) -> list[str]:
        return [e.url for a in self.apiserver_parts() if (e := a.recorded()) is not None]

    def replicas(self, name: str) -> list[LocalComponent]:
        return [LocalComponent(self.data_dir, n) for n in (name, f"{name}-2")]

    def store_leader(self) -> int | None:
        for row in status_rows(self.store(), 1.0):
            if row.get("role") == "leader":
                return int(row["id"])
        return None

    def component_leader(self, name: str) -> LocalComponent | None:
        """The replica of the controller-manager or scheduler whose /metrics says it leads."""
        for c in self.replicas(name):
            if c.pid() is not None and c.leads():
                return c
        return None

    def host_of(self, part: str) -> str | None:
        """The host a part (store-<i>, apiserver-<n>, a controller-manager, scheduler or the
        hollow nodes) runs on; None: on this machine."""
        store = self.store()
        if store.host_network() is None:
            return None
        if part.startswith("store-"):
            return store.host_name(int(part.removeprefix("store-")))
        if part.startswith("apiserver-") and ApiserverSet(self.data_dir).is_ha():
            return ApiserverSet.host_name(part)
        if part != BALANCER and LocalComponent(self.data_dir, part).placed() is not None:
            return control_hosts.host_name(part)
        return None

    def set_cable(self, host: str, plugged: bool) -> None:
        """Pull a host's cable, or plug it back once no fault still wants it pulled (two faults
        on one host at once: the second's end plugs it)."""
        net = self.store().host_network()
        assert net is not None
        with self.cable_lock:
            self.unplugged[host] += -1 if plugged else 1
            if plugged and self.unplugged[host] <= 0:
                del self.unplugged[host]
                net.set_link(host, True)
            elif not plugged and self.unplugged[host] == 1:
                net.set_link(host, False)

    def failpoint(self, member_id: int, name: str, action: str | None) -> None:
        """Arm (`action`: "sleep(800)", ...) or disarm (None) a store member's failpoint at runtime
        (its /debug/failpoints, served because `up` ran with RAFTKUBE_FAILPOINTS_HTTP=1)."""
        http_url = next(m.http_url for m in self.store().members() if m.id == member_id)
        data = action.encode() if action is not None else None
        method = "PUT" if action is not None else "DELETE"
        request = urllib.request.Request(f"{http_url}/debug/failpoints/{name}", data=data, method=method)
        with urllib.request.urlopen(request, timeout=2) as r:
            r.read()

    def failpoint_hits(self, member_id: int, name: str) -> int:
        """How many times a member's failpoint fired since it started (-1: no answer)."""
        http_url = next(m.http_url for m in self.store().members() if m.id == member_id)
        try:
            with urllib.request.urlopen(f"{http_url}/debug/failpoints", timeout=2) as r:
                return int(json.loads(r.read()).get(name, {}).get("hits", 0))
        except (OSError, ValueError, AttributeError):
            return -1

    def note_pids(self) -> None:
        store = self.store()
        pids = [store.pid(m) for m in store.member_ids()]
        pids += [a.pid() for a in ApiserverSet(self.data_dir).everyone()]
        pids += [c.pid() for c in (*self.replicas("controller-manager"), *self.replicas("scheduler"))]
        pids += [ApiserverSet(self.data_dir).balancer().pid(), LocalComponent(self.data_dir, HOLLOW).pid()]
        self.seen_pids.update(p for p in pids if p is not None)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie is gone for our purpose
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True
