"""The cluster's PKI: creating and loading its certificates, and building TLS contexts from them.

`raftkube store up` creates a cluster CA (`create_ca`) in the data dir, then one certificate
per member (`issue_member_cert`) and one per client (`issue_client_cert`).  Each certificate
directory is self-contained, holding a copy of the CA certificate:

    <ca dir>/ca.crt  ca.key                   the cluster CA (EC P-256, 10 years, path length 0)
    <member dir>/member.crt member.key ca.crt  one member: TLS server *and* client (peers dial each other)
    <client dir>/<name>.crt <name>.key ca.crt  one client: TLS client only

Identity is carried by a URI in the subjectAltName, never by a hostname:
`urn:raftkube:member:<id>` or `urn:raftkube:client:<name>`.  The CA is private to one
cluster, so every certificate it signed belongs to that cluster; a member tells a peer from
a client by the URI (`peer_identity`), and a member dialling peer N checks that it reached
member N (`check_server_identity`).  Hostnames are put into member certificates for other
tools, but our own clients do not check them (see `client_context`).

Every key is written 0600 and every directory created here 0700, whatever the umask; every
file is written atomically (temporary file, fsync, rename, directory fsync) through
`machinery.process.disk`, the layer all durable writes go through.  A set of files is not written as one
unit: a crash may leave a key without its certificate, which `load_files` then names.

Problems with the files are `PKIError`s whose message names the file and what is wrong with
it (missing, unreadable, not PEM, key does not match, expired, not issued by the CA); bad
arguments (a member id out of range, a host that is neither an IP address nor a DNS name)
are `ValueError`s.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import re
import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from machinery.process import disk

__all__ = [
    "CA_CERT",
    "CA_KEY",
    "CLIENT_URI_PREFIX",
    "MAX_MEMBER_ID",
    "MEMBER",
    "MEMBER_URI_PREFIX",
    "CertFiles",
    "PKIError",
    "PKIExistsError",
    "PeerIdentity",
    "PeerIdentityError",
    "check_server_identity",
    "client_context",
    "create_ca",
    "identity_of",
    "issue_cert",
    "issue_client_cert",
    "issue_member_cert",
    "load_files",
    "member_id_of",
    "peer_identity",
    "server_context",
]

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
MEMBER = "member"
"""The stem of a member's files: `member.crt`, `member.key`."""

MEMBER_URI_PREFIX = "urn:raftkube:member:"
CLIENT_URI_PREFIX = "urn:raftkube:client:"
_URI_PREFIX = "urn:raftkube:"

MAX_MEMBER_ID = 2**63 - 1
"""Member ids are positive and fit a signed 64-bit integer (0 is Raft's "nobody")."""

CA_VALIDITY = dt.timedelta(days=3650)
LEAF_VALIDITY = dt.timedelta(days=3650)
"""Nothing rotates certificates yet, so a leaf lives as long as its CA (never longer)."""
CLOCK_SKEW = dt.timedelta(minutes=5)
"""Certificates are valid from this long before their creation, for clocks slightly behind."""

KEY_MODE = 0o600
CERT_MODE = 0o644
DIR_MODE = 0o700

_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)

_MEMBER_ID_RE = re.compile(r"[1-9][0-9]{0,18}", re.ASCII)
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", re.ASCII)
_RESERVED_NAMES = frozenset({"ca", MEMBER})
_DNS_LABEL = r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)"
_DNS_RE = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*\.?", re.ASCII)

_SigningKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


# ---------------------------------------------------------------- types
class PKIError(Exception):
    """A certificate or key file is missing, unreadable or unusable; `path` names it when known."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


class PKIExistsError(PKIError):
    """`create_ca` found a CA already in place: it never replaces one."""


class PeerIdentityError(PKIError):
    """The peer's certificate does not name the member or client that was expected."""


@dataclass(frozen=True, slots=True)
class CertFiles:
    """Where one certificate, its key and the CA certificate that verifies peers are."""

    cert: Path
    key: Path
    ca: Path


@dataclass(frozen=True, slots=True)
class PeerIdentity:
    """Who is at the other end of a TLS connection, from its certificate's URI."""

    kind: Literal["member", "client"]
    member_id: int | None = None
    """Set for a member."""
    name: str | None = None
    """Set for a client."""

    def __str__(self) -> str:
        return f"member {self.member_id}" if self.kind == "member" else f"client {self.name}"


# ---------------------------------------------------------------- creating
def create_ca(
    directory: Path,
    common_name: str = "raftkube cluster CA",
    *,
    now: dt.datetime | None = None,
    valid_for: dt.timedelta = CA_VALIDITY,
) -> CertFiles:
    """Create a new self-signed cluster CA as `directory/ca.crt` and `directory/ca.key`.

    Refuses (PKIExistsError) when either file exists: replacing a CA would orphan every
    certificate it signed.  `now` and `valid_for` exist for tests.
    """
    directory = Path(directory)
    files = CertFiles(cert=directory / CA_CERT, key=directory / CA_KEY, ca=directory / CA_CERT)
    for path in (files.cert, files.key):
        if os.path.lexists(path):
            raise PKIExistsError(
                f"{path} exists already: refusing to replace the cluster CA (remove the CA files to start a new one)",
                path,
            )
    key = ec.generate_private_key(ec.SECP256R1())
    start = _now(now) - CLOCK_SKEW
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + valid_for)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    _ensure_dir(directory)
    # The key first: a crash in between leaves a key without a certificate, which
    # create_ca refuses to overwrite and load_files reports by name.
    _write_files(directory, [(CA_KEY, _key_pem(key), KEY_MODE), (CA_CERT, _cert_pem(cert), CERT_MODE)])
    return files


def issue_member_cert(
    ca: CertFiles,
    directory: Path,
    member_id: int,
    hosts: list[str],
    *,
    now: dt.datetime | None = None,
    valid_for: dt.timedelta = LEAF_VALIDITY,
) -> CertFiles:
    """Issue member `member_id`'s certificate into `directory` (member.crt, member.key, ca.crt).

    Usable as TLS server (its client and peer ports) and TLS client (dialling peers); the
    subjectAltName has each of `hosts` (IP addresses as IPAddress, names as DNSName) and
    `urn:raftkube:member:<id>`.  Replaces an earlier member certificate in `directory`.
    """
    if isinstance(member_id, bool) or not isinstance(member_id, int) or not 1 <= member_id <= MAX_MEMBER_ID:
        raise ValueError(f"member id must be an integer from 1 to {MAX_MEMBER_ID}, not {member_id!r}")
    given: object = hosts  # typed list[str], but a lone string would pass for a list of one-letter hosts
    if isinstance(given, str):
        raise ValueError(f"hosts must be a list of host names or addresses, not the string {hosts!r}")
    names: list[x509.GeneralName] = []
    for host in hosts:
        general = _host_name(host)
        if general not in names:
            names.append(general)
    names.append(x509.UniformResourceIdentifier(f"{MEMBER_URI_PREFIX}{member_id}"))
    return _issue(
        ca,
        Path(directory),
        MEMBER,
        f"raftkube member {member_id}",
        names,
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
        now,
        valid_for,
    )


def issue_client_cert(
    ca: CertFiles,
    directory: Path,
    name: str,
    *,
    now: dt.datetime | None = None,
    valid_for: dt.timedelta = LEAF_VALIDITY,
) -> CertFiles:
    """Issue client `name`'s certificate into `directory` (<name>.crt, <name>.key, ca.crt).

    TLS client only (clientAuth); CN is `name` and the subjectAltName `urn:raftkube:client:<name>`.
    `name` is 1-64 of letters, digits, `.`, `_`, `-` (starting with a letter or digit), and
    neither "ca" nor "member", whose files it would overwrite.
    """
    if not _is_client_name(name):
        raise ValueError(
            f"client name {name!r} must be 1-64 letters, digits, '.', '_' or '-', start with a letter or digit,"
            f" and not be one of {sorted(_RESERVED_NAMES)}"
        )
    return _issue(
        ca,
        Path(directory),
        name,
        name,
        [x509.UniformResourceIdentifier(f"{CLIENT_URI_PREFIX}{name}")],
        [ExtendedKeyUsageOID.CLIENT_AUTH],
        now,
        valid_for,
    )


def issue_cert(
    ca: CertFiles,
    directory: Path,
    stem: str,
    *,
    common_name: str,
    organizations: tuple[str, ...] = (),
    hosts: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
    now: dt.datetime | None = None,
    valid_for: dt.timedelta = LEAF_VALIDITY,
) -> CertFiles:
    """Issue a certificate for another raftkube component into `directory` (<stem>.crt, .key, ca.crt).

    For identities that are not the store's own (the apiserver's serving certificate, its
    users' client certificates): the subject is CN=`common_name` with one O per entry of
    `organizations` (Kubernetes reads a user's name and groups from them), the subjectAltName
    holds `hosts` and no raftkube URI, and the extended key usages are serverAuth and/or
    clientAuth as asked.  `stem` follows the rules of client names (it names files).
    """
    if not _is_client_name(stem):
        raise ValueError(f"certificate file stem {stem!r} must be 1-64 letters, digits, '.', '_' or '-'")
    if not (server or client):
        raise ValueError("a certificate must be usable for TLS server or client authentication (or both)")
    if not common_name or any(not isinstance(o, str) or not o for o in organizations):
        raise ValueError(f"common name and organizations must be non-empty strings: {common_name!r}, {organizations!r}")
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] * server + [ExtendedKeyUsageOID.CLIENT_AUTH] * client
    names: list[x509.GeneralName] = []
    for host in hosts:
        general = _host_name(host)
        if general not in names:
            names.append(general)
    return _issue(ca, Path(directory), stem, common_name, names, usages, now, valid_for, organizations)


def _issue(
    ca: CertFiles,
    directory: Path,
    stem: str,
    common_name: str,
    alt_names: list[x509.GeneralName],
    usages: list[x509.ObjectIdentifier],
    now: dt.datetime | None,
    valid_for: dt.timedelta,
    organizations: tuple[str, ...] = (),
) -> CertFiles:
    moment = _now(now)
    ca_cert, ca_key = _load_ca_pair(ca, moment)
    key = ec.generate_private_key(ec.SECP256R1())
    try:
        aki = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(
            ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        )
    except x509.ExtensionNotFound:
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    builder = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
                + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
            )
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(max(moment - CLOCK_SKEW, ca_cert.not_valid_before_utc))
        .not_valid_after(min(moment + valid_for, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(digital_signature=True), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(aki, critical=False)
    )
    if alt_names:  # an empty subjectAltName is not allowed (RFC 5280)
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    writes = [(f"{stem}.key", _key_pem(key), KEY_MODE), (f"{stem}.crt", _cert_pem(cert), CERT_MODE)]
    ca_copy = directory / CA_CERT
    if not _holds_cert(ca_copy, ca_cert):
        if os.path.lexists(directory / CA_KEY):
            raise PKIError(
                f"{ca_copy} is another CA's certificate (its key {directory / CA_KEY} is next to it):"
                f" not replacing it with {ca.cert}",
                ca_copy,
            )
        writes.append((CA_CERT, _cert_pem(ca_cert), CERT_MODE))
    _ensure_dir(directory)
    _write_files(directory, writes)
    return CertFiles(cert=directory / f"{stem}.crt", key=directory / f"{stem}.key", ca=ca_copy)


def _key_usage(
    *, digital_signature: bool = False, key_cert_sign: bool = False, crl_sign: bool = False
) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=digital_signature,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _host_name(host: str) -> x509.GeneralName:
    """An IP address (IPv6 may be in brackets) as IPAddress, otherwise a DNS name as DNSName."""
    if not isinstance(host, str):
        raise ValueError(f"host must be a string, not {host!r}")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return x509.IPAddress(ipaddress.ip_address(bare))
    except ValueError:
        pass
    if bare == host and len(host) <= 253 and _DNS_RE.fullmatch(host):
        return x509.DNSName(host)
    raise ValueError(f"host {host!r} is neither an IP address nor a DNS name")


def _is_client_name(name: object) -> bool:
    return isinstance(name, str) and name not in _RESERVED_NAMES and _NAME_RE.fullmatch(name) is not None


def _now(now: dt.datetime | None) -> dt.datetime:
    if now is None:
        return dt.datetime.now(dt.UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return now


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


# ---------------------------------------------------------------- writing
def _ensure_dir(directory: Path) -> None:
    """Create `directory` and any missing parents, each 0700 whatever the umask.

    Directories that exist already are left as they are: keys are 0600 in any case.
    """
    missing: list[Path] = []
    at = directory
    while not os.path.lexists(at) and at != at.parent:
        missing.append(at)
        at = at.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile by someone else: theirs, not ours to change
        except OSError as e:
            raise PKIError(f"cannot create directory {d}: {e.strerror or e}", d) from e
        try:
            fd = os.open(d, _DIR_FLAGS)
            try:
                os.fchmod(fd, DIR_MODE)  # mkdir's mode passed through the umask
            finally:
                os.close(fd)
            disk.fsync_dir(d.parent)
        except OSError as e:
            raise PKIError(f"cannot set up directory {d}: {e.strerror or e}", d) from e
    if not directory.is_dir():
        raise PKIError(f"{directory} is not a directory", directory)


def _write_files(directory: Path, files: list[tuple[str, bytes, int]]) -> None:
    """Write each (name, data, mode) atomically and durably, in order.

    Every file goes to a temporary first, created with its final mode (0600 for keys: no
    moment where another user could open it), fchmod-ed since the umask may have taken
    bits, written and fsynced; then each is renamed into place, then the directory is
    fsynced once for all of them.
    """
    pending: list[tuple[Path, Path]] = []
    where = directory
    try:
        for name, data, mode in files:
            where = directory / name
            tmp = directory / f".{name}.{secrets.token_hex(6)}.tmp"
            fd = os.open(tmp, _FILE_FLAGS, mode)
            pending.append((tmp, where))
            try:
                os.fchmod(fd, mode)
                disk.write(fd, data)
                disk.fsync(fd)
            finally:
                disk.close(fd)
        for tmp, where in pending:  # `where`: the file an error names
            disk.rename(tmp, where)
        where = directory
        disk.fsync_dir(directory)
    except BaseException as e:
        for tmp, _ in pending:
            with contextlib.suppress(OSError):
                disk.remove(tmp)
        if isinstance(e, OSError):
            raise PKIError(f"cannot write {where}: {e.strerror or e}", where) from e
        raise


def _holds_cert(path: Path, cert: x509.Certificate) -> bool:
    """True when `path` is a readable PEM file of exactly `cert`."""
    try:
        return x509.load_pem_x509_certificate(path.read_bytes()) == cert
    except (OSError, ValueError):
        return False


# ---------------------------------------------------------------- loading
def load_files(directory: Path, name: str, *, now: dt.datetime | None = None) -> CertFiles:
    """Find and check `directory/<name>.crt`, `<name>.key` and `ca.crt`.

    `name` is "member" for a member, a client's name, or "ca" for the CA itself.  Raises a
    PKIError naming the first file that is missing, unreadable or not PEM, a key that does
    not match its certificate, a certificate that is expired or not yet valid, or one the
    CA did not issue.
    """
    directory = Path(directory)
    if name != "ca" and name != MEMBER and not _is_client_name(name):
        raise ValueError(f"{name!r} is not a certificate name")
    if name == "ca":
        files = CertFiles(cert=directory / CA_CERT, key=directory / CA_KEY, ca=directory / CA_CERT)
    else:
        files = CertFiles(cert=directory / f"{name}.crt", key=directory / f"{name}.key", ca=directory / CA_CERT)
    moment = _now(now)
    ca_cert = _read_cert(files.ca, "CA certificate")
    cert = ca_cert if name == "ca" else _read_cert(files.cert, "certificate")
    key = _read_key(files.key)
    _check_is_ca(ca_cert, files.ca)
    _check_valid(ca_cert, files.ca, "CA certificate", moment)
    if cert is not ca_cert:
        _check_valid(cert, files.cert, "certificate", moment)
        _check_issued_by(cert, files.cert, ca_cert, files.ca)
    _check_key_matches(cert, files.cert, key, files.key)
    return files


def _load_ca_pair(ca: CertFiles, moment: dt.datetime) -> tuple[x509.Certificate, _SigningKey]:
    cert = _read_cert(ca.cert, "CA certificate")
    key = _read_key(ca.key, "CA key")
    _check_is_ca(cert, ca.cert)
    _check_valid(cert, ca.cert, "CA certificate", moment)
    _check_key_matches(cert, ca.cert, key, ca.key)
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise PKIError(f"CA key {ca.key} is a {type(key).__name__}: only EC and RSA CA keys can sign here", ca.key)
    return cert, key


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise PKIError(f"{what} {path} is missing", path) from None
    except IsADirectoryError:
        raise PKIError(f"{what} {path} is a directory, not a file", path) from None
    except PermissionError:
        raise PKIError(f"{what} {path} is unreadable: permission denied", path) from None
    except OSError as e:
        raise PKIError(f"{what} {path} is unreadable: {e.strerror or e}", path) from e


def _read_cert(path: Path, what: str) -> x509.Certificate:
    data = _read(path, what)
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise PKIError(f"{what} {path} is not PEM: it has no BEGIN CERTIFICATE block", path)
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError as e:
        raise PKIError(f"{what} {path} is not a valid PEM certificate: {e}", path) from e


def _read_key(path: Path, what: str = "key") -> PrivateKeyTypes:
    data = _read(path, what)
    if b"PRIVATE KEY-----" not in data:
        raise PKIError(f"{what} {path} is not PEM: it has no BEGIN PRIVATE KEY block", path)
    try:
        return serialization.load_pem_private_key(data, password=None)
    except TypeError as e:  # encrypted
        raise PKIError(f"{what} {path} is encrypted: keys must be stored unencrypted (mode 0600)", path) from e
    except (ValueError, UnsupportedAlgorithm) as e:
        raise PKIError(f"{what} {path} is not a valid PEM private key: {e}", path) from e


def _check_is_ca(cert: x509.Certificate, path: Path) -> None:
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca:
        raise PKIError(f"CA certificate {path} is not a CA certificate (no BasicConstraints CA=true)", path)


def _check_valid(cert: x509.Certificate, path: Path, what: str, moment: dt.datetime) -> None:
    if moment < cert.not_valid_before_utc:
        raise PKIError(f"{what} {path} is not valid yet: valid from {cert.not_valid_before_utc.isoformat()}", path)
    if moment > cert.not_valid_after_utc:
        raise PKIError(f"{what} {path} expired on {cert.not_valid_after_utc.isoformat()}", path)


def _check_issued_by(cert: x509.Certificate, path: Path, ca_cert: x509.Certificate, ca_path: Path) -> None:
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature) as e:
        raise PKIError(f"certificate {path} was not issued by the CA in {ca_path}", path) from e


def _check_key_matches(cert: x509.Certificate, cert_path: Path, key: PrivateKeyTypes, key_path: Path) -> None:
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
        raise PKIError(f"key {key_path} does not match certificate {cert_path}", key_path)


# ---------------------------------------------------------------- TLS contexts
def server_context(files: CertFiles, require_client_cert: bool = True) -> ssl.SSLContext:
    """A TLS (1.2 or newer) server context presenting `files.cert`.

    With `require_client_cert` a client must present a certificate signed by `files.ca`
    (CERT_REQUIRED).  Without, a client may present none, but one it presents is still
    verified (CERT_OPTIONAL): a certificate from another CA fails the handshake rather than
    passing as anonymous.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _harden(ctx)
    _load_chain(ctx, files.cert, files.key)
    _load_ca(ctx, files.ca)
    ctx.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_OPTIONAL
    return ctx


def client_context(ca_file: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    """A TLS (1.2 or newer) client context that verifies the server's chain against `ca_file`.

    `cert` and `key` (both or neither) are presented to servers that ask for a client
    certificate.

    `check_hostname` is off on purpose.  The CA is private to one cluster, so a verified
    chain already proves the server is one of its members: OpenSSL also checks the
    serverAuth usage, so a client certificate cannot pose as a server.  Which member it is
    comes from the certificate's member URI, not from the address dialled: members are
    reached through addresses their certificates cannot all name (0.0.0.0 listeners,
    per-link proxies in chaos tests, addresses that change when a member moves).  Callers
    that dial a particular member check `check_server_identity(peercert, member_id)` after
    the handshake.
    """
    if (cert is None) != (key is None):
        raise ValueError("a client certificate and its key go together: give both or neither")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    _harden(ctx)
    _load_ca(ctx, Path(ca_file))
    if cert is not None and key is not None:
        _load_chain(ctx, Path(cert), Path(key))
    return ctx


def _harden(ctx: ssl.SSLContext) -> None:
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_flags |= ssl.VERIFY_X509_STRICT


def _load_chain(ctx: ssl.SSLContext, cert: Path, key: Path) -> None:
    try:
        ctx.load_cert_chain(cert, key)
    except OSError as e:  # ssl.SSLError included
        # OpenSSL's message names neither file: find which one is wrong, and how.
        parsed = _read_cert(cert, "certificate")
        _check_key_matches(parsed, cert, _read_key(key), key)
        raise PKIError(f"cannot use certificate {cert} with key {key}: {e}", cert) from e


def _load_ca(ctx: ssl.SSLContext, ca_file: Path) -> None:
    try:
        ctx.load_verify_locations(cafile=ca_file)
    except OSError as e:
        _read_cert(ca_file, "CA certificate")
        raise PKIError(f"cannot use CA certificate {ca_file}: {e}", ca_file) from e


# ---------------------------------------------------------------- identities
def identity_of(peercert: Mapping[str, object] | None) -> PeerIdentity | None:
    """The raftkube identity named by a `getpeercert()` dict, or None.

    None when it names none, more than one (two different member ids, a member and a
    client), or has any malformed `urn:raftkube:` URI: a certificate making a claim we
    cannot read is not trusted for any claim.  Never raises, whatever the dict holds.
    """
    members: set[int] = set()
    clients: set[str] = set()
    for uri in _raftkube_uris(peercert):
        if uri.startswith(MEMBER_URI_PREFIX):
            member_id = _parse_member_id(uri[len(MEMBER_URI_PREFIX) :])
            if member_id is None:
                return None
            members.add(member_id)
        elif uri.startswith(CLIENT_URI_PREFIX):
            name = uri[len(CLIENT_URI_PREFIX) :]
            if not _is_client_name(name):
                return None
            clients.add(name)
        else:
            return None
    if len(members) + len(clients) != 1:
        return None
    if members:
        return PeerIdentity("member", member_id=members.pop())
    return PeerIdentity("client", name=clients.pop())


def member_id_of(peercert: Mapping[str, object] | None) -> int | None:
    """The member id in a `getpeercert()` dict's `urn:raftkube:member:<id>` URI, or None.

    None when there is none, when it is malformed (not a decimal integer from 1 to 2**63-1
    without leading zeros), when two different member ids are named, or when the
    certificate is not only a member's (see `identity_of`).
    """
    identity = identity_of(peercert)
    return identity.member_id if identity is not None and identity.kind == "member" else None


def peer_identity(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> PeerIdentity:
    """Who is at the other end of a handshaken TLS connection.

    In asyncio: `peer_identity(writer.get_extra_info("ssl_object"))`.  Raises
    PeerIdentityError when the connection is not TLS, the peer presented no certificate
    (possible with `require_client_cert=False`) or its certificate names no raftkube identity.
    """
    if ssl_object is None:
        raise PeerIdentityError("the connection is not TLS: it carries no peer identity")
    peercert = ssl_object.getpeercert()
    if not peercert:
        raise PeerIdentityError("the peer presented no certificate")
    identity = identity_of(peercert)
    if identity is None:
        raise PeerIdentityError(f"the peer's certificate names no raftkube member or client ({_describe(peercert)})")
    return identity


def check_server_identity(peercert: Mapping[str, object] | None, expected_member_id: int | None) -> int:
    """Check, after the handshake, that the server is a member, and member `expected_member_id` if given.

    Returns its member id; raises PeerIdentityError otherwise.  The peer transport passes
    the id of the member it dialled, so that a member that moved (or an address reused by
    another member) is noticed instead of Raft messages reaching the wrong member.  With
    None, any member of the cluster will do (a client dialling an endpoint).  `peercert`
    is `writer.get_extra_info("peercert")`.
    """
    if not peercert:
        raise PeerIdentityError("the server presented no certificate")
    member_id = member_id_of(peercert)
    if member_id is None:
        raise PeerIdentityError(f"the server's certificate names no member ({_describe(peercert)})")
    if expected_member_id is not None and member_id != expected_member_id:
        raise PeerIdentityError(f"dialled member {expected_member_id} but reached member {member_id}")
    return member_id


def _raftkube_uris(peercert: object) -> list[str]:
    """The subjectAltName URIs starting with `urn:raftkube:`; anything not shaped like them is skipped."""
    if not isinstance(peercert, Mapping):
        return []
    san = peercert.get("subjectAltName")
    if not isinstance(san, tuple | list):
        return []
    uris: list[str] = []
    for entry in san:
        if isinstance(entry, tuple | list) and len(entry) == 2 and entry[0] == "URI":
            value = entry[1]
            if isinstance(value, str) and value.startswith(_URI_PREFIX):
                uris.append(value)
    return uris


def _parse_member_id(text: str) -> int | None:
    if _MEMBER_ID_RE.fullmatch(text) is None:
        return None
    value = int(text)
    return value if value <= MAX_MEMBER_ID else None


def _describe(peercert: Mapping[str, object]) -> str:
    """The subject and alt names of a getpeercert() dict, for error messages."""
    subject = peercert.get("subject")
    san = peercert.get("subjectAltName")
    return f"subject {subject!r}, subjectAltName {san!r}"
