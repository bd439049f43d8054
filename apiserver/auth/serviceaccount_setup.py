"""Service-account tokens for one server: the settings (`--service-account-*`, `--api-audiences`)
and the pieces built from them over the server's caches and registries: the token issuer, the
token authenticator, the TokenRequest handler and the issuer-discovery documents."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric import ec

from apiserver import errors
from apiserver.auth import issuer_discovery, jws
from apiserver.auth.serviceaccount_tokens import (
    DEFAULT_ISSUER,
    Fallback,
    ObjectSource,
    ServiceAccountTokenAuthenticator,
    TokenIssuer,
)
from apiserver.auth.token_request import Getter, TokenRequests
from machinery.objects import Obj


@dataclass(frozen=True)
class ServiceAccountTokenSettings:
    """`issuers[0]` signs new tokens; tokens of any of `issuers` are accepted (kube's rotation of
    `--service-account-issuer`).  `audiences` empty: the first issuer, as kube defaults
    `--api-audiences`.  The signing key's public half always verifies too."""

    signing_key: jws.SigningKey
    verify_keys: tuple[jws.VerifyKey, ...] = ()
    issuers: tuple[str, ...] = (DEFAULT_ISSUER,)
    audiences: tuple[str, ...] = ()
    max_expiration_seconds: int | None = None
    extend_expiration: bool = True
    jwks_uri: str = ""

    @classmethod
    def ephemeral(cls) -> ServiceAccountTokenSettings:
        """A key made up for this process only (tests, a server given no key): its tokens do not
        survive a restart."""
        return cls(jws.signing_key(ec.generate_private_key(ec.SECP256R1())))

    @property
    def api_audiences(self) -> tuple[str, ...]:
        return self.audiences or self.issuers[:1]

    @property
    def keys(self) -> tuple[jws.VerifyKey, ...]:
        public = self.signing_key.public()
        return (public, *(k for k in self.verify_keys if k.kid != public.kid))


class ServiceAccountTokens:
    """Everything service-account tokens need in a running server."""

    def __init__(
        self,
        settings: ServiceAccountTokenSettings,
        caches: Mapping[str, ObjectSource],
        get: Getter,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`caches`: the watch caches of serviceaccounts, pods, secrets and nodes by plural;
        `get`: a fresh read of one of them (404 StatusError when absent)."""
        self.settings = settings
        self.issuer = TokenIssuer(settings.signing_key, settings.issuers[0], clock=clock)
        self.authenticator = ServiceAccountTokenAuthenticator(
            settings.keys,
            issuers=settings.issuers,
            audiences=settings.api_audiences,
            sources=caches,
            clock=clock,
            fallback=_missing_as_none(get),
        )
        self.requests = TokenRequests(
            self.issuer,
            settings.api_audiences,
            get,
            max_expiration_seconds=settings.max_expiration_seconds,
            extend_expiration=settings.extend_expiration,
            clock=clock,
        )

    def discovery_served(self) -> bool:
        return issuer_discovery.served(self.settings.issuers[0])

    def openid_configuration(self, host: str) -> Obj:
        """The provider metadata; the JWKS URI is `--service-account-jwks-uri`, else this server's."""
        uri = self.settings.jwks_uri or f"https://{host}{issuer_discovery.JWKS_PATH}"
        return issuer_discovery.openid_configuration(self.settings.issuers[0], uri, self.settings.keys)

    def jwks(self) -> Obj:
        return issuer_discovery.jwks(self.settings.keys)


def _missing_as_none(get: Getter) -> Fallback:
    async def fallback(resource: str, namespace: str | None, name: str) -> Obj | None:
        try:
            return await get(resource, namespace, name)
        except errors.StatusError:
            return None  # absent, or the storage cannot say: either way not authenticated

    return fallback
