"""What every store command shares: finding the cluster, errors that exit 2, output modes."""

from __future__ import annotations

import argparse
import json
import ssl
import sys
from pathlib import Path
from typing import Any, NoReturn

from machinery.process import pki
from machinery.process.command import DEFAULT_DATA_DIR, UsageError
from machinery.process.launch import LauncherError
from store.api.errors import Outcome, StoreError
from store.cli import locate
from store.client.client import Client
from store.launcher import LocalCluster


class ClusterError(Exception):
    """The cluster could not serve a request (unavailable, no leader, timed out...): printed
    as `raftkube: <message>`, exit status 1, since retrying may help."""


def store_error(e: StoreError) -> Exception:
    """The CLI's error for a store error: its outcome alone decides the exit status."""
    text = f"{e.code}: {e.message}"
    return UsageError(text) if e.outcome is Outcome.REFUSED else ClusterError(text)


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=f"the cluster's data dir (default ${locate.DATA_DIR_ENV}, {DEFAULT_DATA_DIR}/, or the last `up`'s)",
    )
    p.add_argument("--endpoints", help="comma-separated client URLs, instead of finding them in the data dir")
    p.add_argument("-o", "--output", choices=("human", "json"), default="human", help="output format")
    p.add_argument("--timeout", type=float, default=5.0, help="request timeout in seconds")
    tls = p.add_argument_group("TLS (found in the data dir unless given)")
    tls.add_argument("--cacert", dest="tls_cacert", type=Path, help="the cluster CA's certificate (PEM)")
    tls.add_argument(
        "--cert", dest="tls_cert", type=Path, help="this client's certificate (PEM), signed by the cluster CA"
    )
    tls.add_argument("--key", dest="tls_key", type=Path, help="this client's private key (PEM)")
    tls.add_argument(
        "--insecure",
        action="store_true",
        help="plaintext, no certificates (a cluster started with --insecure; `store up`: start one)",
    )


def data_dir(args: argparse.Namespace) -> Path:
    """--data-dir, or the cluster store.cli.locate finds."""
    try:
        return locate.find(args.data_dir)
    except locate.LocateError as e:
        raise UsageError(str(e)) from None


def endpoints(args: argparse.Namespace) -> list[str]:
    if args.endpoints:
        eps = [e.strip() for e in args.endpoints.split(",") if e.strip()]
        if not eps:
            raise UsageError("--endpoints is empty")
        return eps
    cluster = LocalCluster(data_dir(args))
    try:
        return cluster.client_urls()
    except LauncherError as e:
        raise UsageError(f"{e}; or give --endpoints") from e


def client_tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The TLS context for talking to the cluster: --cacert/--cert/--key when given (as with
    etcdctl), else the admin certificate in the data dir; None with --insecure.  With
    --endpoints only a data dir named explicitly (--data-dir, $RAFTKUBE_DATA_DIR) lends its
    certificates: the endpoints may be another cluster's than the one found by default."""
    cacert, cert, key = args.tls_cacert, args.tls_cert, args.tls_key
    if args.insecure:
        if cacert or cert or key:
            raise UsageError("--insecure excludes --cacert, --cert and --key")
        return None
    if (cert is None) != (key is None):
        raise UsageError("give --cert and --key together")
    try:
        if cacert is not None:
            return pki.client_context(cacert, cert, key)
        named = locate.given(args.data_dir) if args.endpoints else data_dir(args)
        cluster = LocalCluster(named if named is not None else DEFAULT_DATA_DIR)
        if named is None or not cluster.exists():
            if args.endpoints:
                raise UsageError(
                    "--endpoints: give --cacert, --cert and --key for the cluster's TLS "
                    "(or --insecure for a cluster started with --insecure)"
                )
            raise UsageError(f"no cluster in {data_dir(args)} (start one with `raftkube store up`)")
        return cluster.client_tls()
    except (pki.PKIError, ssl.SSLError, OSError) as e:
        raise UsageError(f"TLS credentials: {e}") from e
    except LauncherError as e:
        raise UsageError(str(e)) from e


def make_client(args: argparse.Namespace, eps: list[str] | None = None, timeout: float | None = None) -> Client:
    """A client for the cluster the arguments name (endpoints, TLS, timeout)."""
    t = args.timeout if timeout is None else timeout
    return Client(eps or endpoints(args), timeout=t, connect_timeout=min(t, 1.0), tls=client_tls(args))


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=None, separators=(",", ":"), ensure_ascii=False)
    sys.stdout.write("\n")
    sys.stdout.flush()


def fail(message: str) -> NoReturn:
    raise UsageError(message)


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


__all__ = [
    "ClusterError",
    "add_cluster_arguments",
    "client_tls",
    "data_dir",
    "endpoints",
    "fail",
    "make_client",
    "print_json",
    "store_error",
    "table",
]
