"""Compact JSON Web Signatures (RFC 7515), the subset service-account tokens need.

Signing: RS256 with an RSA key, ES256/ES384/ES512 with an EC key on P-256/P-384/P-521 (the
algorithm follows from the key, as kube-apiserver picks it).  Verifying: the algorithm is
pinned by the key, never taken from the token (the header's `alg` must equal the key's, so
`none` or an HMAC made with a public key cannot pass), a `kid` in the header must name one of
the keys, and anything that is not exactly three base64url parts of JSON is refused.
`verify` never raises on what a client sends: a malformed token is None, like a forged one.

The key id is what Kubernetes publishes in its JWKS: the unpadded base64url SHA-256 of the
public key's DER SubjectPublicKeyInfo.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

MAX_TOKEN_BYTES = 16 * 1024
"""Longer tokens are refused before any decoding (ours are well under 2 KiB)."""
MIN_RSA_BITS = 2048
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
# curve -> (algorithm, bytes of r and of s in a JWS signature)
_EC = {"secp256r1": ("ES256", 32), "secp384r1": ("ES384", 48), "secp521r1": ("ES512", 66)}
_HASH_OF: dict[str, hashes.HashAlgorithm] = {
    "RS256": hashes.SHA256(),
    "ES256": hashes.SHA256(),
    "ES384": hashes.SHA384(),
    "ES512": hashes.SHA512(),
}
_CURVE_OF_ALG = {"ES256": "secp256r1", "ES384": "secp384r1", "ES512": "secp521r1"}


class KeyFileError(ValueError):
    """A key file that cannot be used: unreadable, not PEM, or a key type tokens cannot use."""


@dataclass(frozen=True, slots=True)
class VerifyKey:
    """A public key a token may be signed with, its algorithm and key id."""

    key: PublicKey
    alg: str
    kid: str


@dataclass(frozen=True, slots=True)
class SigningKey:
    """The private key tokens are signed with."""

    key: PrivateKey
    alg: str
    kid: str

    def public(self) -> VerifyKey:
        return VerifyKey(self.key.public_key(), self.alg, self.kid)


# ---------------------------------------------------------------- keys
def algorithm_of(key: PublicKey) -> str:
    """The JWS algorithm a key signs with; KeyFileError for a curve JWS has no algorithm for."""
    if isinstance(key, rsa.RSAPublicKey):
        return "RS256"
    found = _EC.get(key.curve.name)
    if found is None:
        raise KeyFileError(f"EC keys on {key.curve.name} cannot sign tokens (P-256, P-384 or P-521 can)")
    return found[0]


def key_id(key: PublicKey) -> str:
    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64encode(hashlib.sha256(der).digest())


def verify_key(key: PublicKey) -> VerifyKey:
    return VerifyKey(key, algorithm_of(key), key_id(key))


def signing_key(key: PrivateKey) -> SigningKey:
    if isinstance(key, rsa.RSAPrivateKey) and key.key_size < MIN_RSA_BITS:
        raise KeyFileError(f"an RSA signing key needs at least {MIN_RSA_BITS} bits, this one has {key.key_size}")
    public = verify_key(key.public_key())
    return SigningKey(key, public.alg, public.kid)


def generate_rsa_pem(bits: int = MIN_RSA_BITS) -> bytes:
    """A new RSA private key as PKCS#8 PEM (what the data dir's `sa.key` holds, as kubeadm's does)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_pem(key: PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n.*?-----END \1-----", re.DOTALL)


def load_signing_key(path: Path) -> SigningKey:
    """The first private key in a PEM file (`--service-account-signing-key-file`)."""
    for kind, block in _pem_blocks(path):
        if kind.endswith("PRIVATE KEY"):
            return signing_key(_private(block, path))
    raise KeyFileError(f"{path}: holds no PEM private key")


def load_verify_keys(path: Path) -> list[VerifyKey]:
    """Every public key in a PEM file (`--service-account-key-file`): public keys, the public
    halves of private keys, and the keys of certificates, as kube-apiserver reads that file."""
    keys: list[VerifyKey] = []
    for kind, block in _pem_blocks(path):
        if kind.endswith("PRIVATE KEY"):
            keys.append(verify_key(_private(block, path).public_key()))
        elif kind.endswith("PUBLIC KEY"):
            try:
                public = serialization.load_pem_public_key(block)
            except (ValueError, UnsupportedAlgorithm) as e:
                raise KeyFileError(f"{path}: a PUBLIC KEY block cannot be read: {e}") from None
            keys.append(verify_key(_usable_public(public, path)))
        elif kind == "CERTIFICATE":
            try:
                cert = x509.load_pem_x509_certificate(block)
            except ValueError as e:
                raise KeyFileError(f"{path}: a CERTIFICATE block cannot be read: {e}") from None
            keys.append(verify_key(_usable_public(cert.public_key(), path)))
    if not keys:
        raise KeyFileError(f"{path}: holds no PEM public key, private key or certificate")
    return keys


def _pem_blocks(path: Path) -> list[tuple[str, bytes]]:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise KeyFileError(f"{path}: cannot read it: {e.strerror or e}") from None
    return [(m.group(1).decode("ascii"), m.group(0)) for m in _PEM_BLOCK.finditer(data)]


def _private(block: bytes, path: Path) -> PrivateKey:
    try:
        key = serialization.load_pem_private_key(block, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as e:
        raise KeyFileError(f"{path}: the private key cannot be read (an encrypted key is not supported): {e}") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise KeyFileError(f"{path}: a {type(key).__name__} cannot sign tokens (RSA or EC keys can)")
    return key


def _usable_public(key: object, path: Path) -> PublicKey:
    if not isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
        raise KeyFileError(f"{path}: a {type(key).__name__} cannot verify tokens (RSA or EC keys can)")
    return key


def jwk(key: VerifyKey) -> dict[str, str]:
    """The key as a JSON Web Key (RFC 7517), as `/openid/v1/jwks` lists it."""
    out = {"use": "sig", "kty": "", "kid": key.kid, "alg": key.alg}
    if isinstance(key.key, rsa.RSAPublicKey):
        numbers = key.key.public_numbers()
        out.update(kty="RSA", n=_b64int(numbers.n), e=_b64int(numbers.e))
    else:
        ec_numbers = key.key.public_numbers()
        size = _EC[key.key.curve.name][1]
        crv = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}[key.key.curve.name]
        out.update(
            kty="EC",
            crv=crv,
            x=_b64encode(ec_numbers.x.to_bytes(size, "big")),
            y=_b64encode(ec_numbers.y.to_bytes(size, "big")),
        )
    return out


# ---------------------------------------------------------------- sign and verify
def sign(payload: Mapping[str, Any], key: SigningKey) -> str:
    """`payload` as a compact JWS signed by `key` (header: alg and kid)."""
    header = _b64encode(orjson.dumps({"alg": key.alg, "kid": key.kid}))
    body = _b64encode(orjson.dumps(payload))
    signing_input = f"{header}.{body}".encode("ascii")
    return f"{header}.{body}.{_b64encode(_signature(key, signing_input))}"


def _signature(key: SigningKey, data: bytes) -> bytes:
    digest = _HASH_OF[key.alg]
    if isinstance(key.key, rsa.RSAPrivateKey):
        return key.key.sign(data, padding.PKCS1v15(), digest)
    r, s = decode_dss_signature(key.key.sign(data, ec.ECDSA(digest)))
    size = _EC[key.key.curve.name][1]
    return r.to_bytes(size, "big") + s.to_bytes(size, "big")


def verify(token: str, keys: Sequence[VerifyKey]) -> dict[str, Any] | None:
    """The payload of `token` when one of `keys` signed it; None for anything else."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_BYTES or token.count(".") != 2:
        return None
    header_b64, payload_b64, signature_b64 = token.split(".")
    header = _json_object(header_b64)
    if header is None or "crit" in header:
        return None
    alg, kid = header.get("alg"), header.get("kid")
    if not isinstance(alg, str) or (kid is not None and not isinstance(kid, str)):
        return None
    candidates = [k for k in keys if k.alg == alg and (kid is None or k.kid == kid)]
    if not candidates:
        return None
    signature = _b64decode(signature_b64)
    if signature is None or _b64decode(payload_b64) is None:
        return None
    signing_input = f"{header_b64}.{payload_b64}".encode("ascii")  # both checked: base64url only
    if not any(_verified(k, signing_input, signature) for k in candidates):
        return None
    return _json_object(payload_b64)


def _verified(key: VerifyKey, data: bytes, signature: bytes) -> bool:
    digest = _HASH_OF[key.alg]
    try:
        if isinstance(key.key, rsa.RSAPublicKey):
            key.key.verify(signature, data, padding.PKCS1v15(), digest)
            return True
        size = _EC[_CURVE_OF_ALG[key.alg]][1]
        if key.key.curve.name != _CURVE_OF_ALG[key.alg] or len(signature) != 2 * size:
            return False
        r = int.from_bytes(signature[:size], "big")
        s = int.from_bytes(signature[size:], "big")
        key.key.verify(encode_dss_signature(r, s), data, ec.ECDSA(digest))
        return True
    except (InvalidSignature, ValueError):
        return False


def _json_object(part: str) -> dict[str, Any] | None:
    raw = _b64decode(part)
    if raw is None:
        return None
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(part: str) -> bytes | None:
    """Strict unpadded base64url (RFC 7515 §2): other characters, padding or a length that no
    byte string has are refused rather than skipped."""
    if len(part) % 4 == 1 or not _B64URL.fullmatch(part):
        return None
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        return None


def _b64int(n: int) -> str:
    return _b64encode(n.to_bytes((n.bit_length() + 7) // 8 or 1, "big"))
