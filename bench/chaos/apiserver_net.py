"""Network faults of an HA set's apiservers on hosts of their own (components.cli.apiserver_set):
an apiserver cut from the store (what it sends to the members' client ports dropped, its live
connections to them reset) or unreachable for its clients (what comes to its port dropped, live
connections reset).  One nftables table per apiserver host, in its namespace, replaced whole
at each change, as the members' (store/chaos/kernel_net.py)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from apiserver.launcher import LocalApiserver
from components.cli.apiserver_set import ApiserverSet
from machinery.process import nft
from machinery.process.hosts import HostNetwork
from store.api.protocol import split_url
from store.chaos.kernel_net import fault_table
from store.launcher import LocalCluster

SS_TIMEOUT_S = 10.0


@dataclass
class _Cut:
    from_store: bool = False
    from_clients: bool = False


@dataclass
class ApiserverNet:
    apiservers: ApiserverSet
    net: HostNetwork
    cuts: dict[str, _Cut] = field(default_factory=dict)

    @classmethod
    def of(cls, data_dir: object) -> ApiserverNet | None:

        apiservers = ApiserverSet(Path(str(data_dir)))
        net = apiservers.host_network()
        return cls(apiservers, net) if net is not None and apiservers.is_ha() else None

    def _prefix(self, name: str) -> list[str]:
        return self.net.argv(self.apiservers.host_name(name), [])

    def _store(self) -> list[tuple[str, int]]:
        return [split_url(m.client_url) for m in LocalCluster(self.apiservers.data_dir).members()]

    def _port(self, name: str) -> int:
        at = LocalApiserver(self.apiservers.data_dir, name).recorded()
        if at is None:
            raise ValueError(f"{name} has no recorded address")
        return at.port

    def _render(self, name: str) -> None:
        cut = self.cuts.setdefault(name, _Cut())
        out = [f"ip daddr {host} tcp dport {port} drop" for host, port in self._store()] if cut.from_store else []
        inbound = [f"tcp dport {self._port(name)} drop"] if cut.from_clients else []
        nft.run(fault_table(out, inbound), prefix=self._prefix(name))

    def _reset(self, name: str, *filters: str) -> None:
        argv = [*self._prefix(name), "ss", "-K", *filters]
        subprocess.run(argv, capture_output=True, timeout=SS_TIMEOUT_S, check=True)

    def cut_from_store(self, name: str) -> None:
        self.cuts.setdefault(name, _Cut()).from_store = True
        self._render(name)
        for _, port in self._store():
            self._reset(name, "dport", "=", str(port))

    def cut_from_clients(self, name: str) -> None:
        self.cuts.setdefault(name, _Cut()).from_clients = True
        self._render(name)
        self._reset(name, "sport", "=", str(self._port(name)))

    def heal(self, name: str) -> None:
        self.cuts[name] = _Cut()
        self._render(name)
