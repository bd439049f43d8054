"""Authentication: which user a request comes from, or None (the HTTP layer answers 401).

Two ways in, tried in this order (as kube-apiserver's union authenticator does):

* a client certificate signed by the client CA: CN is the user name, each O a group.  The
  TLS handshake has verified it already (the server asks with CERT_OPTIONAL, so clients
  without one still connect); it reaches the app through the ASGI TLS extension
  (`scope["extensions"]["tls"]`, filled by `apiserver.tls_scope`), and is checked here again
  against the CA and the clock, so that nothing else can pass a certificate in;
* a bearer token (`Authorization: Bearer <token>`) listed in a static token file, kube's CSV
  format `token,user,uid,"group1,group2"`;
* a bearer token that one of the token authenticators `Union` adds accepts (service-account
  JWTs, `apiserver.auth.serviceaccount_tokens`), asked in order after the two above.

Every authenticated user also belongs to `system:authenticated`, as in Kubernetes.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import inspect
import io
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import NameOID

from apiserver.auth.user import User

AUTHENTICATED_GROUP = "system:authenticated"
_CERT_CACHE_SIZE = 1024
_MAX_TOKEN_FILE_BYTES = 16 * 1024 * 1024


class TokenFileError(ValueError):
    """The token file is unreadable or has a malformed line; the message names file and line."""


class ClientCAError(ValueError):
    """The client CA file is unreadable or holds no certificate."""


# ---------------------------------------------------------------- token file
def parse_token_file(text: str, source: str = "token file") -> dict[str, User]:
    """Token -> user from the text of a static token file.

    Each non-blank line is `token,user,uid[,"group1,group2"]` (CSV; columns after the fourth
    are ignored, as Kubernetes does).  A line with fewer than three columns, an empty token
    or user, a token that cannot travel in an HTTP header (whitespace, non-ASCII, control
    characters) or a token listed twice is an error naming `source` and the line.
    """
    tokens: dict[str, User] = {}
    first_line: dict[str, int] = {}
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    line = 0
    try:
        for record in reader:
            line = reader.line_num
            if not record or record == [""]:
                continue
            where = f"{source}, line {line}"
            if len(record) < 3:
                raise TokenFileError(
                    f"{where}: needs at least 3 columns (token, user name, user uid), found {len(record)}"
                )
            token, name, uid = record[0], record[1], record[2]
            if not token:
                raise TokenFileError(f"{where}: the token (column 1) is empty")
            if not _header_safe(token):
                raise TokenFileError(
                    f"{where}: the token (column 1) has characters an HTTP header cannot carry"
                    " (only printable ASCII without spaces)"
                )
            if not name:
                raise TokenFileError(f"{where}: the user name (column 2) is empty")
            if token in first_line:
                raise TokenFileError(f"{where}: the token is already listed on line {first_line[token]}")
            groups = tuple(g.strip() for g in record[3].split(",") if g.strip()) if len(record) > 3 else ()
            tokens[token] = User(name, groups, uid)
            first_line[token] = line
    except csv.Error as e:
        raise TokenFileError(f"{source}, line {reader.line_num or line + 1}: not valid CSV: {e}") from None
    return tokens


def load_token_file(path: Path) -> dict[str, User]:
    """`parse_token_file` of a file; a TokenFileError names it when it cannot be read."""
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_TOKEN_FILE_BYTES + 1)
    except OSError as e:
        raise TokenFileError(f"token file {path}: cannot read it: {e.strerror or e}") from None
    if len(data) > _MAX_TOKEN_FILE_BYTES:
        raise TokenFileError(f"token file {path}: larger than {_MAX_TOKEN_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TokenFileError(f"token file {path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    return parse_token_file(text, f"token file {path}")


def _header_safe(token: str) -> bool:
    return all(0x21 <= ord(c) <= 0x7E for c in token)


def load_client_ca(path: Path) -> list[x509.Certificate]:
    """Every certificate in a PEM file (a CA bundle)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ClientCAError(f"client CA file {path}: cannot read it: {e.strerror or e}") from None
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as e:
        raise ClientCAError(f"client CA file {path}: not PEM certificates: {e}") from None
    return certs


# ---------------------------------------------------------------- the authenticator
class Authenticator:
    """Finds the user of a request from its ASGI scope; None means anonymous (401)."""

    def __init__(
        self,
        tokens: Mapping[str, User] | None = None,
        client_ca: Iterable[x509.Certificate] = (),
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        # Looked up by the token's SHA-256 and then compared in constant time, so neither
        # the dict lookup nor the comparison tells an attacker how much of a guess was right.
        self._tokens: dict[bytes, tuple[bytes, User]] = {
            hashlib.sha256(t.encode()).digest(): (t.encode(), u) for t, u in (tokens or {}).items()
        }
        self._client_ca = list(client_ca)
        self._clock = clock
        self._certs: OrderedDict[str, tuple[User | None, float]] = OrderedDict()
        """PEM -> (user or None when not acceptable, expiry time): parsing and checking a
        certificate once per distinct certificate, not once per request."""

    @classmethod
    def from_files(cls, token_file: Path | None = None, client_ca_file: Path | None = None) -> Authenticator:
        """Tokens from `token_file` and client certificates signed by a CA in `client_ca_file`."""
        tokens = load_token_file(token_file) if token_file is not None else {}
        ca = load_client_ca(client_ca_file) if client_ca_file is not None else []
        return cls(tokens, ca)

    def authenticate(self, scope: Mapping[str, Any]) -> User | None:
        user = self._from_certificate(scope) or self._from_token(scope)
        if user is None:
            return None
        if AUTHENTICATED_GROUP in user.groups:
            return user
        return _with_authenticated(user)

    # ------------------------------------------------------------ bearer tokens
    def _from_token(self, scope: Mapping[str, Any]) -> User | None:
        token = bearer_token(scope)
        if token is None or not self._tokens:
            return None
        presented = token.encode("latin-1")
        entry = self._tokens.get(hashlib.sha256(presented).digest())
        if entry is None or not hmac.compare_digest(entry[0], presented):
            return None
        return entry[1]

    # ------------------------------------------------------------ client certificates
    def _from_certificate(self, scope: Mapping[str, Any]) -> User | None:
        if not self._client_ca:
            return None
        tls = scope.get("extensions", {}).get("tls")
        if not isinstance(tls, Mapping) or tls.get("client_cert_error") is not None:
            return None
        chain = tls.get("client_cert_chain")
        if not chain or not isinstance(chain[0], str):
            return None
        pem = chain[0]
        now = self._clock()
        cached = self._certs.get(pem)
        if cached is None:
            cached = self._check_certificate(pem)
            self._certs[pem] = cached
            if len(self._certs) > _CERT_CACHE_SIZE:
                self._certs.popitem(last=False)
        else:
            self._certs.move_to_end(pem)
        user, expires = cached
        return user if now < expires else None

    def _check_certificate(self, pem: str) -> tuple[User | None, float]:
        try:
            cert = x509.load_pem_x509_certificate(pem.encode("ascii"))
        except (ValueError, UnicodeEncodeError):
            return None, 0.0
        if not any(_issued_by(cert, ca) for ca in self._client_ca):
            return None, 0.0
        if self._clock() < cert.not_valid_before_utc.timestamp():
            return None, 0.0
        return user_of_certificate(cert), cert.not_valid_after_utc.timestamp()


class RequestAuthenticator(Protocol):
    def authenticate(self, scope: Any) -> Any: ...


class TokenAuthenticator(Protocol):
    """A bearer-token check that may need to read (service-account tokens look objects up)."""

    async def authenticate_token(self, token: str) -> User | None: ...

    async def authenticate_for(self, token: str, audiences: Collection[str]) -> tuple[User, tuple[str, ...]] | None:
        """The user and the granted audiences when the token is meant for one of `audiences`."""
        ...


class Union:
    """`first` (client certificate, then static token), then each token authenticator in turn:
    kube-apiserver's order (x509, token file, service-account tokens).

    `authenticate` answers at once when `first` knows the user or there is no bearer token that
    a token authenticator could take (so certificate and static-token requests never await);
    otherwise it returns an awaitable of the answer, which the HTTP layer awaits."""

    def __init__(
        self, first: RequestAuthenticator, tokens: Sequence[TokenAuthenticator], audiences: Sequence[str] = ()
    ) -> None:
        """`audiences`: the apiserver's own (`--api-audiences`), which every token `first` knows
        is implicitly meant for (kube's audience-agnostic wrapping of the static token file)."""
        self.first = first
        self.tokens = tuple(tokens)
        self.audiences = tuple(audiences)

    def authenticate(self, scope: Mapping[str, Any]) -> User | Awaitable[User | None] | None:
        user = self.first.authenticate(scope)
        if inspect.isawaitable(user):
            return self._after(user, scope)
        if user is not None or not self.tokens:
            return cast(User | None, user)
        token = bearer_token(scope)
        if token is None or token.count(".") != 2:
            return None  # every token authenticator after the first takes JWTs only
        return self._from_tokens(token)

    async def _after(self, first: Awaitable[User | None], scope: Mapping[str, Any]) -> User | None:
        user = await first
        token = bearer_token(scope)
        if user is not None or token is None:
            return user
        return await self._from_tokens(token)

    async def _from_tokens(self, token: str) -> User | None:
        for authenticator in self.tokens:
            user = await authenticator.authenticate_token(token)
            if user is not None:
                return _with_authenticated(user)
        return None

    async def review(self, token: str, audiences: Sequence[str]) -> tuple[User, tuple[str, ...]] | None:
        """TokenReview's question: whom `token` authenticates for `audiences` (none: the apiserver's
        own), and the audiences granted.  Asked as kube asks it, of a request that carries only
        `Authorization: Bearer <token>`, through the same chain as every request."""
        wanted = tuple(audiences) or self.audiences
        try:
            header = f"Bearer {token}".encode("latin-1")
        except UnicodeEncodeError:
            return None  # no header could carry it: no authenticator could know it
        scope = {"headers": [(b"authorization", header)]}
        first = self.first.authenticate(scope)
        if inspect.isawaitable(first):
            first = await first
        if first is not None:
            # an audience-agnostic token counts for the apiserver's audiences only
            granted = tuple(a for a in self.audiences if a in wanted) if wanted else self.audiences
            if wanted and not granted:
                return None
            return _with_authenticated(cast(User, first)), granted
        bearer = bearer_token(scope)
        if bearer is None or bearer.count(".") != 2:
            return None  # as for a request: the token authenticators after `first` take JWTs only
        for authenticator in self.tokens:
            found = await authenticator.authenticate_for(bearer, wanted)
            if found is not None:
                return _with_authenticated(found[0]), found[1]
        return None


def _with_authenticated(user: User) -> User:
    if AUTHENTICATED_GROUP in user.groups:
        return user
    return User(user.name, (*user.groups, AUTHENTICATED_GROUP), user.uid, user.extra)


def bearer_token(scope: Mapping[str, Any]) -> str | None:
    """The token of the first `Authorization: Bearer <token>` header, or None."""
    headers: Iterable[tuple[bytes, bytes]] = scope.get("headers", ())
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token:
                return None
            return token
    return None


def user_of_certificate(cert: x509.Certificate) -> User | None:
    """CN = the user name, O = its groups (in order); None without a (single, non-empty) CN."""
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    name = names[0].value if len(names) == 1 else None
    if not isinstance(name, str) or not name:
        return None
    groups = tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME) if str(a.value))
    return User(name, groups)


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
