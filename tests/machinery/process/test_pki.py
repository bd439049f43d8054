"""The cluster PKI: certificates as the spec asks, real TLS handshakes between them, identities
read back from peer certificates, file modes and atomic writes, and load errors that name the file."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ipaddress
import os
import re
import shutil
import ssl
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import given, settings
from hypothesis import strategies as st

from machinery.process.pki import (
    CLIENT_URI_PREFIX,
    MAX_MEMBER_ID,
    MEMBER_URI_PREFIX,
    CertFiles,
    PeerIdentity,
    PeerIdentityError,
    PKIError,
    PKIExistsError,
    check_server_identity,
    client_context,
    create_ca,
    identity_of,
    issue_client_cert,
    issue_member_cert,
    load_files,
    member_id_of,
    peer_identity,
    server_context,
)

HOSTS = ["127.0.0.1", "localhost", "::1"]
REPLY = b"hello from the server\n"


@dataclass
class Pki:
    ca: CertFiles
    members: dict[int, CertFiles]
    client: CertFiles
    other_ca: CertFiles
    other_member: CertFiles
    other_client: CertFiles


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    """A cluster CA with members 1-3 and client alice, and a second, unrelated CA with its own."""
    ca = create_ca(tmp_path / "ca")
    members = {i: issue_member_cert(ca, tmp_path / f"member-{i}", i, HOSTS) for i in (1, 2, 3)}
    client = issue_client_cert(ca, tmp_path / "clients", "alice")
    other = create_ca(tmp_path / "other-ca")
    return Pki(
        ca,
        members,
        client,
        other,
        issue_member_cert(other, tmp_path / "other-member", 1, HOSTS),
        issue_client_cert(other, tmp_path / "other-clients", "mallory"),
    )


# ---------------------------------------------------------------- real TLS
@dataclass
class Handshake:
    """What one connection attempt did, seen from both ends."""

    client_error: OSError | None = None
    reply: bytes = b""
    server_cert: dict[str, object] | None = None
    """The server's certificate as the client saw it (getpeercert())."""
    seen_by_server: list[PeerIdentity | PKIError] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        # Under TLS 1.3 the client finishes its handshake before the server has checked the
        # client's certificate: a refusal then reaches the client as an end of stream, not as
        # an error.  Either way the server's handler never runs (`seen_by_server` stays empty).
        return self.client_error is not None or self.reply != REPLY


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> Handshake:
    """Serve on 127.0.0.1:0 with `server_ctx`, connect with `client_ctx`, read the server's reply."""

    async def main() -> Handshake:
        out = Handshake()

        async def handle(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                try:
                    out.seen_by_server.append(peer_identity(writer.get_extra_info("ssl_object")))
                except PKIError as e:
                    out.seen_by_server.append(e)
                writer.write(REPLY)
                await writer.drain()
            except OSError:
                pass
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()

        server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        try:
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port, ssl=client_ctx), timeout=10
                )
            except OSError as e:  # ssl.SSLError included
                out.client_error = e
                return out
            try:
                out.server_cert = writer.get_extra_info("peercert")
                out.reply = await asyncio.wait_for(reader.read(), timeout=10)
            except OSError as e:
                out.client_error = e
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
        finally:
            server.close()
            await server.wait_closed()
        return out

    return asyncio.run(main())


def _client_ctx(files: CertFiles) -> ssl.SSLContext:
    return client_context(files.ca, files.cert, files.key)


def test_a_member_dialling_a_member_is_accepted_and_both_ends_know_who_the_other_is(pki: Pki) -> None:
    h = _handshake(server_context(pki.members[1]), _client_ctx(pki.members[2]))
    assert not h.refused, h.client_error
    assert h.seen_by_server == [PeerIdentity("member", member_id=2)]
    assert check_server_identity(h.server_cert, 1) == 1
    assert check_server_identity(h.server_cert, None) == 1
    with pytest.raises(PeerIdentityError, match="dialled member 3 but reached member 1"):
        check_server_identity(h.server_cert, 3)


def test_a_client_certificate_is_accepted_and_named(pki: Pki) -> None:
    h = _handshake(server_context(pki.members[1]), _client_ctx(pki.client))
    assert not h.refused, h.client_error
    assert h.seen_by_server == [PeerIdentity("client", name="alice")]
    assert str(h.seen_by_server[0]) == "client alice"
    assert check_server_identity(h.server_cert, 1) == 1


def test_tls_1_2_works_too(pki: Pki) -> None:
    ctx = _client_ctx(pki.members[3])
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    h = _handshake(server_context(pki.members[1]), ctx)
    assert not h.refused, h.client_error
    assert h.seen_by_server == [PeerIdentity("member", member_id=3)]


def test_contexts_refuse_anything_older_than_tls_1_2(pki: Pki) -> None:
    assert server_context(pki.members[1]).minimum_version == ssl.TLSVersion.TLSv1_2
    assert _client_ctx(pki.client).minimum_version == ssl.TLSVersion.TLSv1_2


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_a_client_without_a_certificate_is_refused_when_one_is_required(pki: Pki, version: ssl.TLSVersion) -> None:
    ctx = client_context(pki.client.ca)
    ctx.maximum_version = version
    h = _handshake(server_context(pki.members[1]), ctx)
    assert h.refused
    assert h.seen_by_server == []


def test_without_require_client_cert_a_bare_client_gets_in_but_has_no_identity(pki: Pki) -> None:
    server = server_context(pki.members[1], require_client_cert=False)
    bare = _handshake(server, client_context(pki.client.ca))
    assert not bare.refused, bare.client_error
    [seen] = bare.seen_by_server
    assert isinstance(seen, PeerIdentityError) and "no certificate" in str(seen)
    # A certificate that is presented is still verified, and identifies.
    named = _handshake(server, _client_ctx(pki.client))
    assert named.seen_by_server == [PeerIdentity("client", name="alice")]
    assert _handshake(server, _client_ctx(pki.other_client)).refused


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
@pytest.mark.parametrize("who", ["other_member", "other_client"])
def test_a_client_certificate_from_another_ca_is_refused(pki: Pki, who: str, version: ssl.TLSVersion) -> None:
    # The foreign member even has the same member id (1) and hosts as a real one.
    foreign: CertFiles = getattr(pki, who)
    ctx = client_context(pki.ca.cert, foreign.cert, foreign.key)
    ctx.maximum_version = version
    h = _handshake(server_context(pki.members[1]), ctx)
    assert h.refused
    assert h.seen_by_server == []


def test_a_server_certificate_from_another_ca_is_refused(pki: Pki) -> None:
    h = _handshake(server_context(pki.other_member, require_client_cert=False), _client_ctx(pki.members[2]))
    assert isinstance(h.client_error, ssl.SSLCertVerificationError), h.client_error
    assert h.seen_by_server == []


def test_a_client_certificate_cannot_serve(pki: Pki) -> None:
    """A client certificate lacks serverAuth: no client can pose as a member, even with check_hostname off."""
    as_server = CertFiles(pki.client.cert, pki.client.key, pki.client.ca)
    h = _handshake(server_context(as_server, require_client_cert=False), _client_ctx(pki.members[2]))
    assert isinstance(h.client_error, ssl.SSLCertVerificationError), h.client_error


def test_check_server_identity_wants_a_member(pki: Pki) -> None:
    with pytest.raises(PeerIdentityError, match="no certificate"):
        check_server_identity(None, 1)
    with pytest.raises(PeerIdentityError, match="no certificate"):
        check_server_identity({}, None)
    client_cert = {"subjectAltName": (("URI", f"{CLIENT_URI_PREFIX}alice"),)}
    with pytest.raises(PeerIdentityError, match="names no member"):
        check_server_identity(client_cert, None)


def test_peer_identity_of_a_plaintext_connection_is_an_error() -> None:
    with pytest.raises(PeerIdentityError, match="not TLS"):
        peer_identity(None)


# ---------------------------------------------------------------- identities
def _san(*uris: str, extra: tuple[tuple[str, str], ...] = (("DNS", "localhost"), ("IP Address", "127.0.0.1"))) -> dict:
    return {"subject": ((("commonName", "x"),),), "subjectAltName": (*extra, *(("URI", u) for u in uris))}


M = MEMBER_URI_PREFIX


@pytest.mark.parametrize(
    ("peercert", "expected"),
    [
        (_san(f"{M}7"), 7),
        (_san(f"{M}7", extra=()), 7),
        (_san(f"{M}7", f"{M}7"), 7),  # the same id twice is still one claim
        (_san(f"{M}7", "https://example.com/x", "urn:other:member:9"), 7),  # other URIs are not ours
        (_san(f"{M}{MAX_MEMBER_ID}"), MAX_MEMBER_ID),
        (_san(f"{M}1"), 1),
        (_san(f"{M}abc"), None),
        (_san(f"{M}-1"), None),
        (_san(f"{M}0"), None),
        (_san(f"{M}"), None),
        (_san(f"{M}007"), None),
        (_san(f"{M}+7"), None),
        (_san(f"{M} 7"), None),
        (_san(f"{M}7 "), None),
        (_san(f"{M}7\n"), None),
        (_san(f"{M}7.0"), None),
        (_san(f"{M}1_000"), None),
        (_san(f"{M}\u0667"), None),  # ARABIC-INDIC DIGIT SEVEN: int() would take it
        (_san(f"{M}{2**63}"), None),
        (_san(f"{M}{2**64}"), None),
        (_san(f"{M}{'9' * 100}"), None),
        (_san(f"{M}7", f"{M}8"), None),  # two different members
        (_san(f"{M}7", f"{M}abc"), None),  # one malformed claim spoils the certificate
        (_san(f"{M}7", f"{CLIENT_URI_PREFIX}alice"), None),  # both a member and a client
        (_san(f"{M}7", "urn:raftkube:admin:root"), None),  # a raftkube claim we do not know
        (_san("URN:RAFTKUBE:MEMBER:7"), None),
        (_san(extra=(("DNS", f"{M}7"),)), None),  # not a URI entry
        (_san(f"{CLIENT_URI_PREFIX}alice"), None),  # a client, not a member
        (_san(), None),
        ({"subject": ((("commonName", "raftkube member 7"),),)}, None),  # the CN does not count
        ({}, None),
        (None, None),
    ],
)
def test_member_id_of(peercert: Mapping[str, object] | None, expected: int | None) -> None:
    assert member_id_of(peercert) == expected


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        (f"{CLIENT_URI_PREFIX}alice", PeerIdentity("client", name="alice")),
        (f"{CLIENT_URI_PREFIX}kube-apiserver.1", PeerIdentity("client", name="kube-apiserver.1")),
        (f"{MEMBER_URI_PREFIX}3", PeerIdentity("member", member_id=3)),
        (f"{CLIENT_URI_PREFIX}", None),
        (f"{CLIENT_URI_PREFIX}a/b", None),
        (f"{CLIENT_URI_PREFIX}ca", None),
        (f"{CLIENT_URI_PREFIX}{'a' * 65}", None),
    ],
)
def test_identity_of(uri: str, expected: PeerIdentity | None) -> None:
    assert identity_of(_san(uri)) == expected


_MEMBER_URI = re.compile(r"urn:raftkube:member:([1-9][0-9]*)", re.ASCII)


def _expected_member_id(peercert: object) -> int | None:
    """The rule, restated: exactly one member id, and no other `urn:raftkube:` claim."""
    if not isinstance(peercert, dict) or not isinstance(peercert.get("subjectAltName"), tuple | list):
        return None
    ids: set[int] = set()
    other_claims = False
    for entry in peercert["subjectAltName"]:
        if not (isinstance(entry, tuple | list) and len(entry) == 2 and entry[0] == "URI"):
            continue
        value = entry[1]
        if not isinstance(value, str) or not value.startswith("urn:raftkube:"):
            continue
        m = _MEMBER_URI.fullmatch(value)
        if m is not None and int(m[1]) < 2**63:
            ids.add(int(m[1]))
        else:
            other_claims = True
    return ids.pop() if len(ids) == 1 and not other_claims else None


_uri_values = st.one_of(
    st.text(),
    st.text().map(lambda s: MEMBER_URI_PREFIX + s),
    st.integers(min_value=-(2**70), max_value=2**70).map(lambda n: f"{MEMBER_URI_PREFIX}{n}"),
    st.integers(min_value=1, max_value=9).map(lambda n: f"{MEMBER_URI_PREFIX}{n}"),
    st.text().map(lambda s: CLIENT_URI_PREFIX + s),
    st.from_regex(r"\Aurn:raftkube:(member|client|x):[0-9a-z]{0,3}\Z"),
)
_entries = st.one_of(
    st.tuples(st.sampled_from(["URI", "DNS", "IP Address", "email", "DirName"]), _uri_values),
    st.tuples(st.just("URI"), _uri_values),
    st.tuples(st.text(), st.text()),
    st.tuples(st.just("URI"), st.one_of(st.none(), st.integers(), st.binary(), st.lists(st.text()))),
    st.tuples(),
    st.tuples(st.just("URI")),
    st.tuples(st.just("URI"), _uri_values, st.text()),
    st.lists(st.sampled_from(["URI", f"{MEMBER_URI_PREFIX}5"]), max_size=3),
    st.text(),
    st.none(),
    st.integers(),
)
_noise = st.lists(
    st.one_of(
        st.tuples(st.just("DNS"), st.sampled_from(["localhost", "node-1", f"{MEMBER_URI_PREFIX}4"])),
        st.tuples(st.just("IP Address"), st.sampled_from(["127.0.0.1", "0:0:0:0:0:0:0:1"])),
        st.tuples(st.just("URI"), st.sampled_from(["https://example.com/", "urn:other:member:4"])),
    ),
    max_size=3,
)
_mostly_well_formed = st.builds(
    lambda ids, noise, spoil: {
        "subjectAltName": tuple(noise) + tuple(("URI", f"{MEMBER_URI_PREFIX}{i}") for i in ids) + tuple(spoil)
    },
    st.lists(st.sampled_from([1, 2, 3, MAX_MEMBER_ID]), min_size=1, max_size=3),
    _noise,
    st.lists(st.tuples(st.just("URI"), _uri_values), max_size=1),
)
_peercerts = st.one_of(
    _mostly_well_formed,
    st.fixed_dictionaries({"subjectAltName": st.lists(_entries, max_size=6).map(tuple)}),
    st.fixed_dictionaries({"subjectAltName": st.lists(_entries, max_size=6)}),
    st.fixed_dictionaries({"subjectAltName": st.one_of(st.none(), st.text(), st.integers(), st.binary())}),
    st.dictionaries(st.text(), st.text(), max_size=3),
    st.none(),
)


@settings(max_examples=300, deadline=None)
@given(_peercerts)
def test_member_id_of_never_raises_and_reads_only_well_formed_ids(peercert: dict[str, object] | None) -> None:
    got = member_id_of(peercert)
    assert got == _expected_member_id(peercert)
    if got is not None:
        assert 1 <= got <= MAX_MEMBER_ID
        assert isinstance(peercert, dict)
        entries = [tuple(e) for e in peercert["subjectAltName"] if isinstance(e, tuple | list)]
        assert ("URI", f"{MEMBER_URI_PREFIX}{got}") in entries
    identity_of(peercert)  # never raises either


# ---------------------------------------------------------------- what is in the certificates
def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _ext(cert: x509.Certificate, kind: type[x509.ExtensionType]) -> x509.Extension[x509.ExtensionType]:
    return cert.extensions.get_extension_for_class(kind)


def test_the_ca_certificate(pki: Pki) -> None:
    ca = _cert(pki.ca.cert)
    assert ca.subject == ca.issuer
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "raftkube cluster CA"
    ca.verify_directly_issued_by(ca)
    key = serialization.load_pem_private_key(pki.ca.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1)
    bc = _ext(ca, x509.BasicConstraints)
    assert bc.critical and bc.value == x509.BasicConstraints(ca=True, path_length=0)
    ku = _ext(ca, x509.KeyUsage)
    assert isinstance(ku.value, x509.KeyUsage)
    assert ku.critical and ku.value.key_cert_sign and ku.value.crl_sign and not ku.value.digital_signature
    lifetime = ca.not_valid_after_utc - ca.not_valid_before_utc
    assert dt.timedelta(days=3649) < lifetime < dt.timedelta(days=3651)
    assert pki.ca == CertFiles(pki.ca.cert, pki.ca.cert.with_name("ca.key"), pki.ca.cert)


def test_a_member_certificate(pki: Pki) -> None:
    m = pki.members[2]
    cert = _cert(m.cert)
    ca = _cert(pki.ca.cert)
    cert.verify_directly_issued_by(ca)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "raftkube member 2"
    eku = _ext(cert, x509.ExtendedKeyUsage).value
    assert isinstance(eku, x509.ExtendedKeyUsage)
    assert set(eku) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    san = _ext(cert, x509.SubjectAlternativeName).value
    assert isinstance(san, x509.SubjectAlternativeName)
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.UniformResourceIdentifier) == ["urn:raftkube:member:2"]
    bc = _ext(cert, x509.BasicConstraints)
    assert bc.critical and bc.value == x509.BasicConstraints(ca=False, path_length=None)
    assert cert.not_valid_after_utc <= ca.not_valid_after_utc
    key = serialization.load_pem_private_key(m.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1)
    # Self-contained: the member dir holds the CA certificate too.
    assert m.ca == m.cert.parent / "ca.crt" and m.ca.read_bytes() == pki.ca.cert.read_bytes()
    assert sorted(p.name for p in m.cert.parent.iterdir()) == ["ca.crt", "member.crt", "member.key"]


def test_a_client_certificate(pki: Pki) -> None:
    cert = _cert(pki.client.cert)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    eku = _ext(cert, x509.ExtendedKeyUsage).value
    assert isinstance(eku, x509.ExtendedKeyUsage) and list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    san = _ext(cert, x509.SubjectAlternativeName).value
    assert isinstance(san, x509.SubjectAlternativeName)
    assert list(san) == [x509.UniformResourceIdentifier("urn:raftkube:client:alice")]
    assert sorted(p.name for p in pki.client.cert.parent.iterdir()) == ["alice.crt", "alice.key", "ca.crt"]


def test_hosts_are_deduplicated_and_ipv6_may_be_bracketed(pki: Pki, tmp_path: Path) -> None:
    m = issue_member_cert(pki.ca, tmp_path / "m", 9, ["[::1]", "::1", "node-1.example.com", "node-1.example.com"])
    san = _ext(_cert(m.cert), x509.SubjectAlternativeName).value
    assert isinstance(san, x509.SubjectAlternativeName)
    assert list(san) == [
        x509.IPAddress(ipaddress.ip_address("::1")),
        x509.DNSName("node-1.example.com"),
        x509.UniformResourceIdentifier("urn:raftkube:member:9"),
    ]


@pytest.mark.parametrize("member_id", [0, -1, 2**63, True, "1", 1.0])
def test_member_ids_out_of_range_are_refused(pki: Pki, tmp_path: Path, member_id: object) -> None:
    with pytest.raises(ValueError, match="member id"):
        issue_member_cert(pki.ca, tmp_path / "m", member_id, HOSTS)  # type: ignore[arg-type]
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("host", ["127.0.0.1:7001", "", "a b", "[localhost]", "-bad.example", "tcp://x", "é.example"])
def test_hosts_that_are_neither_ip_nor_dns_name_are_refused(pki: Pki, tmp_path: Path, host: str) -> None:
    with pytest.raises(ValueError, match="neither an IP address nor a DNS name"):
        issue_member_cert(pki.ca, tmp_path / "m", 1, [host])


def test_hosts_given_as_one_string_are_refused(pki: Pki, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not the string 'localhost'"):
        issue_member_cert(pki.ca, tmp_path / "m", 1, "localhost")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["ca", "member", "", "../x", "a/b", ".hidden", "a" * 65, "al ice"])
def test_bad_client_names_are_refused(pki: Pki, tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="client name"):
        issue_client_cert(pki.ca, tmp_path / "c", name)


def test_reissuing_replaces_the_member_certificate(pki: Pki) -> None:
    before = pki.members[1].cert.read_bytes()
    again = issue_member_cert(pki.ca, pki.members[1].cert.parent, 1, ["10.0.0.1"])
    assert again == pki.members[1]
    assert again.cert.read_bytes() != before
    assert load_files(again.cert.parent, "member") == again


def test_a_member_certificate_can_live_next_to_the_ca(pki: Pki) -> None:
    ca_bytes = pki.ca.cert.read_bytes()
    m = issue_member_cert(pki.ca, pki.ca.cert.parent, 1, HOSTS)
    assert m.ca == pki.ca.cert and pki.ca.cert.read_bytes() == ca_bytes
    assert load_files(pki.ca.cert.parent, "ca") == pki.ca


def test_another_cas_directory_keeps_its_ca_certificate(pki: Pki) -> None:
    other_dir = pki.other_ca.cert.parent
    before = pki.other_ca.cert.read_bytes()
    with pytest.raises(PKIError, match="another CA's certificate"):
        issue_member_cert(pki.ca, other_dir, 1, HOSTS)
    assert pki.other_ca.cert.read_bytes() == before


# ---------------------------------------------------------------- files on disk
@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077, 0o277])
def test_keys_are_0600_and_directories_0700_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        ca = create_ca(tmp_path / "data" / "pki")  # "data" is missing too: created 0700 as well
        member = issue_member_cert(ca, tmp_path / "data" / "member-1" / "pki", 1, HOSTS)
        client = issue_client_cert(ca, tmp_path / "clients", "alice")
    finally:
        os.umask(old)

    def mode(p: Path) -> int:
        return stat.S_IMODE(p.stat().st_mode)

    for files in (ca, member, client):
        assert mode(files.key) == 0o600, files.key
        assert mode(files.cert) == 0o644, files.cert
        assert mode(files.ca) == 0o644, files.ca
        assert mode(files.cert.parent) == 0o700, files.cert.parent
    for d in (tmp_path / "data", tmp_path / "data" / "member-1"):
        assert mode(d) == 0o700, d
    # Nothing but the files themselves: no temporaries left behind.
    assert sorted(p.name for p in (tmp_path / "data" / "pki").iterdir()) == ["ca.crt", "ca.key"]


def test_an_existing_directory_is_left_as_it_is(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    ca = create_ca(shared)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    assert stat.S_IMODE(ca.key.stat().st_mode) == 0o600


def test_create_ca_refuses_to_replace_a_ca(tmp_path: Path) -> None:
    ca = create_ca(tmp_path / "pki")
    before = ca.cert.read_bytes(), ca.key.read_bytes()
    with pytest.raises(PKIExistsError, match=re.escape(str(ca.cert))):
        create_ca(tmp_path / "pki")
    assert (ca.cert.read_bytes(), ca.key.read_bytes()) == before
    # Half a CA (a crash between the two files) is not replaced either.
    ca.cert.unlink()
    with pytest.raises(PKIExistsError, match=re.escape(str(ca.key))):
        create_ca(tmp_path / "pki")


def test_a_failed_write_leaves_no_temporaries(tmp_path: Path) -> None:
    """ca.crt is a directory: its rename fails; the error names the file and nothing half-written stays."""
    ca = create_ca(tmp_path / "ca")
    target = tmp_path / "m"
    (target / "ca.crt").mkdir(parents=True)
    (target / "ca.crt" / "x").write_text("keeps the rename from replacing the directory")
    with pytest.raises(PKIError, match=f"cannot write {re.escape(str(target / 'ca.crt'))}: Is a directory"):
        issue_member_cert(ca, target, 1, HOSTS)
    assert not [p.name for p in target.iterdir() if p.name.startswith(".")]


# ---------------------------------------------------------------- loading
def test_load_files_finds_a_complete_directory(pki: Pki) -> None:
    assert load_files(pki.members[2].cert.parent, "member") == pki.members[2]
    assert load_files(pki.client.cert.parent, "alice") == pki.client
    assert load_files(pki.ca.cert.parent, "ca") == pki.ca


@pytest.mark.parametrize("missing", ["member.crt", "member.key", "ca.crt"])
def test_load_files_names_a_missing_file(pki: Pki, missing: str) -> None:
    d = pki.members[1].cert.parent
    (d / missing).unlink()
    with pytest.raises(PKIError, match=f"{re.escape(str(d / missing))} is missing") as err:
        load_files(d, "member")
    assert err.value.path == d / missing


@pytest.mark.parametrize("broken", ["member.crt", "member.key", "ca.crt"])
def test_load_files_names_a_file_that_is_not_pem(pki: Pki, broken: str) -> None:
    d = pki.members[1].cert.parent
    (d / broken).write_bytes(b"not a certificate at all\n")
    with pytest.raises(PKIError, match=f"{re.escape(str(d / broken))} is not PEM"):
        load_files(d, "member")


def test_load_files_names_a_truncated_certificate(pki: Pki) -> None:
    d = pki.members[1].cert.parent
    pem = (d / "member.crt").read_bytes()
    (d / "member.crt").write_bytes(pem[:60] + pem[-30:])
    with pytest.raises(PKIError, match=f"{re.escape(str(d / 'member.crt'))} is not a valid PEM certificate"):
        load_files(d, "member")


def test_load_files_names_an_unreadable_file(pki: Pki) -> None:
    d = pki.members[1].cert.parent
    (d / "member.key").unlink()
    (d / "member.key").mkdir()
    with pytest.raises(PKIError, match=f"{re.escape(str(d / 'member.key'))} is a directory"):
        load_files(d, "member")


def test_load_files_names_a_key_that_does_not_match(pki: Pki) -> None:
    d = pki.members[1].cert.parent
    shutil.copy(pki.members[2].key, d / "member.key")
    with pytest.raises(PKIError, match=f"key {re.escape(str(d / 'member.key'))} does not match certificate"):
        load_files(d, "member")


def test_load_files_names_an_encrypted_key(pki: Pki) -> None:
    d = pki.members[1].cert.parent
    key = serialization.load_pem_private_key((d / "member.key").read_bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret"),
    )
    (d / "member.key").write_bytes(encrypted)
    with pytest.raises(PKIError, match=f"{re.escape(str(d / 'member.key'))} is encrypted"):
        load_files(d, "member")


def test_load_files_names_an_expired_certificate(tmp_path: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    ca = create_ca(tmp_path / "ca", now=now - dt.timedelta(days=2))
    m = issue_member_cert(ca, tmp_path / "m", 1, HOSTS, now=now - dt.timedelta(days=1), valid_for=dt.timedelta(hours=1))
    with pytest.raises(PKIError, match=f"{re.escape(str(m.cert))} expired on"):
        load_files(m.cert.parent, "member")
    soon = issue_member_cert(ca, tmp_path / "soon", 2, HOSTS, now=now + dt.timedelta(days=1))
    with pytest.raises(PKIError, match=f"{re.escape(str(soon.cert))} is not valid yet"):
        load_files(soon.cert.parent, "member")


def test_an_expired_ca_is_named_and_issues_nothing(tmp_path: Path) -> None:
    old = create_ca(tmp_path / "ca", now=dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    with pytest.raises(PKIError, match=f"CA certificate {re.escape(str(old.cert))} expired on 2009-12-28"):
        load_files(old.cert.parent, "ca")
    with pytest.raises(PKIError, match=f"{re.escape(str(old.cert))} expired"):
        issue_member_cert(old, tmp_path / "m", 1, HOSTS)


def test_a_leaf_never_outlives_its_ca(tmp_path: Path) -> None:
    ca = create_ca(tmp_path / "ca", valid_for=dt.timedelta(days=30))
    m = issue_member_cert(ca, tmp_path / "m", 1, HOSTS)
    assert _cert(m.cert).not_valid_after_utc == _cert(ca.cert).not_valid_after_utc


def test_load_files_names_a_certificate_of_another_ca(pki: Pki) -> None:
    d = pki.members[1].cert.parent
    shutil.copy(pki.other_ca.cert, d / "ca.crt")
    with pytest.raises(PKIError, match=f"{re.escape(str(d / 'member.crt'))} was not issued by the CA in"):
        load_files(d, "member")


def test_a_leaf_is_not_a_ca(pki: Pki) -> None:
    d = pki.members[1].cert.parent
    shutil.copy(d / "member.crt", d / "ca.crt")
    with pytest.raises(PKIError, match="is not a CA certificate"):
        load_files(d, "member")
    with pytest.raises(PKIError, match="is not a CA certificate"):
        issue_member_cert(CertFiles(d / "member.crt", d / "member.key", d / "member.crt"), d.parent / "x", 1, HOSTS)


def test_contexts_name_the_file_they_cannot_use(pki: Pki) -> None:
    m = pki.members[1]
    wrong_key = CertFiles(m.cert, pki.members[2].key, m.ca)
    with pytest.raises(PKIError, match=f"key {re.escape(str(wrong_key.key))} does not match"):
        server_context(wrong_key)
    missing_ca = m.cert.parent / "nope.crt"
    with pytest.raises(PKIError, match=f"{re.escape(str(missing_ca))} is missing"):
        client_context(missing_ca)
    with pytest.raises(ValueError, match="both or neither"):
        client_context(m.ca, m.cert, None)


def test_a_member_directory_alone_is_enough_for_tls(pki: Pki) -> None:
    """What a member process does at start: load its own directory, serve and dial from it."""
    one = load_files(pki.members[1].cert.parent, "member")
    two = load_files(pki.members[2].cert.parent, "member")
    h = _handshake(server_context(one), client_context(two.ca, two.cert, two.key))
    assert h.seen_by_server == [PeerIdentity("member", member_id=2)]
    assert check_server_identity(h.server_cert, 1) == 1
