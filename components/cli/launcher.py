"""Starting, finding and stopping the local scheduler, controller-manager and kubelets of a data dir.

    <data_dir>/<component>/pid             its pid while it runs (its own process group)
    <data_dir>/<component>/<component>.log its stdout and stderr
    <data_dir>/<component>/health.json     the loopback port of its /healthz and /metrics
    <data_dir>/<component>/args.json       the extra flags it was last started with
    <data_dir>/<component>/host.json       where it runs, when on a host of its own (OnHost)

Each runs as `raftkube <component> --kubeconfig <its own kubeconfig>`, so it proves its own
identity to the apiserver (apiserver.pki.component_kubeconfig writes those).  A kubelet is
`kubelet-<node>`: `raftkube kubelet --node-name <node>`, its containers' runs and logs under
`<data_dir>/kubelet-<node>/root/`.
"""

from __future__ import annotations

import ipaddress
import json
import re
import ssl
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from apiserver.pki import KUBE_PROXY, ApiserverPKI
from machinery.process import disk
from machinery.process.launch import LauncherError, free_ports, read_pid, spawn, stop_process

CLUSTER_DNS = "cluster-dns"
COMPONENTS = ("controller-manager", "scheduler", "hollow-nodes", CLUSTER_DNS, "apiserver-balancer")
KUBELET = re.compile(r"^kubelet-(?P<node>[a-z0-9]([-a-z0-9]*[a-z0-9])?)$")
PROXY = re.compile(r"^proxy-(?P<node>[a-z0-9]([-a-z0-9]*[a-z0-9])?)$")  # a node's service proxy
REPLICA = re.compile(r"^(?P<of>controller-manager|scheduler)-(?P<n>[2-3])$")
"""A second or third controller-manager or scheduler (`replicas` in cluster.toml): the same
command and identity as the first, standing by on the same Lease (leader election)."""
MAX_REPLICAS = 3
COMMANDS = {"cluster-dns": "dns"}  # a component whose `raftkube` command is not its name
PID_FILE = "pid"
HEALTH_FILE = "health.json"
ARGS_FILE = "args.json"  # the extra flags of its last start
HOST_FILE = "host.json"  # where it runs when on a host of its own
LOOPBACK = "127.0.0.1"  # where /healthz listens otherwise (components.health's default; not imported: aiohttp)
MOVABLE = ("controller-manager", "scheduler", "hollow-nodes")
"""The components that may run on a host of their own (they take `--health-address`): nothing
but the apiservers' API is theirs to reach.  A node's parts (its kubelet and proxy, and the DNS
server) may too, on their node's host (components.cli.control_hosts)."""


@dataclass(frozen=True)
class OnHost:
    """A component on a host of its own (machinery.process.hosts): the command prefix that runs
    it there, and the host's address, where its /healthz and /metrics listen."""

    prefix: tuple[str, ...]
    address: str


class LocalComponent:
    def __init__(
        self, data_dir: Path, name: str, extra_args: tuple[str, ...] | None = None, on_host: OnHost | None = None
    ) -> None:
        """`extra_args`: the flags to start it with after the ones it always gets; None: the
        flags (and host) of its last start (`raftkube restart` and the supervisor start it as it
        was).  `on_host`: run it on that host of its own (a controller-manager, scheduler or the
        hollow nodes)."""
        if name not in COMPONENTS and not KUBELET.match(name) and not PROXY.match(name) and not REPLICA.match(name):
            raise ValueError(
                f"no component {name!r} (known: {', '.join(COMPONENTS)}, kubelet-<node>, proxy-<node>,"
                " controller-manager-<2|3>, scheduler-<2|3>)"
            )
        self.extra_args = extra_args
        self.data_dir = Path(data_dir)
        self.name = name
        self.root = self.data_dir / name
        movable = (self.replica_of or name) in MOVABLE or self.node or self.proxied_node or name == CLUSTER_DNS
        if on_host is not None and not movable:
            raise ValueError(
                f"the {name} cannot run on a host of its own (only {', '.join(MOVABLE)} and a node's parts)"
            )
        self.on_host = on_host

    @property
    def log_file(self) -> Path:
        return self.root / f"{self.name}.log"

    @property
    def node(self) -> str | None:
        """The node of a kubelet, else None."""
        m = KUBELET.match(self.name)
        return m["node"] if m else None

    @property
    def proxied_node(self) -> str | None:
        """The node of a service proxy, else None."""
        m = PROXY.match(self.name)
        return m["node"] if m else None

    @property
    def replica_of(self) -> str | None:
        """The component this is a further replica of (controller-manager-2: controller-manager)."""
        m = REPLICA.match(self.name)
        return m["of"] if m else None

    @property
    def kubeconfig(self) -> Path:
        if self.node:
            identity = f"kubelet:{self.node}"
        else:
            identity = KUBE_PROXY if self.proxied_node else self.replica_of or self.name
        return ApiserverPKI.of(self.data_dir).kubeconfig_of(identity)

    @property
    def command(self) -> str:
        if self.node:
            return "kubelet"
        if self.proxied_node:
            return "proxy"
        name = self.replica_of or self.name
        return COMMANDS.get(name, name)

    @property
    def runtime_root(self) -> Path:
        return self.root / "root"

    def pid(self) -> int | None:
        return read_pid(self.root / PID_FILE)

    def health_port(self) -> int | None:
        doc = self._health()
        port = doc.get("port")
        return port if isinstance(port, int) and 0 < port < 65536 else None

    def health_address(self) -> str:
        """Where its /healthz listens: its host's address, or loopback."""
        address = self._health().get("address")
        try:
            return str(ipaddress.ip_address(address)) if isinstance(address, str) else LOOPBACK
        except ValueError:
            return LOOPBACK

    def _health(self) -> dict[str, object]:
        try:
            doc = json.loads((self.root / HEALTH_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def placed(self) -> OnHost | None:
        """The host it was last started on (None: this machine)."""
        try:
            doc = json.loads((self.root / HOST_FILE).read_text())
            prefix, address = doc["prefix"], str(ipaddress.ip_address(doc["address"]))
            if not isinstance(prefix, list) or not all(isinstance(a, str) for a in prefix):
                return None
            return OnHost(tuple(prefix), address)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def start(self) -> int:
        """Start it with its kubeconfig (written by `up`) and a free loopback health port."""
        if (pid := self.pid()) is not None:
            raise LauncherError(f"the {self.name} is already running (pid {pid})")
        if not self.kubeconfig.exists():
            raise LauncherError(f"{self.name}: no kubeconfig at {self.kubeconfig} (`raftkube up` writes it)")
        port = free_ports(1)[0]
        disk.make_dirs(self.root)
        host = self.placed() if self.extra_args is None else self.on_host
        if host is None:
            (self.root / HOST_FILE).unlink(missing_ok=True)
        else:
            doc = {"prefix": list(host.prefix), "address": host.address}
            disk.write_private(self.root / HOST_FILE, (json.dumps(doc) + "\n").encode())
        address = LOOPBACK if host is None else host.address
        health = {"port": port} | ({} if host is None else {"address": address})
        disk.write_private(self.root / HEALTH_FILE, (json.dumps(health) + "\n").encode())
        extra = self._saved_args() if self.extra_args is None else list(self.extra_args)
        argv = [sys.executable, "-m", "components.cli", self.command, "--kubeconfig", str(self.kubeconfig)]
        argv += ["--health-port", str(port)]
        if host is not None:
            argv = [*host.prefix, *argv, "--health-address", address]
        if self.node:
            argv += ["--node-name", self.node, "--root-dir", str(self.runtime_root)]
            argv += self._serving_args(extra)
        elif self.proxied_node:
            argv += ["--node-name", self.proxied_node]
        disk.write_private(self.root / ARGS_FILE, (json.dumps(extra) + "\n").encode())
        argv += extra
        return spawn(argv, self.log_file, self.root / PID_FILE)

    def _saved_args(self) -> list[str]:
        """The flags it was last started with (`raftkube restart` starts it as it was)."""
        try:
            saved = json.loads((self.root / ARGS_FILE).read_text())
        except (OSError, ValueError):
            return []
        return [str(a) for a in saved] if isinstance(saved, list) else []

    def _serving_args(self, extra: list[str]) -> list[str]:
        """A kubelet's HTTPS API: a free port on its address (`--address` among `extra`, the
        node's bridge on the pod network; else loopback), its serving certificate from the
        apiserver CA for that address, and that CA for the apiserver's client certificate."""
        assert self.node is not None
        address = extra[extra.index("--address") + 1] if "--address" in extra[:-1] else LOOPBACK
        creds = ApiserverPKI.of(self.data_dir)
        files = creds.kubelet_serving(self.node, address)
        port = free_ports(1)[0]
        return [
            *(() if "--address" in extra else ("--address", address)), "--port", str(port),
            "--tls-cert-file", str(files.cert), "--tls-private-key-file", str(files.key),
            "--client-ca-file", str(creds.ca),
        ]  # fmt: skip

    @property
    def pid_file(self) -> Path:
        return self.root / PID_FILE

    def stop(self, timeout: float = 10.0) -> bool:
        return stop_process(self.pid_file, timeout)

    def probe(self, timeout: float = 2.0) -> tuple[int, str]:
        """GET /healthz: (status, body); (0, reason) when it cannot be reached."""
        port = self.health_port()
        if port is None:
            return 0, "no health port recorded"
        return get_healthz(f"{self.url}/healthz", timeout)

    @property
    def url(self) -> str:
        port = self.health_port()
        return f"http://{self.health_address()}:{port}" if port else "-"

    def leads(self, timeout: float = 2.0) -> bool | None:
        """Whether it holds its Lease, as its /metrics says (kube's
        `leader_election_master_status`); None: no answer, or no leader election."""
        port = self.health_port()
        if port is None:
            return None
        try:
            with urllib.request.urlopen(f"{self.url}/metrics", timeout=timeout) as r:
                text = r.read(1 << 20).decode("utf-8", "replace")
        except OSError:
            return None
        m = re.search(r"^leader_election_master_status\{[^}]*\} (\S+)$", text, re.M)
        return None if m is None else float(m[1]) == 1.0


def get_healthz(url: str, timeout: float, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    """GET a component's /healthz: (status, body's start); (0, reason) when it cannot be reached."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as r:
            return r.status, r.read(4096).decode("utf-8", "replace").strip()
    except urllib.error.HTTPError as e:
        return e.code, e.read(4096).decode("utf-8", "replace").strip()
    except OSError as e:
        return 0, str(e) or type(e).__name__


def local_replicas(data_dir: Path) -> list[LocalComponent]:
    """The further controller-manager and scheduler replicas that have a directory in `data_dir`."""
    base = Path(data_dir)
    if not base.is_dir():
        return []
    return [LocalComponent(base, p.name) for p in sorted(base.iterdir()) if REPLICA.match(p.name) and p.is_dir()]


def local_kubelets(data_dir: Path) -> list[LocalComponent]:
    """The kubelets that have a directory in `data_dir` (started here once)."""
    base = Path(data_dir)
    if not base.is_dir():
        return []
    return [LocalComponent(base, p.name) for p in sorted(base.iterdir()) if KUBELET.match(p.name) and p.is_dir()]


def local_proxies(data_dir: Path) -> list[LocalComponent]:
    """The service proxies that have a directory in `data_dir`."""
    base = Path(data_dir)
    if not base.is_dir():
        return []
    return [LocalComponent(base, p.name) for p in sorted(base.iterdir()) if PROXY.match(p.name) and p.is_dir()]
