"""Service-account issuer discovery: the OpenID provider metadata and the JWKS.

`GET /.well-known/openid-configuration` and `GET /openid/v1/jwks`, as kube-apiserver serves
them, let anything outside the cluster verify our service-account tokens the OIDC way (the
RBAC role `system:service-account-issuer-discovery` lets service accounts read them).  Served
only when the issuer is an https URL, since OIDC requires one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apiserver.auth import jws

OPENID_CONFIGURATION_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"
JWKS_CONTENT_TYPE = "application/jwk-set+json"
CACHE_CONTROL = "public, max-age=3600"


def served(issuer: str) -> bool:
    return issuer.startswith("https://") and len(issuer) > len("https://")


def openid_configuration(issuer: str, jwks_uri: str, keys: Sequence[jws.VerifyKey]) -> dict[str, Any]:
    return {
        "issuer": issuer,
        "jwks_uri": jwks_uri,
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": sorted({k.alg for k in keys}),
    }


def jwks(keys: Sequence[jws.VerifyKey]) -> dict[str, Any]:
    """Every verification key once (a key given twice, as signing and verifying key, is listed once)."""
    seen: dict[str, dict[str, str]] = {}
    for key in keys:
        seen.setdefault(key.kid, jws.jwk(key))
    return {"keys": list(seen.values())}
