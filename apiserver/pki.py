"""The apiserver's credentials, created in the data dir on first start.

    <data_dir>/apiserver/pki/ca.crt, ca.key              the apiserver CA: signs the serving
                                                         certificate and client certificates
    <data_dir>/apiserver/pki/apiserver.crt, .key         serving certificate (127.0.0.1, localhost, the host)
    <data_dir>/apiserver/pki/admin.crt, .key             client certificate CN=admin, O=system:masters
    <data_dir>/apiserver/tokens.csv                      static tokens; one random admin token

The CA is separate from the store's (`<data_dir>/store/pki/`): store credentials let a
client write any key, API credentials go through the apiserver's checks.  Files are written
as store.pki writes them (directories 0700, keys and the token file 0600, atomically).
"""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from apiserver.auth.authn import load_token_file
from store import disk, pki

APISERVER_DIR = "apiserver"
PKI_DIR = "pki"
TOKENS_FILE = "tokens.csv"
SERVING = "apiserver"
ADMIN = "admin"
ADMIN_GROUP = "system:masters"
LOCAL_HOSTS = ("127.0.0.1", "localhost")


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

    def ensure(self, host: str = "127.0.0.1") -> None:
        """Create whatever is missing: the CA, the serving certificate (reissued when it does
        not name `host`), the admin certificate and the token file.  Existing files are kept."""
        disk.make_dirs(self.root)
        if pki.CA_CERT in _names(self.pki_dir) or pki.CA_KEY in _names(self.pki_dir):
            ca = pki.load_files(self.pki_dir, "ca")
        else:
            ca = pki.create_ca(self.pki_dir, "raftkube apiserver CA")
        hosts = serving_hosts(host)
        if not self.serving.cert.exists() or not _names_hosts(self.serving.cert, hosts):
            pki.issue_cert(ca, self.pki_dir, SERVING, common_name="raftkube-apiserver", hosts=hosts, server=True)
        if not self.admin.cert.exists() or not self.admin.key.exists():
            pki.issue_cert(ca, self.pki_dir, ADMIN, common_name=ADMIN, organizations=(ADMIN_GROUP,), client=True)
        if not self.tokens.exists():
            token = secrets.token_urlsafe(32)
            disk.write_private(self.tokens, f'{token},{ADMIN},{ADMIN},"{ADMIN_GROUP}"\n'.encode())

    def admin_token(self) -> str | None:
        """The first token of user admin in the token file (None when there is none)."""
        for token, user in load_token_file(self.tokens).items():
            if user.name == ADMIN:
                return token
        return None


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
