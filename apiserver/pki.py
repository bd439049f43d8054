"""The apiserver's credentials, created in the data dir on first start.

    <data_dir>/apiserver/pki/ca.crt, ca.key              the apiserver CA: signs the serving
                                                         certificate and client certificates
    <data_dir>/apiserver/pki/apiserver.crt, .key         serving certificate (127.0.0.1, localhost, the host)
    <data_dir>/apiserver/pki/admin.crt, .key             client certificate CN=admin, O=system:masters
    <data_dir>/apiserver/pki/apiserver-kubelet-client.*  what the apiserver shows kubelets (CN
                                                         kube-apiserver-kubelet-client, O=system:masters)
    <data_dir>/apiserver/pki/serving-<node>.*           each kubelet's serving certificate
    <data_dir>/apiserver/pki/sa.key, sa.pub              the service-account token signing key (RSA 2048,
                                                         as kubeadm makes it) and its public half
    <data_dir>/apiserver/tokens.csv                      static tokens; one random admin token
    <data_dir>/apiserver/pki/kube-scheduler.crt, ...     each component's client certificate, made
    <data_dir>/apiserver/kubeconfigs/<component>.kubeconfig   with its kubeconfig by `component_kubeconfig`

Components and the users they are (kube's names, which the bootstrap RBAC roles bind):
`scheduler` system:kube-scheduler, `controller-manager` system:kube-controller-manager,
`kubelet:<node>` system:node:<node> in system:nodes (the Node authorizer's identity), `admin`
admin in system:masters.  `raftkube up` writes them for the scheduler, the controller-manager,
the admin and the kubelets of DEFAULT_NODES (cluster.toml has no node list yet); any other
node's is made on first ask.

The CA is separate from the store's (`<data_dir>/store/pki/`): store credentials let a
client write any key, API credentials go through the apiserver's checks.  Files are written
as machinery.process.pki writes them (directories 0700, keys and the token file 0600, atomically).
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509

from apiserver.auth import jws
from apiserver.auth.authn import load_token_file
from apiserver.endpoint import RECORD_FILE, read_record
from machinery.apiserver_set import SERVERS_EXTENSION
from machinery.process import disk, pki

APISERVER_DIR = "apiserver"
PKI_DIR = "pki"
TOKENS_FILE = "tokens.csv"
SERVING = "apiserver"
ADMIN = "admin"
ADMIN_GROUP = "system:masters"
LOCAL_HOSTS = ("127.0.0.1", "localhost")
IN_CLUSTER_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
"""The `kubernetes` Service's names: pods on the pod network dial the API by them or by its
ClusterIP (KUBERNETES_SERVICE_HOST), so the serving certificate names them, as kube-apiserver's
does (its apiserver.crt carries the first service IP and these)."""
SA_KEY = "sa.key"
SA_PUB = "sa.pub"
KUBECONFIGS_DIR = "kubeconfigs"
SCHEDULER = "scheduler"
CONTROLLER_MANAGER = "controller-manager"
KUBELET_PREFIX = "kubelet:"
NODES_GROUP = "system:nodes"
DEFAULT_NODES = ("node-1", "node-2", "node-3")
KUBELET_CLIENT = "apiserver-kubelet-client"
HOLLOW_NODES = "hollow-nodes"
KUBE_PROXY = "kube-proxy"  # every node's service proxy (kube's system:kube-proxy, one for all nodes)
CLUSTER_DNS = "cluster-dns"  # the cluster DNS server (system:kube-dns, as kube binds its role)
BALANCER = "apiserver-balancer"  # in front of an HA set's apiservers; it only asks their /readyz

KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
FRONT_PROXY_DIR = "front-proxy"
FRONT_PROXY_CLIENT = "front-proxy-client"
"""The aggregator's client certificate (kube's name, and the CN aggregated servers allow)."""
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_MAX_NODE_NAME = 64 - len("kubelet-")  # the certificate's file stem is kubelet-<node>


@dataclass(frozen=True, slots=True)
class Identity:
    """A component's user: the certificate's file stem, CN (user name) and O (groups)."""

    stem: str
    user: str
    groups: tuple[str, ...] = ()


def component_identity(component: str) -> Identity:
    """The identity of `scheduler`, `controller-manager`, `admin` or `kubelet:<node>`; ValueError else."""
    if component == SCHEDULER:
        return Identity("kube-scheduler", "system:kube-scheduler")
    if component == CONTROLLER_MANAGER:
        return Identity("kube-controller-manager", "system:kube-controller-manager")
    if component == ADMIN:
        return Identity(ADMIN, ADMIN, (ADMIN_GROUP,))
    if component == KUBE_PROXY:
        return Identity(KUBE_PROXY, "system:kube-proxy")
    if component == CLUSTER_DNS:
        return Identity(CLUSTER_DNS, "system:kube-dns")
    if component == BALANCER:
        # authenticated and nothing more: RBAC's public-info-viewer lets it read /readyz
        return Identity(BALANCER, "raftkube:apiserver-balancer")
    if component == HOLLOW_NODES:
        # it impersonates each hollow node's system:node identity; impersonating any user is
        # as strong as system:masters, so it is said plainly
        return Identity(HOLLOW_NODES, "raftkube:hollow-nodes", (ADMIN_GROUP,))
    if component.startswith(KUBELET_PREFIX):
        node = component[len(KUBELET_PREFIX) :]
        if not _NODE_NAME.fullmatch(node) or len(node) > _MAX_NODE_NAME:
            raise ValueError(
                f"node name {node!r}: must be a lowercase DNS subdomain of at most {_MAX_NODE_NAME} characters"
            )
        return Identity(f"kubelet-{node}", f"system:node:{node}", (NODES_GROUP,))
    raise ValueError(
        f"unknown component {component!r}: {SCHEDULER}, {CONTROLLER_MANAGER}, {ADMIN}, {HOLLOW_NODES}"
        f" or {KUBELET_PREFIX}<node>"
    )


@dataclass(frozen=True, slots=True)
class ApiserverPKI:
    """Where the apiserver's credentials are under one data dir."""

    root: Path

    @classmethod
    def of(cls, data_dir: Path) -> ApiserverPKI:
        return cls(Path(data_dir) / APISERVER_DIR)

    @property
    def pki_dir(self) -> Path:
        return self.root / PKI_DIR

    @property
    def ca(self) -> Path:
        return self.pki_dir / pki.CA_CERT

    @property
    def serving(self) -> pki.CertFiles:
        return pki.CertFiles(self.pki_dir / f"{SERVING}.crt", self.pki_dir / f"{SERVING}.key", self.ca)

    @property
    def admin(self) -> pki.CertFiles:
        return pki.CertFiles(self.pki_dir / f"{ADMIN}.crt", self.pki_dir / f"{ADMIN}.key", self.ca)

    @property
    def tokens(self) -> Path:
        return self.root / TOKENS_FILE

    @property
    def service_account_key(self) -> Path:
        return self.pki_dir / SA_KEY

    @property
    def service_account_pub(self) -> Path:
        return self.pki_dir / SA_PUB

    def kubeconfig_of(self, component: str) -> Path:
        return self.root / KUBECONFIGS_DIR / f"{component.replace(':', '-')}.kubeconfig"

    def ensure(self, host: str = "127.0.0.1", also: tuple[str, ...] = ()) -> None:
        """Create whatever is missing: the CA, the serving certificate (reissued when it does
        not name `host`, the addresses `also` (the advertised one, the `kubernetes` Service's
        ClusterIP) and the Service's in-cluster names), the admin
        certificate and the token file.  Existing files are kept."""
        disk.make_dirs(self.root)
        if pki.CA_CERT in _names(self.pki_dir) or pki.CA_KEY in _names(self.pki_dir):
            ca = pki.load_files(self.pki_dir, "ca")
        else:
            ca = pki.create_ca(self.pki_dir, "raftkube apiserver CA")
        hosts = tuple(
            dict.fromkeys((*serving_hosts(host), *(a for h in also for a in serving_hosts(h)), *IN_CLUSTER_NAMES))
        )
        if not self.serving.cert.exists() or not _names_hosts(self.serving.cert, hosts):
            pki.issue_cert(ca, self.pki_dir, SERVING, common_name="raftkube-apiserver", hosts=hosts, server=True)
        if not self.admin.cert.exists() or not self.admin.key.exists():
            pki.issue_cert(ca, self.pki_dir, ADMIN, common_name=ADMIN, organizations=(ADMIN_GROUP,), client=True)
        if not self.tokens.exists():
            token = secrets.token_urlsafe(32)
            disk.write_private(self.tokens, f'{token},{ADMIN},{ADMIN},"{ADMIN_GROUP}"\n'.encode())
        if not self.service_account_key.exists():
            disk.write_private(self.service_account_key, jws.generate_rsa_pem())
        if not self.service_account_pub.exists():
            key = jws.load_signing_key(self.service_account_key)
            disk.write_private(self.service_account_pub, jws.public_pem(key.key.public_key()))

    def component_cert(self, component: str) -> pki.CertFiles:
        """The component's client certificate, issued by the CA when missing or no longer valid."""
        who = component_identity(component)
        try:
            return pki.load_files(self.pki_dir, who.stem)
        except pki.PKIError:
            ca = pki.load_files(self.pki_dir, "ca")
            return pki.issue_cert(
                ca, self.pki_dir, who.stem, common_name=who.user, organizations=who.groups, client=True
            )

    def kubelet_client(self) -> pki.CertFiles:
        """The certificate the apiserver shows kubelets (kube's apiserver-kubelet-client), issued
        when missing or no longer valid."""
        try:
            return pki.load_files(self.pki_dir, KUBELET_CLIENT)
        except pki.PKIError:
            ca = pki.load_files(self.pki_dir, "ca")
            return pki.issue_cert(
                ca,
                self.pki_dir,
                KUBELET_CLIENT,
                common_name=KUBELET_CLIENT_USER,
                organizations=(ADMIN_GROUP,),
                client=True,
            )

    def kubelet_serving(self, node: str, address: str) -> pki.CertFiles:
        """A kubelet's serving certificate (for its node name, `address` and the local names),
        issued when missing, no longer valid, or not naming `address`."""
        component_identity(KUBELET_PREFIX + node)  # checks the name
        stem = f"serving-{node}"
        hosts = tuple(dict.fromkeys((node, *serving_hosts(address))))
        try:
            files = pki.load_files(self.pki_dir, stem)
            if _names_hosts(files.cert, hosts):
                return files
        except pki.PKIError:
            pass
        ca = pki.load_files(self.pki_dir, "ca")
        return pki.issue_cert(ca, self.pki_dir, stem, common_name=f"system:node:{node}", hosts=hosts, server=True)

    def front_proxy_client(self) -> pki.CertFiles:
        """The certificate the aggregator shows the servers behind APIServices (kube's
        front-proxy-client), issued by a CA of its own (kube's front-proxy-ca, so that a
        certificate of the cluster CA cannot pass for the proxy), both made when missing or
        no longer valid.  Its CA is the `ca` of the returned files."""
        directory = self.pki_dir / FRONT_PROXY_DIR
        try:
            return pki.load_files(directory, FRONT_PROXY_CLIENT)
        except pki.PKIError:
            try:
                ca = pki.load_files(directory, "ca")
            except pki.PKIError:
                for stale in (pki.CA_CERT, pki.CA_KEY):
                    (directory / stale).unlink(missing_ok=True)
                ca = pki.create_ca(directory, "raftkube front-proxy CA")
            return pki.issue_cert(ca, directory, FRONT_PROXY_CLIENT, common_name=FRONT_PROXY_CLIENT, client=True)

    def admin_token(self) -> str | None:
        """The first token of user admin in the token file (None when there is none)."""
        for token, user in load_token_file(self.tokens).items():
            if user.name == ADMIN:
                return token
        return None


def component_kubeconfig(
    data_dir: Path, component: str, *, server: str | None = None, servers: tuple[str, ...] = ()
) -> Path:
    """`<data_dir>/apiserver/kubeconfigs/<component>.kubeconfig` (0600), written now: the
    component's client certificate (made when missing) inline, the CA, and `server` (default:
    the URL `raftkube up` recorded).  What a launcher hands each process: `--kubeconfig <it>`."""
    creds = ApiserverPKI.of(Path(data_dir))
    if server is None:
        endpoint = read_record(creds.root / RECORD_FILE)
        if endpoint is None:
            raise ValueError(f"no apiserver recorded in {creds.root} (start one with `raftkube up`)")
        server = endpoint.url
    creds.ensure()
    files = creds.component_cert(component)
    user = component_identity(component).user
    doc = client_kubeconfig(
        server,
        creds.ca,
        user,
        {
            "client-certificate-data": kubeconfig_data(files.cert),
            "client-key-data": kubeconfig_data(files.key),
        },
        servers,
    )
    path = creds.kubeconfig_of(component)
    disk.make_dirs(path.parent)
    disk.write_private(path, yaml.safe_dump(doc, sort_keys=False).encode())
    return path


def user_kubeconfig(data_dir: Path, name: str, groups: tuple[str, ...] = (), *, out: Path | None = None) -> Path:
    """A kubeconfig for a person: a new client certificate (CN = `name`, O = `groups`) signed by
    the apiserver's client CA, inline, for the recorded server.  The apiserver trusts it at
    once (no restart: it checks certificates against the CA); RBAC decides what it may do.
    ValueError names what is wrong."""
    if not name or name != name.strip() or any(ord(c) < 0x20 for c in name):
        raise ValueError(f"user name {name!r}: must be non-empty, without control characters or outer spaces")
    if name.startswith("system:"):
        raise ValueError(f"user name {name!r}: names starting with system: are reserved for components")
    for group in groups:
        if not group or any(ord(c) < 0x20 for c in group):
            raise ValueError(f"group {group!r}: must be non-empty, without control characters")
    creds = ApiserverPKI.of(Path(data_dir))
    endpoint = read_record(creds.root / RECORD_FILE)
    if endpoint is None:
        raise ValueError(f"no apiserver recorded in {creds.root} (start one with `raftkube up`)")
    creds.ensure()
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    stem = f"user-{re.sub(r'[^a-z0-9.-]+', '-', name.lower())[:40]}-{digest}"
    ca = pki.load_files(creds.pki_dir, "ca")
    files = pki.issue_cert(ca, creds.pki_dir, stem, common_name=name, organizations=tuple(groups), client=True)
    doc = client_kubeconfig(
        endpoint.url,
        creds.ca,
        name,
        {"client-certificate-data": kubeconfig_data(files.cert), "client-key-data": kubeconfig_data(files.key)},
    )
    path = out or creds.root / KUBECONFIGS_DIR / f"{stem}.kubeconfig"
    disk.make_dirs(path.parent)
    disk.write_private(path, yaml.safe_dump(doc, sort_keys=False).encode())
    return path


def write_component_kubeconfigs(
    data_dir: Path, server: str, nodes: tuple[str, ...] = DEFAULT_NODES, servers: tuple[str, ...] = ()
) -> list[Path]:
    """Every component's kubeconfig for `server` (what `raftkube up` writes); `servers`: an HA
    set's apiservers, which our components dial directly (failing over among them)."""
    components = [ADMIN, SCHEDULER, CONTROLLER_MANAGER, HOLLOW_NODES, KUBE_PROXY, CLUSTER_DNS]
    components += [f"{KUBELET_PREFIX}{n}" for n in nodes]
    return [component_kubeconfig(data_dir, c, server=server, servers=servers) for c in components]


def cluster_entry(server: str, ca: Path, servers: tuple[str, ...] = ()) -> dict[str, Any]:
    """A kubeconfig's cluster: `server` (what kubectl dials), the CA, and with `servers` the
    `raftkube.io/apiservers` extension our client library fails over among
    (components.client.kubeconfig reads it; kubectl ignores it)."""
    entry: dict[str, Any] = {"server": server, "certificate-authority-data": kubeconfig_data(ca)}
    if servers:
        entry["extensions"] = [{"name": SERVERS_EXTENSION, "extension": {"servers": list(servers)}}]
    return entry


def client_kubeconfig(
    server: str, ca: Path, user: str, credentials: dict[str, str], servers: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A kubeconfig with one cluster, one user named `user`, and one context (`raftkube`)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "raftkube", "cluster": cluster_entry(server, ca, servers)}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "raftkube", "context": {"cluster": "raftkube", "user": user}}],
        "current-context": "raftkube",
        "preferences": {},
    }


def kubeconfig_data(path: Path) -> str:
    """A file's bytes as a kubeconfig's `*-data` field holds them (base64)."""
    return base64.b64encode(path.read_bytes()).decode("ascii")


def serving_hosts(host: str) -> tuple[str, ...]:
    """The names the serving certificate must carry: the local ones, and `host` unless it is a
    wildcard address (0.0.0.0, ::), which no client dials."""
    extra: tuple[str, ...] = ()
    try:
        if not ipaddress.ip_address(host.strip("[]")).is_unspecified:
            extra = (host.strip("[]"),)
    except ValueError:
        extra = (host,)
    return tuple(dict.fromkeys((*LOCAL_HOSTS, *extra)))


def _names(directory: Path) -> set[str]:
    try:
        return {p.name for p in directory.iterdir()}
    except FileNotFoundError:
        return set()


def _names_hosts(cert_file: Path, hosts: tuple[str, ...]) -> bool:
    """Whether the certificate's subjectAltName has every one of `hosts`."""
    try:
        cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    have = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)} | set(san.get_values_for_type(x509.DNSName))
    wanted = set()
    for h in hosts:
        try:
            wanted.add(str(ipaddress.ip_address(h)))
        except ValueError:
            wanted.add(h)
    return wanted <= have
