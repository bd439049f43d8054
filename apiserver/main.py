"""`raftkube apiserver`: the Kubernetes API over HTTPS, as its own process.

Serves `apiserver.http.app.build_app` on uvicorn (one worker), TLS with the serving
certificate, asking clients for a certificate without requiring one (CERT_OPTIONAL: token
clients connect too; a certificate that is presented must verify against the client CA).
HTTP/2 is offered in the handshake beside HTTP/1.1; connections that take it are served by
apiserver.http.http2 on the same port.
Credentials not given as flags are created on first start in `<data_dir>/apiserver/`
(apiserver.pki).  SIGTERM or SIGINT stop it: it stops accepting, lets requests in flight
finish (a few seconds at most), closes the storage and exits 0.

Bad flags exit 2 with a message naming the flag (raised as UsageError, which
components.cli maps to 2); a storage that cannot be reached is not an error at start:
/readyz says so until it can.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import ipaddress
import logging
import signal
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from apiserver import canary, transport_cycle
from apiserver.admission.assembly import plugin_names
from apiserver.aggregator.front_proxy import DEFAULT_ALLOWED_NAMES, FrontProxy
from apiserver.auth import jws
from apiserver.auth.authn import Authenticator, ClientCAError, TokenFileError
from apiserver.auth.serviceaccount_setup import ServiceAccountTokenSettings
from apiserver.auth.serviceaccount_tokens import DEFAULT_ISSUER, MAX_EXPIRATION_SECONDS
from apiserver.authz.assembly import DEFAULT_MODE, parse_mode
from apiserver.compactor import DEFAULT_INTERVAL as COMPACTION_INTERVAL
from apiserver.heap import HeapKeeper
from apiserver.http.app import build_app
from apiserver.http.connection_limits import ConnectionLimits, guarded
from apiserver.http.http2 import ALPN_PROTOCOLS, API_LIMITS, MAX_STREAMS, negotiating
from apiserver.http.inflight import InFlightLimits
from apiserver.kubernetes_service import DEFAULT_SERVICE_CIDR, KubernetesService
from apiserver.malloc import fix_mmap_threshold
from apiserver.node_ports import DEFAULT_RANGE as DEFAULT_NODE_PORTS
from apiserver.node_ports import parse_range as parse_port_range
from apiserver.pki import ApiserverPKI
from apiserver.resource_metrics import INTERVAL_S as METRIC_RESOLUTION_S
from apiserver.resource_metrics import parse_resolution
from apiserver.storage import open_storage, parse_storage_url
from apiserver.storage.interface import Storage
from apiserver.tls_scope import protocol_class, ws_protocol_class
from machinery.duration import SECOND_NS, DurationError, parse_duration, parse_seconds
from machinery.http2 import Http2Limits
from machinery.process import pki
from machinery.process.command import DEFAULT_DATA_DIR, UsageError
from machinery.process.launch import LauncherError, port_free
from store.client.layout import StoreLayout

DEFAULT_PORT = 6443
GRACEFUL_SHUTDOWN_SECONDS = 5
MAX_HTTP2_STREAMS = 10_000


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("apiserver", help="serve the Kubernetes API over HTTPS (one process)")
    add_arguments(p)
    p.set_defaults(run=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="data dir (credentials, the local store)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTPS port (default {DEFAULT_PORT})")
    p.add_argument(
        "--storage",
        help="raftkube://host:port,... or etcd://host:port,... (default: the data dir's store)",
    )
    p.add_argument("--insecure-store", action="store_true", help="talk to a raftkube store in plaintext")
    p.add_argument(
        "--service-cluster-ip-range",
        default=DEFAULT_SERVICE_CIDR,
        help=f"the Services' CIDR; its first address is default/kubernetes's IP (default {DEFAULT_SERVICE_CIDR})",
    )
    p.add_argument(
        "--service-node-port-range",
        default=f"{DEFAULT_NODE_PORTS[0]}-{DEFAULT_NODE_PORTS[1]}",
        help="the ports NodePort Services get theirs from (default %(default)s, as kube)",
    )
    p.add_argument(
        "--bind-address",
        default="",
        help="address to listen on when it is not --host (0.0.0.0: every address, so that pods in"
        " network namespaces reach the advertised one; the certificate names --host and --advertise-address)",
    )
    p.add_argument(
        "--advertise-address",
        help="the address default/kubernetes's endpoints name (default: --host, or 127.0.0.1 when it is a wildcard)",
    )
    p.add_argument(
        "--advertise-port",
        type=int,
        help="the port default/kubernetes's endpoints name (default: --port; an HA set names its balancer's)",
    )
    p.add_argument(
        "--etcd-compaction-interval",
        default="5m0s",
        help="how often the storage is compacted to the revision of the interval before (kube's flag; 0: never)",
    )
    p.add_argument(
        "--metric-resolution",
        default=f"{METRIC_RESOLUTION_S:g}s",
        help="how often the kubelets' usage is read for metrics.k8s.io (metrics-server's flag, a Go duration;"
        f" default {METRIC_RESOLUTION_S:g}s)",
    )
    p.add_argument("--tls-cert-file", type=Path, help="serving certificate (default: generated in the data dir)")
    p.add_argument("--tls-private-key-file", type=Path, help="its private key")
    p.add_argument("--client-ca-file", type=Path, help="CA bundle that signs client certificates")
    p.add_argument("--token-auth-file", type=Path, help='static tokens, CSV: token,user,uid,"group1,group2"')
    p.add_argument("--access-log", action="store_true", help="log every request to stderr")
    p.add_argument(
        "--authorization-mode",
        default=DEFAULT_MODE,
        help=f"authorizers in order, comma-separated: Node, RBAC, AlwaysAllow (default {DEFAULT_MODE})",
    )
    p.add_argument(
        "--disable-admission-plugins",
        default="",
        help="admission plugins not to run, comma-separated (default: every plugin runs, in kube's order)",
    )
    p.add_argument(
        "--service-account-signing-key-file",
        type=Path,
        help="PEM private key (RSA, or EC P-256/384/521) that signs service-account tokens"
        " (default: sa.key generated in the data dir)",
    )
    p.add_argument(
        "--service-account-key-file",
        type=Path,
        action="append",
        default=[],
        help="PEM public keys, private keys or certificates that verify service-account tokens, besides the"
        " signing key (repeatable: keys of an earlier signing key keep its tokens valid)",
    )
    p.add_argument(
        "--service-account-issuer",
        action="append",
        default=[],
        help=f"the tokens' issuer (iss); repeat to also accept tokens of older issuers, the first signs"
        f" (default {DEFAULT_ISSUER})",
    )
    p.add_argument(
        "--api-audiences",
        default="",
        help="audiences a token must have one of to reach the API, comma-separated (default: the first issuer)",
    )
    p.add_argument(
        "--service-account-max-token-expiration",
        default="",
        help="longest lifetime a TokenRequest gets, as a duration (e.g. 24h; from 1h to 2^32 s; default: no cap)",
    )
    p.add_argument(
        "--service-account-extend-token-expiration",
        type=_bool,
        default=True,
        help="pod-bound tokens asked for 3607 s live a year and are reported stale after 3607 s, as kube's"
        " (true or false, default true)",
    )
    p.add_argument(
        "--service-account-jwks-uri",
        default="",
        help="jwks_uri in /.well-known/openid-configuration (default: this server's /openid/v1/jwks)",
    )
    p.add_argument(
        "--kubelet-client-certificate",
        type=Path,
        help="client certificate the apiserver shows kubelets (default: apiserver-kubelet-client in the data dir)",
    )
    p.add_argument("--kubelet-client-key", type=Path, help="its private key")
    p.add_argument(
        "--kubelet-certificate-authority",
        type=Path,
        help="CA that signs the kubelets' serving certificates (default: the data dir's apiserver CA)",
    )
    p.add_argument(
        "--proxy-client-cert-file",
        type=Path,
        help="client certificate the aggregator shows the servers behind APIServices"
        " (default: front-proxy-client of a front-proxy CA made in the data dir)",
    )
    p.add_argument("--proxy-client-key-file", type=Path, help="its private key")
    p.add_argument(
        "--requestheader-client-ca-file",
        type=Path,
        help="the CA that signed --proxy-client-cert-file, published for aggregated servers to trust",
    )
    p.add_argument(
        "--requestheader-allowed-names",
        default=",".join(DEFAULT_ALLOWED_NAMES),
        help="common names of the front-proxy certificates aggregated servers accept"
        f" (default {','.join(DEFAULT_ALLOWED_NAMES)})",
    )
    edge = ConnectionLimits()
    seats = InFlightLimits()
    p.add_argument(
        "--max-requests-inflight",
        type=int,
        default=seats.reads,
        help=f"reads each priority level (exempt, system, workload) runs at once; past it 429 (default {seats.reads})",
    )
    p.add_argument(
        "--max-mutating-requests-inflight",
        type=int,
        default=seats.writes,
        help=f"writes each priority level runs at once (default {seats.writes})",
    )
    p.add_argument(
        "--max-watches-inflight",
        type=int,
        default=seats.watches,
        help=f"open watches each priority level holds; an ordinary user at most half (default {seats.watches})",
    )
    p.add_argument(
        "--inflight-per-user-floor",
        type=int,
        default=seats.floor,
        help=f"the least a user's fair share of a level's seats falls to (default {seats.floor})",
    )
    p.add_argument(
        "--request-header-timeout",
        type=float,
        default=edge.header_timeout,
        help=f"seconds until a request's headers are in, from the connection's start or the previous response"
        f" (default {edge.header_timeout:g})",
    )
    p.add_argument(
        "--request-body-timeout",
        type=float,
        default=edge.body_timeout,
        help=f"seconds from a request's headers until its body is in (default {edge.body_timeout:g})",
    )
    p.add_argument(
        "--idle-connection-timeout",
        type=float,
        default=edge.idle_timeout,
        help=f"seconds a kept-alive connection waits for its next request (default {edge.idle_timeout:g})",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        default=edge.max_connections,
        help=f"connections open at once; more are closed as they come (default {edge.max_connections})",
    )
    p.add_argument(
        "--http2-max-streams-per-connection",
        type=int,
        default=0,
        help=f"streams one HTTP/2 connection may have open at once; 0: {MAX_STREAMS}, as kube-apiserver",
    )
    p.add_argument(
        "--anonymous-auth",
        action="store_true",
        help="requests without credentials run as system:anonymous (RBAC decides) instead of getting 401",
    )


@dataclass(frozen=True)
class ServeOptions:
    """Everything the server needs, checked."""

    host: str
    port: int
    storage_url: str
    store_tls: ssl.SSLContext | None
    tls: ssl.SSLContext
    authenticator: Authenticator
    access_log: bool
    authorization_mode: str = DEFAULT_MODE
    anonymous: bool = False
    admission_plugins: tuple[str, ...] | None = None
    service_accounts: ServiceAccountTokenSettings | None = None
    kubelet_tls: ssl.SSLContext | None = None
    kubernetes_service: KubernetesService | None = None
    front_proxy: FrontProxy | None = None
    client_ca_pem: str = ""
    connection_limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    inflight_limits: InFlightLimits = field(default_factory=InFlightLimits)
    node_port_range: tuple[int, int] = DEFAULT_NODE_PORTS
    compaction_interval: float = COMPACTION_INTERVAL
    http2: Http2Limits = API_LIMITS
    metric_resolution: float = METRIC_RESOLUTION_S


def options(args: argparse.Namespace) -> ServeOptions:
    """Check the flags and load every file they name; UsageError names the flag at fault."""
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be from 1 to 65535, got {args.port}")
    try:
        parse_mode(args.authorization_mode)
    except ValueError as e:
        raise UsageError(f"--authorization-mode: {e}") from e
    try:
        plugins = tuple(
            plugin_names(disable=[n.strip() for n in args.disable_admission_plugins.split(",") if n.strip()])
        )
    except ValueError as e:
        raise UsageError(f"--disable-admission-plugins: {e}") from e
    connection_limits, inflight_limits = edge_limits(args)
    kubernetes_service = kubernetes_service_of(args)
    compaction_interval = compaction_interval_of(args.etcd_compaction_interval)
    metric_resolution = metric_resolution_of(args.metric_resolution)
    try:
        node_port_range = parse_port_range(args.service_node_port_range)
    except ValueError as e:
        raise UsageError(f"--service-node-port-range: {e}") from None
    if (args.tls_cert_file is None) != (args.tls_private_key_file is None):
        raise UsageError("give --tls-cert-file and --tls-private-key-file together")
    data_dir: Path = args.data_dir
    generated = ApiserverPKI.of(data_dir)
    if None in (args.tls_cert_file, args.client_ca_file, args.token_auth_file, args.service_account_signing_key_file):
        try:
            advertised = (args.advertise_address,) if args.advertise_address else ()
            generated.ensure(args.host, (*advertised, kubernetes_service.cluster_ip))
        except (pki.PKIError, ValueError, OSError) as e:
            raise UsageError(f"--data-dir: cannot set up the apiserver's credentials in {generated.root}: {e}") from e
    cert = args.tls_cert_file or generated.serving.cert
    key = args.tls_private_key_file or generated.serving.key
    client_ca = args.client_ca_file or generated.ca
    tokens = args.token_auth_file or generated.tokens
    tls = server_tls(cert, key, client_ca)
    try:
        authenticator = Authenticator.from_files(tokens, client_ca)
    except TokenFileError as e:
        raise UsageError(f"--token-auth-file: {e}") from e
    except ClientCAError as e:
        raise UsageError(f"--client-ca-file: {e}") from e
    service_accounts = service_account_settings(args, generated)
    kubelet = kubelet_tls(args, generated)
    proxy = front_proxy_of(args, generated)
    try:
        client_ca_pem = client_ca.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--client-ca-file: {e}") from e
    url, store_tls = storage_target(args.storage, data_dir, args.insecure_store)
    listen = args.bind_address or args.host
    if not port_free(listen, args.port):
        raise UsageError(f"--port {args.port}: already in use on {listen}")
    return ServeOptions(
        listen,
        args.port,
        url,
        store_tls,
        tls,
        authenticator,
        args.access_log,
        args.authorization_mode,
        args.anonymous_auth,
        plugins,
        service_accounts,
        kubelet,
        kubernetes_service,
        proxy,
        client_ca_pem,
        connection_limits,
        inflight_limits,
        node_port_range,
        compaction_interval,
        http2_settings(args.http2_max_streams_per_connection),
        metric_resolution,
    )


def http2_settings(max_streams: int) -> Http2Limits:
    """`--http2-max-streams-per-connection`, checked (0: kube's default, or 1 to 10,000)."""
    if not 0 <= max_streams <= MAX_HTTP2_STREAMS:
        raise UsageError(f"--http2-max-streams-per-connection must be from 0 to {MAX_HTTP2_STREAMS}, got {max_streams}")
    return dataclasses.replace(API_LIMITS, max_streams=max_streams or MAX_STREAMS)


def compaction_interval_of(text: str) -> float:
    """--etcd-compaction-interval as kube takes it (a Go duration, `5m0s`; `0` never compacts),
    or plain seconds; UsageError names the flag."""
    try:
        seconds = parse_seconds(text)
    except DurationError as e:
        raise UsageError(f"--etcd-compaction-interval: {e}") from None
    if not 0 <= seconds <= 86400 * 7:
        raise UsageError(f"--etcd-compaction-interval: from 0 (never) to a week, got {text!r}")
    return seconds


def metric_resolution_of(text: str) -> float:
    """--metric-resolution, checked; UsageError names the flag."""
    try:
        return parse_resolution(text)
    except ValueError as e:
        raise UsageError(f"--metric-resolution: {e}") from None


def kubernetes_service_of(args: argparse.Namespace) -> KubernetesService:
    """`default/kubernetes` from --service-cluster-ip-range and the advertised address."""
    address = args.advertise_address or args.host
    try:
        if ipaddress.ip_address(address).is_unspecified:
            address = "127.0.0.1"
    except ValueError:
        raise UsageError(f"--advertise-address: {address!r} is not an IP address") from None
    port = args.port if args.advertise_port is None else args.advertise_port
    if not 0 < port < 65536:
        raise UsageError(f"--advertise-port must be from 1 to 65535, got {port}")
    try:  # an advertised port of another (a balancer's) is not this apiserver's own address
        return KubernetesService.of(args.service_cluster_ip_range, address, port, args.advertise_port is None)
    except ValueError as e:
        raise UsageError(f"--service-cluster-ip-range: {e}") from None


def edge_limits(args: argparse.Namespace) -> tuple[ConnectionLimits, InFlightLimits]:
    """The timeout, connection and in-flight flags, checked; UsageError names the flag."""
    for flag, value in (
        ("--request-header-timeout", args.request_header_timeout),
        ("--request-body-timeout", args.request_body_timeout),
        ("--idle-connection-timeout", args.idle_connection_timeout),
    ):
        if not 0 < value < 86400:
            raise UsageError(f"{flag} must be a positive number of seconds (under a day), got {value}")
    for flag, value in (
        ("--max-connections", args.max_connections),
        ("--max-requests-inflight", args.max_requests_inflight),
        ("--max-mutating-requests-inflight", args.max_mutating_requests_inflight),
        ("--max-watches-inflight", args.max_watches_inflight),
        ("--inflight-per-user-floor", args.inflight_per_user_floor),
    ):
        if value < 1:
            raise UsageError(f"{flag} must be at least 1, got {value}")
    return (
        ConnectionLimits(
            header_timeout=args.request_header_timeout,
            body_timeout=args.request_body_timeout,
            idle_timeout=args.idle_connection_timeout,
            max_connections=args.max_connections,
        ),
        InFlightLimits(
            reads=args.max_requests_inflight,
            writes=args.max_mutating_requests_inflight,
            watches=args.max_watches_inflight,
            floor=args.inflight_per_user_floor,
        ),
    )


def service_account_settings(args: argparse.Namespace, generated: ApiserverPKI) -> ServiceAccountTokenSettings:
    """The `--service-account-*` and `--api-audiences` flags, keys loaded; UsageError names the flag."""
    try:
        signing = jws.load_signing_key(args.service_account_signing_key_file or generated.service_account_key)
    except jws.KeyFileError as e:
        raise UsageError(f"--service-account-signing-key-file: {e}") from e
    verify: list[jws.VerifyKey] = []
    for path in args.service_account_key_file:
        try:
            verify += jws.load_verify_keys(path)
        except jws.KeyFileError as e:
            raise UsageError(f"--service-account-key-file: {e}") from e
    issuers = tuple(args.service_account_issuer) or (DEFAULT_ISSUER,)
    if any(not i.strip() for i in issuers):
        raise UsageError("--service-account-issuer: must not be empty")
    audiences = tuple(a.strip() for a in args.api_audiences.split(",") if a.strip())
    max_expiration = None
    if args.service_account_max_token_expiration:
        max_expiration = parse_go_duration(args.service_account_max_token_expiration)
        if max_expiration is None:
            raise UsageError(
                f"--service-account-max-token-expiration: {args.service_account_max_token_expiration!r} is not"
                " a duration (like 24h, 90m or 3600s)"
            )
        if not 3600 <= max_expiration <= MAX_EXPIRATION_SECONDS:
            raise UsageError("--service-account-max-token-expiration: must be between 1 hour and 2^32 seconds")
    return ServiceAccountTokenSettings(
        signing,
        tuple(verify),
        issuers,
        audiences,
        max_expiration,
        args.service_account_extend_token_expiration,
        args.service_account_jwks_uri,
    )


def parse_go_duration(text: str) -> int | None:
    """Whole seconds of a Go duration (`24h`, `1h30m`, `1.5h`, `3600s`), as kube's duration flags
    read it, truncated to the second; None when Go would refuse it."""
    try:
        ns = parse_duration(text)
    except DurationError:
        return None
    return ns // SECOND_NS if ns >= 0 else -(-ns // SECOND_NS)


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def kubelet_tls(args: argparse.Namespace, generated: ApiserverPKI) -> ssl.SSLContext:
    """How the apiserver reaches kubelets: its client certificate, their CA."""
    if (args.kubelet_client_certificate is None) != (args.kubelet_client_key is None):
        raise UsageError("give --kubelet-client-certificate and --kubelet-client-key together")
    if args.kubelet_client_certificate is None or args.kubelet_certificate_authority is None:
        try:
            generated.ensure(args.host)
            files = generated.kubelet_client()
        except (pki.PKIError, ValueError, OSError) as e:
            raise UsageError(
                f"--data-dir: cannot set up the kubelet client credentials in {generated.root}: {e}"
            ) from e
    cert = args.kubelet_client_certificate or files.cert
    key = args.kubelet_client_key or files.key
    ca = args.kubelet_certificate_authority or generated.ca
    try:
        return pki.client_context(ca, cert, key)
    except pki.PKIError as e:
        flag = {cert: "--kubelet-client-certificate", key: "--kubelet-client-key"}.get(
            e.path or Path(), "--kubelet-certificate-authority"
        )
        raise UsageError(f"{flag}: {e}") from e


def front_proxy_of(args: argparse.Namespace, generated: ApiserverPKI) -> FrontProxy:
    """The aggregator's client identity: the flags' files, else made in the data dir."""
    given = (args.proxy_client_cert_file, args.proxy_client_key_file, args.requestheader_client_ca_file)
    if any(given) and not all(given):
        raise UsageError(
            "give --proxy-client-cert-file, --proxy-client-key-file and --requestheader-client-ca-file together"
        )
    names = tuple(n.strip() for n in args.requestheader_allowed_names.split(",") if n.strip())
    if all(given):
        cert, key, ca = given
    else:
        try:
            generated.ensure(args.host)
            files = generated.front_proxy_client()
        except (pki.PKIError, ValueError, OSError) as e:
            raise UsageError(f"--data-dir: cannot set up the front-proxy credentials in {generated.root}: {e}") from e
        cert, key, ca = files.cert, files.key, files.ca
    try:
        pki.client_context(ca, cert, key)  # checks the pair and the CA file now, naming the flag
        return FrontProxy(cert, key, ca.read_text(), names)
    except (pki.PKIError, OSError, UnicodeDecodeError) as e:
        flag = {cert: "--proxy-client-cert-file", key: "--proxy-client-key-file"}.get(
            getattr(e, "path", None) or Path(), "--requestheader-client-ca-file"
        )
        raise UsageError(f"{flag}: {e}") from e


def server_tls(cert: Path, key: Path, client_ca: Path) -> ssl.SSLContext:
    """The serving context: TLS 1.2+, client certificates asked for and verified, not required;
    HTTP/2 offered first (ALPN), as kube-apiserver offers it."""
    try:
        context = pki.server_context(pki.CertFiles(cert, key, client_ca), require_client_cert=False)
        context.set_alpn_protocols(list(ALPN_PROTOCOLS))
        return context
    except pki.PKIError as e:
        flag = {cert: "--tls-cert-file", key: "--tls-private-key-file", client_ca: "--client-ca-file"}.get(
            e.path or Path(), "--tls-cert-file"
        )
        raise UsageError(f"{flag}: {e}") from e


def storage_target(url: str | None, data_dir: Path, insecure: bool) -> tuple[str, ssl.SSLContext | None]:
    """The storage URL and the TLS to reach it with (the store's admin certificate in the data dir)."""
    cluster = StoreLayout(data_dir)
    if url is None:
        try:
            endpoints = [u.split("://", 1)[-1] for u in cluster.client_urls()]
        except LauncherError as e:
            raise UsageError(f"--storage: {e}; or give --storage") from e
        url = "raftkube://" + ",".join(endpoints)
    try:
        scheme, _ = parse_storage_url(url)
    except ValueError as e:
        raise UsageError(f"--storage: {e}") from e
    if scheme != "raftkube" or insecure:
        return url, None
    try:
        if cluster.exists():
            return url, cluster.client_tls()
    except (pki.PKIError, LauncherError) as e:
        raise UsageError(f"--storage: the store's credentials: {e}") from e
    raise UsageError(
        f"--storage: no store credentials in {cluster.pki_dir}; give --data-dir of the store's cluster, "
        "or --insecure-store for a store started with --insecure"
    )


def open_backend(url: str, tls: ssl.SSLContext | None) -> Storage:
    """The storage behind `url` (raftkube:// with the store's client TLS, or etcd://)."""
    return open_storage(url, tls=tls)


class _Server(uvicorn.Server):
    """Uvicorn's server, but SIGINT/SIGTERM end `serve` normally instead of being re-raised
    once it has shut down (which would skip closing the storage, and exit by the signal), and
    with `handshake_timeout` on the TLS handshake (uvicorn leaves asyncio's 60 s)."""

    handshake_timeout: float | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Uvicorn's startup, its listening server made with `ssl_handshake_timeout`: a client
        that connects and never finishes the handshake (500 held 150 MiB for a minute) is cut
        off as Go's ReadHeaderTimeout cuts it off in kube-apiserver, which covers the handshake too.
        Uvicorn has no setting for it; its `create_server` calls are given the keyword here."""
        if self.handshake_timeout is None:
            await super().startup(sockets)
            return
        loop = asyncio.get_running_loop()
        create_server = loop.create_server
        loop.create_server = functools.partial(  # type: ignore[method-assign]
            create_server, ssl_handshake_timeout=self.handshake_timeout
        )
        try:
            await super().startup(sockets)
        finally:
            del loop.create_server  # the loop's own method again

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.handle_exit, sig, None)
        try:
            yield
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)


async def serve(
    opts: ServeOptions, storage_factory: Callable[[str, ssl.SSLContext | None], Storage] | None = None
) -> int:
    """Serve until SIGINT/SIGTERM; 0 after a clean stop, 1 when the server could not start."""
    storage = canary.storage((storage_factory or open_backend)(opts.storage_url, opts.store_tls))
    try:
        app = build_app(
            storage,
            opts.authenticator,
            authorization_mode=opts.authorization_mode,
            anonymous=opts.anonymous,
            admission_plugins=opts.admission_plugins,
            service_accounts=opts.service_accounts,
            kubelet_tls=opts.kubelet_tls,
            inflight_limits=opts.inflight_limits,
            kubernetes_service=opts.kubernetes_service,
            node_port_range=opts.node_port_range,
            compaction_interval=opts.compaction_interval,
            front_proxy=opts.front_proxy,
            client_ca_pem=opts.client_ca_pem,
            metric_resolution=opts.metric_resolution,
        )
        config = uvicorn.Config(
            app,
            host=opts.host,
            port=opts.port,
            http=negotiating(guarded(protocol_class(), opts.connection_limits), opts.connection_limits, opts.http2),
            ws=ws_protocol_class(),
            ws_max_size=1 << 20,  # exec and port-forward messages: stdin and tunneled bytes, in pieces
            ssl_context_factory=lambda _config, _default: opts.tls,
            log_level=logging.WARNING,
            access_log=opts.access_log,
            lifespan="on",  # the watch caches start and stop with the server
            workers=1,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            server_header=False,
            timeout_keep_alive=opts.connection_limits.idle_timeout,  # type: ignore[arg-type]  # a float works
        )
        server = _Server(config)
        server.handshake_timeout = opts.connection_limits.header_timeout
        heap = asyncio.create_task(HeapKeeper().run())
        try:
            await server.serve()
        finally:
            heap.cancel()
        return 0 if server.started else 1
    finally:
        await storage.close()


def run(args: argparse.Namespace) -> int:
    opts = options(args)
    fix_mmap_threshold()  # closed connections' buffers go back to the system (apiserver.malloc)
    transport_cycle.install()  # closed connections' transports die without the collector
    return asyncio.run(serve(opts))
