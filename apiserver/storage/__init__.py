"""Storage backends behind one seam (`interface.Storage`), chosen by URL.

`raftkube://host:port,host:port` is the raftkube store (the default); `etcd://host:port,...`
is a real etcd v3 cluster, whose module (and grpcio) is imported only when asked for.
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

from apiserver.storage.interface import Storage
from apiserver.storage.raftkube import RaftkubeStorage
from store.api.protocol import split_url
from store.client.client import Client

if TYPE_CHECKING:
    from apiserver.storage.etcd_client import PemSource

SCHEMES = ("raftkube", "etcd")


def parse_storage_url(url: str) -> tuple[str, list[str]]:
    """(scheme, ["host:port", ...]) of a storage URL; ValueError names the bad part."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(
            f"storage URL {url!r} has no scheme: expected raftkube://host:port,... or etcd://host:port,..."
        )
    if scheme not in SCHEMES:
        raise ValueError(f"storage URL scheme {scheme!r} is not one of {', '.join(SCHEMES)}")
    if not rest:
        raise ValueError(f"storage URL {url!r} names no endpoint")
    endpoints = []
    for i, part in enumerate(p.strip() for p in rest.split(",")):
        if any(c in part for c in "/?@#") or any(c.isspace() for c in part):
            raise ValueError(f"storage URL endpoint {i + 1} {part!r} is not a plain host:port")
        try:
            host, port = split_url(part)
        except ValueError as e:
            raise ValueError(f"storage URL endpoint {i + 1}: {e}") from None
        endpoints.append(f"{host}:{port}")
    return scheme, endpoints


def open_storage(
    url: str, *, tls: ssl.SSLContext | None, etcd_tls: PemSource | None = None, timeout: float = 5.0
) -> Storage:
    """The backend `url` names.  `tls` is the raftkube store's client context; etcd's gRPC
    cannot use an SSLContext, so etcd with TLS takes PEM bytes (`etcd_client.EtcdTLS`)."""
    scheme, endpoints = parse_storage_url(url)
    if scheme == "raftkube":
        if etcd_tls is not None:
            raise ValueError("etcd_tls is for etcd:// storage; raftkube:// takes tls")
        return RaftkubeStorage(Client(endpoints, timeout=timeout, tls=tls))
    if tls is not None:
        raise ValueError("etcd:// storage takes its TLS as PEM files (etcd_tls), not an ssl.SSLContext")
    # Imported here: grpcio is needed only by this backend (its import error says so).
    from apiserver.storage.etcd import EtcdStorage  # noqa: PLC0415
    from apiserver.storage.etcd_client import EtcdClient  # noqa: PLC0415

    return EtcdStorage(EtcdClient(endpoints, timeout=timeout, tls=etcd_tls))
