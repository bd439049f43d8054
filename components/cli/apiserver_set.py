"""The apiservers `raftkube up` runs: one, or with `[apiserver] count = N` (2-5) an HA set of N
behind the apiserver balancer, as HA kube-apiservers run behind their load balancer.

    count 1:  <data_dir>/apiserver/             the apiserver, on the cluster's address
    count N:  <data_dir>/apiserver/             the credentials and the cluster's address (no process)
              <data_dir>/apiserver-1 .. -N/     each apiserver: its own port, pid, log, watch cache
              <data_dir>/apiserver-balancer/    the balancer (components.balancer), on the cluster's address

Decisions, where kube leaves them to the installer:
- Each apiserver listens on a free port of the cluster's host, picked at its first start and
  recorded (apiserver-N/apiserver.json), so restarts keep it; the balancer takes the cluster's
  port, so a kubeconfig written for one apiserver keeps working when the set grows.
- kubectl dials the balancer (it takes one `server`); our components dial the apiservers
  themselves (the kubeconfig's `raftkube.io/apiservers` extension) and fail over among them
  (components.client.rest), so neither the balancer nor any one apiserver is needed.
- default/kubernetes's endpoints name the balancer (every apiserver is started with
  `--advertise-port` of it): on one host the apiservers differ only in port, which one
  Endpoints subset cannot say, and pods reach whichever is ready through it.  Apiservers on
  hosts of their own (one port, an address each) each name themselves, and the endpoints list
  every live one (apiserver/master_leases.py, kube's lease endpoint reconciler).
- The first apiserver starts and is ready before the others start: it makes the bootstrap
  objects and any certificate the others would otherwise race to write.
- `up` with a smaller count than before removes the directories of the apiservers (and, at 1,
  the balancer) no longer run: they hold a pid, a log and flags, no data.
- With the store's members on hosts of their own (`[store] hosts = "netns"`), an HA set's
  apiservers are too: apiserver-N on host `a<N>` of the same LAN at its (20+N)th address, on
  the cluster's port, as separate machines would be; the balancer and the components stay on
  this machine and reach them over the LAN (so partitions of an apiserver come from the
  kernel, with TLS on).  The one shared serving certificate names every apiserver's address.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from apiserver.endpoint import Endpoint
from apiserver.launcher import FRONT, MEMBER, LocalApiserver
from apiserver.pki import BALANCER
from components.cli.launcher import LocalComponent
from machinery.process.hosts import HostNetwork, HostsError
from machinery.process.launch import LauncherError, free_ports
from store.launcher import LocalCluster

MAX_APISERVERS = 5
HOST_OFFSET = 20
"""apiserver-N's host address is the LAN's (HOST_OFFSET+N)th host address (members hold the first ones)."""


@dataclass(frozen=True)
class Placement:
    """Where one apiserver of the plan runs."""

    apiserver: LocalApiserver
    endpoint: Endpoint
    in_host: tuple[str, ...] = ()
    """The command prefix that runs it on its host (empty: on this machine)."""


class ApiserverSet:
    """The apiserver processes of a data dir, whichever way `up` last ran them."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self.front = LocalApiserver(self.data_dir)
        """The cluster's address record; the apiserver itself when it runs alone."""

    # ------------------------------------------------------------------ what exists
    def is_ha(self) -> bool:
        return (self.data_dir / BALANCER).is_dir()

    def members(self) -> list[LocalApiserver]:
        """The HA set's apiservers (those with a directory), by number."""
        if not self.data_dir.is_dir():
            return []
        found = [p.name for p in self.data_dir.iterdir() if MEMBER.match(p.name) and p.is_dir()]
        return [LocalApiserver(self.data_dir, name) for name in sorted(found, key=lambda n: int(n.split("-")[1]))]

    def serving(self) -> list[LocalApiserver]:
        """The apiservers that serve: the HA set's, else the one."""
        return self.members() if self.is_ha() else [self.front]

    def everyone(self) -> list[LocalApiserver]:
        """Every apiserver process this data dir may have running (what `down` stops)."""
        return [self.front, *self.members()]

    def balancer(self) -> LocalComponent:
        return LocalComponent(self.data_dir, BALANCER)

    def urls(self) -> tuple[str, ...]:
        """The HA set's apiservers' URLs (the kubeconfigs' extension); () for a single apiserver."""
        if not self.is_ha():
            return ()
        return tuple(e.url for m in self.members() if (e := m.recorded()) is not None)

    def host_network(self) -> HostNetwork | None:
        """The store's hosts' LAN, when its members run on hosts of their own."""
        store = LocalCluster(self.data_dir)
        return store.host_network() if store.exists() else None

    @staticmethod
    def host_name(name: str) -> str:
        return "a" + name.removeprefix("apiserver-")

    # ------------------------------------------------------------------ planning
    def plan(self, endpoint: Endpoint, count: int) -> list[Placement]:
        """Each apiserver to run and where, for the cluster at `endpoint`; makes the directories
        of an HA set (so that is_ha() holds) and removes those of a larger earlier one; on a
        hosts' LAN, makes the apiservers' hosts."""
        if not 1 <= count <= MAX_APISERVERS:
            raise ValueError(f"[apiserver] count must be from 1 to {MAX_APISERVERS}, got {count}")
        wanted = [] if count == 1 else [f"apiserver-{i}" for i in range(1, count + 1)]
        for old in self.members():
            if old.name not in wanted and old.pid() is None:
                shutil.rmtree(old.root, ignore_errors=True)
        if count == 1:
            if self.balancer().pid() is None:
                shutil.rmtree(self.data_dir / BALANCER, ignore_errors=True)
            return [Placement(self.front, endpoint)]
        self.balancer().root.mkdir(parents=True, exist_ok=True, mode=0o700)
        net = self.host_network()
        plan = []
        for i, name in enumerate(wanted, start=1):
            member = LocalApiserver(self.data_dir, name)
            if net is not None:
                address = str(net.address(HOST_OFFSET + i))
                try:
                    net.ensure(self.host_name(name), address)
                except HostsError as e:
                    raise LauncherError(f"{name}: {e}") from None
                at = Endpoint(address, endpoint.port, endpoint.storage)
                plan.append(Placement(member, at, tuple(net.argv(self.host_name(name), []))))
            else:
                had = member.recorded()
                if had is None or had.host != endpoint.host or had.storage != endpoint.storage:
                    had = Endpoint(endpoint.host, free_ports(1, endpoint.host)[0], endpoint.storage)
                plan.append(Placement(member, had))
            member.record(plan[-1].endpoint)
        return plan


def is_apiserver(name: str) -> bool:
    """`apiserver` or an HA set's `apiserver-<n>` (a part name of `raftkube logs/stop/start`)."""
    return name == FRONT or bool(MEMBER.match(name))
