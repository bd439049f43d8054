"""Authentication: the static token file, bearer tokens, client certificates (CN = user, O = groups)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.auth.authn import (
    AUTHENTICATED_GROUP,
    Authenticator,
    ClientCAError,
    TokenFileError,
    load_client_ca,
    load_token_file,
    parse_token_file,
)
from apiserver.auth.user import User
from machinery.process import pki


# ---------------------------------------------------------------- token file
def test_token_file_in_kubes_format() -> None:
    """token,user,uid,"g1,g2": groups are the quoted fourth column; it and columns past it are optional."""
    tokens = parse_token_file('t1,alice,u1,"dev, ops"\nt2,bob,u2\n\nt3,carol,,"",extra\n')
    assert tokens == {
        "t1": User("alice", ("dev", "ops"), "u1"),
        "t2": User("bob", (), "u2"),
        "t3": User("carol", (), ""),
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("t1,alice\n", "line 1: needs at least 3 columns (token, user name, user uid), found 2"),
        ("t1,alice,u1\nonly\n", "line 2: needs at least 3 columns"),
        (",alice,u1\n", "line 1: the token (column 1) is empty"),
        ("t1,,u1\n", "line 1: the user name (column 2) is empty"),
        ("t 1,alice,u1\n", "line 1: the token (column 1) has characters an HTTP header cannot carry"),
        ("tö,alice,u1\n", "line 1: the token (column 1) has characters"),
        ("t1,alice,u1\nt1,bob,u2\n", "line 2: the token is already listed on line 1"),
        ('t1,alice,u1,"unterminated\n', "not valid CSV"),
    ],
)
def test_malformed_token_lines_are_errors_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(TokenFileError, match=r"^tokens\.csv, line") as e:
        parse_token_file(text, "tokens.csv")
    assert message in str(e.value)


def test_token_file_problems_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match=f"token file {tmp_path / 'absent'}: cannot read it"):
        load_token_file(tmp_path / "absent")
    f = tmp_path / "tokens.csv"
    f.write_bytes(b"\xff\xfe,a,b\n")
    with pytest.raises(TokenFileError, match="not UTF-8"):
        load_token_file(f)
    f.write_text("abc,alice,1\nabc\n")
    with pytest.raises(TokenFileError, match=f"token file {f}, line 2"):
        load_token_file(f)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from('ab,"\n\r \t#é\x00'), max_size=60))
def test_any_token_file_text_parses_or_raises_token_file_error(text: str) -> None:
    """Hostile input: never anything but a TokenFileError, and every token parsed can travel in a header."""
    try:
        tokens = parse_token_file(text)
    except TokenFileError:
        return
    for token, user in tokens.items():
        assert token and all(0x21 <= ord(c) <= 0x7E for c in token)
        assert user.name


# ---------------------------------------------------------------- bearer tokens
def _scope(headers: list[tuple[bytes, bytes]] | None = None, tls: dict[str, Any] | None = None) -> dict[str, Any]:
    scope: dict[str, Any] = {"type": "http", "headers": headers or []}
    if tls is not None:
        scope["extensions"] = {"tls": tls}
    return scope


def test_bearer_token_finds_its_user_with_system_authenticated() -> None:
    a = Authenticator({"secret": User("alice", ("dev",), "1")})
    assert a.authenticate(_scope([(b"authorization", b"Bearer secret")])) == User(
        "alice", ("dev", AUTHENTICATED_GROUP), "1"
    )
    assert a.authenticate(_scope([(b"authorization", b"bearer secret")])) is not None  # scheme: any case


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [(b"authorization", b"Bearer wrong")],
        [(b"authorization", b"Bearer secre")],
        [(b"authorization", b"Bearer secretx")],
        [(b"authorization", b"Bearer ")],
        [(b"authorization", b"Basic secret")],
        [(b"authorization", b"secret")],
        [(b"x-token", b"Bearer secret")],
    ],
)
def test_anything_but_a_listed_bearer_token_is_anonymous(headers: list[tuple[bytes, bytes]]) -> None:
    assert Authenticator({"secret": User("alice")}).authenticate(_scope(headers)) is None


def test_no_token_file_means_no_token_users() -> None:
    assert Authenticator().authenticate(_scope([(b"authorization", b"Bearer x")])) is None


# ---------------------------------------------------------------- client certificates
@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> pki.CertFiles:
    return pki.create_ca(tmp_path_factory.mktemp("ca") / "pki", "test CA")


def _pem(files: pki.CertFiles) -> str:
    return files.cert.read_text()


def _tls(pem: str | None, error: str | None = None) -> dict[str, Any]:
    return {"client_cert_chain": [pem] if pem else [], "client_cert_error": error}


def test_certificate_user_is_cn_and_groups_are_o(ca: pki.CertFiles, tmp_path: Path) -> None:
    cert = pki.issue_cert(
        ca, tmp_path, "jo", common_name="system:node:n1", organizations=("system:nodes", "extra"), client=True
    )
    a = Authenticator(client_ca=load_client_ca(ca.cert))
    assert a.authenticate(_scope(tls=_tls(_pem(cert)))) == User(
        "system:node:n1", ("system:nodes", "extra", AUTHENTICATED_GROUP)
    )
    # the same certificate again comes from the cache, with the same answer
    assert a.authenticate(_scope(tls=_tls(_pem(cert)))) is not None


def test_certificate_wins_over_a_wrong_token(ca: pki.CertFiles, tmp_path: Path) -> None:
    """As kube-apiserver's union: the certificate is tried first, so a bad token beside it is not looked at."""
    cert = pki.issue_cert(ca, tmp_path, "admin", common_name="admin", organizations=("system:masters",), client=True)
    a = Authenticator({"t": User("bob")}, load_client_ca(ca.cert))
    user = a.authenticate(_scope([(b"authorization", b"Bearer nope")], _tls(_pem(cert))))
    assert user is not None and user.name == "admin"


def test_certificates_that_do_not_count(ca: pki.CertFiles, tmp_path: Path) -> None:
    """Another CA's certificate, a reported verification error, no CN, garbage, an expired one: anonymous."""
    other = pki.create_ca(tmp_path / "other")
    foreign = pki.issue_cert(other, tmp_path / "o", "x", common_name="admin", client=True)
    good = pki.issue_cert(ca, tmp_path / "g", "g", common_name="admin", client=True)
    a = Authenticator(client_ca=load_client_ca(ca.cert))
    assert a.authenticate(_scope(tls=_tls(_pem(foreign)))) is None
    assert a.authenticate(_scope(tls=_tls(_pem(good), error="unable to verify"))) is None
    assert a.authenticate(_scope(tls=_tls("not a certificate"))) is None
    assert a.authenticate(_scope(tls=_tls(None))) is None
    assert a.authenticate(_scope(tls={"client_cert_chain": [b"bytes"]})) is None
    assert Authenticator().authenticate(_scope(tls=_tls(_pem(good)))) is None  # no client CA: certs unused
    later = Authenticator(client_ca=load_client_ca(ca.cert), clock=lambda: 2**40)
    assert later.authenticate(_scope(tls=_tls(_pem(good)))) is None


def test_user_of_certificate(ca: pki.CertFiles, tmp_path: Path) -> None:
    from apiserver.auth.authn import user_of_certificate

    cert = x509.load_pem_x509_certificate(
        pki.issue_cert(ca, tmp_path, "n", common_name="x", client=True).cert.read_bytes()
    )
    assert user_of_certificate(cert) == User("x")
    assert dt.datetime.now(dt.UTC) < cert.not_valid_after_utc


def test_client_ca_file_problems(tmp_path: Path) -> None:
    with pytest.raises(ClientCAError, match="cannot read it"):
        load_client_ca(tmp_path / "absent.crt")
    (tmp_path / "bad.crt").write_text("hello")
    with pytest.raises(ClientCAError, match="not PEM certificates"):
        load_client_ca(tmp_path / "bad.crt")
