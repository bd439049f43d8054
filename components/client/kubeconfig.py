"""Reading a kubeconfig the way kubectl does, into what a client needs to connect.

Where the file comes from: the path given, else each file of `$KUBECONFIG` (merged: the first
file that names a cluster, user or context wins, as kubectl merges), else `~/.kube/config`.
Supported credentials: client certificates (`client-certificate[-data]`, `client-key[-data]`),
bearer tokens (`token`, `tokenFile`).  What a component cannot use (exec plugins, auth
providers, basic auth) is refused by name rather than ignored, so a misconfigured component
fails at start with the field to fix.  Relative file paths are relative to the kubeconfig.

An HA cluster (`[apiserver] count` > 1) names its apiservers in the cluster's extension
`raftkube.io/apiservers` (`extension: {servers: [url, ...]}`): kubectl ignores it and dials
`server` (the balancer), our client library dials them directly and fails over among them
(components.client.rest), so a component keeps working with the balancer down.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from machinery.apiserver_set import MAX_SERVERS, SERVERS_EXTENSION

MAX_FILE_BYTES = 16 * 1024 * 1024  # a kubeconfig with many inline certificates stays far below
DEFAULT_PATH = Path("~/.kube/config")
REFUSED_USER_FIELDS = {
    "exec": "exec credential plugins are not supported",
    "auth-provider": "auth providers are not supported",
    "username": "basic authentication is not supported (use a client certificate or a token)",
    "password": "basic authentication is not supported (use a client certificate or a token)",
}


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class ClientConfig:
    """Where the apiserver is and how to prove who we are."""

    server: str  # https://host:port, no trailing slash
    servers: tuple[str, ...] = ()
    """Every apiserver to dial, in order (the `raftkube.io/apiservers` extension); () = `server`."""
    ca_data: bytes | None = None  # PEM; None: the system's trust store
    insecure: bool = False  # insecure-skip-tls-verify
    tls_server_name: str | None = None
    token: str | None = None
    cert_data: bytes | None = None  # PEM client certificate (with cert_key_data)
    key_data: bytes | None = None
    namespace: str = "default"
    context: str = ""

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context: the CA (or the system store), and the client certificate."""
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.ca_data is not None:
            try:
                ctx.load_verify_locations(cadata=self.ca_data.decode("ascii"))
            except (ssl.SSLError, UnicodeDecodeError, ValueError) as e:
                raise KubeconfigError(f"certificate-authority-data: not a PEM certificate ({e})") from None
        if self.cert_data is not None and self.key_data is not None:
            with _private_files(self.cert_data, self.key_data) as (cert, key):
                try:
                    ctx.load_cert_chain(cert, key)
                except ssl.SSLError as e:
                    raise KubeconfigError(f"client certificate and key do not load ({e.reason or e})") from None
        return ctx

    @property
    def endpoints(self) -> tuple[str, ...]:
        """The apiservers this client may dial: the extension's, else `server`."""
        return self.servers or (self.server,)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


@contextlib.contextmanager
def _private_files(cert: bytes, key: bytes) -> Iterator[tuple[str, str]]:
    """The ssl module loads client certificates only from files: two 0600 files, removed after."""
    with tempfile.TemporaryDirectory(prefix="raftkube-client-") as tmp:
        paths = []
        for name, data in (("cert.pem", cert), ("key.pem", key)):
            path = os.path.join(tmp, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            paths.append(path)
        yield paths[0], paths[1]


def kubeconfig_paths(explicit: str | Path | None = None, environ: Mapping[str, str] | None = None) -> list[Path]:
    """The files to read, in precedence order."""
    if explicit:
        return [Path(explicit).expanduser()]
    env = os.environ if environ is None else environ
    listed = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        return [Path(p).expanduser() for p in listed]
    return [DEFAULT_PATH.expanduser()]


def load(
    path: str | Path | None = None, *, context: str | None = None, environ: Mapping[str, str] | None = None
) -> ClientConfig:
    """The client configuration of `context` (default: the current context)."""
    paths = kubeconfig_paths(path, environ)
    docs = [(p, _read(p, required=bool(path) or len(paths) == 1)) for p in paths]
    clusters: dict[str, tuple[Path, Mapping[str, Any]]] = {}
    users: dict[str, tuple[Path, Mapping[str, Any]]] = {}
    contexts: dict[str, tuple[Path, Mapping[str, Any]]] = {}
    current = ""
    for p, doc in docs:
        if doc is None:
            continue
        for field, into, inner in (("clusters", clusters, "cluster"), ("users", users, "user")):
            for name, body in _named(p, doc, field, inner):
                into.setdefault(name, (p, body))
        for name, body in _named(p, doc, "contexts", "context"):
            contexts.setdefault(name, (p, body))
        cc = doc.get("current-context")
        if cc is not None and not isinstance(cc, str):
            raise KubeconfigError(f"{p}: current-context: must be a string")
        current = current or (cc or "")
    where = ", ".join(str(p) for p in paths)
    name = context or current
    if not name:
        raise KubeconfigError(f"{where}: no current-context, and no context was asked for")
    if name not in contexts:
        raise KubeconfigError(f"{where}: context {name!r} is not defined")
    ctx_path, ctx = contexts[name]
    cluster_name, user_name = _str(ctx_path, ctx, "cluster", f"contexts[{name}]"), ctx.get("user", "")
    if cluster_name not in clusters:
        raise KubeconfigError(f"{ctx_path}: contexts[{name}].cluster: cluster {cluster_name!r} is not defined")
    namespace = ctx.get("namespace") or "default"
    if not isinstance(namespace, str):
        raise KubeconfigError(f"{ctx_path}: contexts[{name}].namespace: must be a string")
    cluster_path, cluster = clusters[cluster_name]
    config = _cluster(cluster_path, cluster_name, cluster) | {"namespace": namespace, "context": name}
    if user_name:
        if not isinstance(user_name, str) or user_name not in users:
            raise KubeconfigError(f"{ctx_path}: contexts[{name}].user: user {user_name!r} is not defined")
        user_path, user = users[user_name]
        config |= _user(user_path, user_name, user)
    return ClientConfig(**config)


def _read(path: Path, *, required: bool) -> Mapping[str, Any] | None:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        if required:
            raise KubeconfigError(f"{path}: no such file") from None
        return None
    except OSError as e:
        raise KubeconfigError(f"{path}: cannot be read ({e.strerror})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise KubeconfigError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        raise KubeconfigError(f"{path}: not YAML ({str(e).splitlines()[0]})") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise KubeconfigError(f"{path}: must be a mapping, got {type(doc).__name__}")
    return doc


def _named(path: Path, doc: Mapping[str, Any], field: str, inner: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    items = doc.get(field) or []
    if not isinstance(items, list):
        raise KubeconfigError(f"{path}: {field}: must be a list")
    for i, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise KubeconfigError(f"{path}: {field}[{i}].name: must be a non-empty string")
        body = item.get(inner) or {}
        if not isinstance(body, dict):
            raise KubeconfigError(f"{path}: {field}[{i}].{inner}: must be a mapping")
        yield item["name"], body


def _str(path: Path, body: Mapping[str, Any], key: str, where: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value:
        raise KubeconfigError(f"{path}: {where}.{key}: must be a non-empty string")
    return value


def _data_or_file(path: Path, body: Mapping[str, Any], key: str, where: str) -> bytes | None:
    """`<key>-data` (base64) or `<key>` (a file, relative to the kubeconfig)."""
    data = body.get(f"{key}-data")
    if data is not None:
        if not isinstance(data, str):
            raise KubeconfigError(f"{path}: {where}.{key}-data: must be a base64 string")
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise KubeconfigError(f"{path}: {where}.{key}-data: not valid base64") from None
    name = body.get(key)
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        raise KubeconfigError(f"{path}: {where}.{key}: must be a file name")
    file = (path.parent / Path(name).expanduser()).resolve()
    try:
        with file.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise KubeconfigError(f"{path}: {where}.{key}: {file}: {e.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise KubeconfigError(f"{path}: {where}.{key}: {file} is larger than {MAX_FILE_BYTES} bytes")
    return raw


def _cluster(path: Path, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
    where = f"clusters[{name}]"
    server = _url(path, f"{where}.server", _str(path, body, "server", where))
    insecure = body.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise KubeconfigError(f"{path}: {where}.insecure-skip-tls-verify: must be true or false")
    sni = body.get("tls-server-name")
    if sni is not None and (not isinstance(sni, str) or not sni):
        raise KubeconfigError(f"{path}: {where}.tls-server-name: must be a non-empty string")
    return {
        "server": server,
        "servers": _servers(path, body, where),
        "ca_data": _data_or_file(path, body, "certificate-authority", where),
        "insecure": insecure,
        "tls_server_name": sni,
    }


def _servers(path: Path, body: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The apiservers of the `raftkube.io/apiservers` extension, checked as `server` is."""
    extensions = body.get("extensions")
    if extensions is None:
        return ()
    if not isinstance(extensions, list):
        raise KubeconfigError(f"{path}: {where}.extensions: must be a list")
    for i, item in enumerate(extensions):
        if not isinstance(item, dict) or item.get("name") != SERVERS_EXTENSION:
            continue  # someone else's extension: kubectl's rule, not ours to judge
        field = f"{where}.extensions[{i}].extension.servers"
        extension = item.get("extension")
        listed = extension.get("servers") if isinstance(extension, dict) else None
        if not isinstance(listed, list) or not listed or len(listed) > MAX_SERVERS:
            raise KubeconfigError(f"{path}: {field}: must be a list of 1 to {MAX_SERVERS} URLs")
        return tuple(dict.fromkeys(_url(path, field, url) for url in listed))
    return ()


def _url(path: Path, field: str, value: object) -> str:
    """`value` as an http(s) URL with a host and a valid port, without a trailing slash."""
    try:
        parts = urlsplit(value) if isinstance(value, str) else None
        valid = parts is not None and parts.scheme in ("https", "http") and bool(parts.hostname)
        valid = valid and parts is not None and (parts.port is None or parts.port > 0)
    except ValueError:  # a bad port or IPv6 literal
        valid = False
    if not valid or not isinstance(value, str):
        raise KubeconfigError(f"{path}: {field}: {value!r} is not an http(s) URL with a host")
    return value.rstrip("/")


def _user(path: Path, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
    where = f"users[{name}]"
    for field, why in REFUSED_USER_FIELDS.items():
        if body.get(field):
            raise KubeconfigError(f"{path}: {where}.{field}: {why}")
    token = body.get("token")
    if token is not None and (not isinstance(token, str) or not token):
        raise KubeconfigError(f"{path}: {where}.token: must be a non-empty string")
    if token is None and body.get("tokenFile") is not None:
        raw = _data_or_file(path, {"tokenFile": body["tokenFile"]}, "tokenFile", where) or b""
        try:
            token = raw.decode("ascii").strip()
        except UnicodeDecodeError:
            raise KubeconfigError(f"{path}: {where}.tokenFile: not an ASCII token") from None
        if not token:
            raise KubeconfigError(f"{path}: {where}.tokenFile: the file is empty")
    if token is not None and any(ord(c) < 0x21 or ord(c) > 0x7E for c in token):
        raise KubeconfigError(f"{path}: {where}.token: must be printable ASCII without spaces")
    cert = _data_or_file(path, body, "client-certificate", where)
    key = _data_or_file(path, body, "client-key", where)
    if (cert is None) != (key is None):
        missing = "client-key" if key is None else "client-certificate"
        raise KubeconfigError(f"{path}: {where}.{missing}: a client certificate needs both certificate and key")
    return {"token": token, "cert_data": cert, "key_data": key}
