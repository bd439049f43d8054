"""A CA and a serving certificate for 127.0.0.1, and the contexts either side uses: for tests
that stand up small HTTPS servers of their own (a fake apiserver behind the balancer, the
client library's failover)."""

from __future__ import annotations

import ssl
from pathlib import Path

from machinery.process import pki


def serving_certs(directory: Path) -> pki.CertFiles:
    ca = pki.create_ca(directory)
    return pki.issue_cert(ca, directory, "serving", common_name="apiserver", hosts=("127.0.0.1",), server=True)


def server_context(certs: pki.CertFiles) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs.cert, certs.key)
    return ctx


def client_context(certs: pki.CertFiles) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certs.ca))
