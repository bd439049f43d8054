"""TLS for the benchmark's clusters: the files a client uses, and etcd's certificates.

Both systems get certificates from the same kind of CA (machinery.process.pki: EC P-256, one cluster CA
per cluster): raftkube through its launcher (`LocalCluster.create(insecure=False)`), etcd
from `etcd_pki` below, so that neither pays for a bigger key or a longer chain than the
other.  Load generators are separate processes: they get the *paths* of the client files in
their JSON spec (`ClientTLS.to_json`) and build their TLS context themselves.

Only the standard library at import time: load generators import this before anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

ETCD_CLIENT = "bench"
"""The name of the load generators' client certificate for etcd."""


@dataclass(frozen=True)
class ClientTLS:
    """A client's certificate, key and the CA that verifies the server (paths)."""

    ca: str
    cert: str
    key: str

    def to_json(self) -> dict[str, str]:
        return {"ca": self.ca, "cert": self.cert, "key": self.key}

    @staticmethod
    def from_json(doc: Any) -> ClientTLS | None:
        if not doc:
            return None
        return ClientTLS(str(doc["ca"]), str(doc["cert"]), str(doc["key"]))

    def ssl_context(self) -> Any:
        """An ssl.SSLContext for raftkube's client (machinery.process.pki's client context)."""
        from machinery.process import pki

        return pki.client_context(Path(self.ca), Path(self.cert), Path(self.key))

    def pem(self) -> tuple[bytes, bytes, bytes]:
        """(CA certificate, client key, client certificate) as PEM bytes, for gRPC."""
        return Path(self.ca).read_bytes(), Path(self.key).read_bytes(), Path(self.cert).read_bytes()


@dataclass(frozen=True)
class EtcdMemberTLS:
    """One etcd member's certificate and key (used for its client and its peer port alike)."""

    cert: Path
    key: Path
    ca: Path


def etcd_pki(root: Path, members: list[int]) -> tuple[dict[int, EtcdMemberTLS], ClientTLS]:
    """A new CA under `root/pki`, a certificate per member (serverAuth + clientAuth, for
    127.0.0.1 and localhost) under `root/tls-m<N>`, and the load generators' client
    certificate (clientAuth) next to the CA."""
    from machinery.process import pki

    ca = pki.create_ca(root / "pki", "raftkube bench etcd CA")
    out: dict[int, EtcdMemberTLS] = {}
    for m in members:
        f = pki.issue_member_cert(ca, root / f"tls-m{m}", m, ["127.0.0.1", "localhost"])
        out[m] = EtcdMemberTLS(f.cert, f.key, f.ca)
    c = pki.issue_client_cert(ca, root / "pki", ETCD_CLIENT)
    return out, ClientTLS(str(c.ca), str(c.cert), str(c.key))
