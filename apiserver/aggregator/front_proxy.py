"""How the aggregator speaks for a user to an aggregated server (kube's "front proxy").

The aggregator authenticates and authorizes the request itself, then calls the server behind
the APIService with a client certificate of the front-proxy CA (CN `front-proxy-client`) and
the user in request headers: `X-Remote-User`, one `X-Remote-Group` per group, `X-Remote-Uid`,
and `X-Remote-Extra-<key>` per extra value (the key path-escaped, as Go's url.PathEscape).
The server trusts those headers only from a certificate of that CA with an allowed name; it
learns both, and the cluster's client CA, from the ConfigMap
kube-system/extension-apiserver-authentication, which the apiserver keeps
(`authentication_configmap`, the keys and JSON-list values of kube-apiserver's
ClusterAuthenticationInfo).  The user's own credentials never leave: `Authorization` and the
`Impersonate-*` headers are dropped.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import orjson

from apiserver import errors
from apiserver.auth.user import User
from apiserver.kubernetes_service import keep_object
from apiserver.registry.generic import Registry
from machinery.objects import Obj

log = logging.getLogger("raftkube.apiserver.aggregator")

CONFIGMAP_NAMESPACE = "kube-system"
CONFIGMAP_NAME = "extension-apiserver-authentication"
USER_HEADER = "X-Remote-User"
UID_HEADER = "X-Remote-Uid"
GROUP_HEADER = "X-Remote-Group"
EXTRA_PREFIX = "X-Remote-Extra-"
DEFAULT_ALLOWED_NAMES = ("front-proxy-client",)
MAX_CONTEXTS = 256
"""SSL contexts kept, one per distinct caBundle (APIServices come and go)."""


class BadCABundle(ValueError):
    """An APIService's caBundle holds no usable PEM certificate (the message says why)."""


@dataclass
class FrontProxy:
    """The aggregator's client identity: its certificate and key, the CA that signed them (PEM)."""

    cert: Path
    key: Path
    ca_pem: str
    allowed_names: tuple[str, ...] = DEFAULT_ALLOWED_NAMES
    _contexts: dict[tuple[str, bool], ssl.SSLContext] = field(default_factory=dict, repr=False)

    def client_context(self, ca_bundle: str | None, insecure: bool) -> ssl.SSLContext:
        """The TLS context calling a server that `ca_bundle` (base64 PEM, as the APIService
        carries it; empty: the system's roots) verifies, with the front-proxy certificate;
        `insecure`: no verification (spec.insecureSkipTLSVerify).  BadCABundle otherwise."""
        key = (ca_bundle or "", insecure)
        found = self._contexts.get(key)
        if found is not None:
            return found
        if insecure:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif ca_bundle:
            try:
                pem = base64.b64decode(ca_bundle, validate=True).decode("ascii")
                context = ssl.create_default_context(cadata=pem)
            except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError) as e:
                raise BadCABundle(f"spec.caBundle holds no usable PEM certificates: {e}") from None
        else:
            context = ssl.create_default_context()
        context.load_cert_chain(self.cert, self.key)
        if len(self._contexts) >= MAX_CONTEXTS:
            self._contexts.clear()
        self._contexts[key] = context
        return context


def user_headers(user: User) -> list[tuple[str, str]]:
    """The `X-Remote-*` headers naming `user` (kube's transport.SetAuthProxyHeaders)."""
    headers = [(USER_HEADER, user.name)]
    if user.uid:
        headers.append((UID_HEADER, user.uid))
    headers += [(GROUP_HEADER, group) for group in user.groups]
    for key, values in user.extra:
        headers += [(EXTRA_PREFIX + quote(key, safe=""), value) for value in values]
    return headers


def authentication_configmap(client_ca_pem: str, proxy: FrontProxy | None) -> Obj:
    """kube-system/extension-apiserver-authentication: the cluster's client CA and, with a
    front proxy, how its requests carry the user."""
    data = {"client-ca-file": client_ca_pem}
    if proxy is not None:
        data |= {
            "requestheader-client-ca-file": proxy.ca_pem,
            "requestheader-allowed-names": orjson.dumps(list(proxy.allowed_names)).decode(),
            "requestheader-username-headers": orjson.dumps([USER_HEADER]).decode(),
            "requestheader-uid-headers": orjson.dumps([UID_HEADER]).decode(),
            "requestheader-group-headers": orjson.dumps([GROUP_HEADER]).decode(),
            "requestheader-extra-headers-prefix": orjson.dumps([EXTRA_PREFIX]).decode(),
        }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP_NAME, "namespace": CONFIGMAP_NAMESPACE},
        "data": data,
    }


PUBLISH_INTERVAL_S = 60.0
"""kube's ClusterAuthenticationTrustController resyncs each minute: a deleted or edited
ConfigMap is put back within one."""


async def publish_forever(configmaps: Registry, want: Obj, interval: float = PUBLISH_INTERVAL_S) -> None:
    """Keep kube-system/extension-apiserver-authentication holding `want`'s data until cancelled."""
    while True:
        try:
            done = await keep_object(configmaps, want)
            if done:
                log.info("%s/%s: %s", CONFIGMAP_NAMESPACE, CONFIGMAP_NAME, done)
        except errors.StatusError as e:  # kube-system not there yet, or a race: the next round retries
            log.warning("%s/%s: could not keep it: %s", CONFIGMAP_NAMESPACE, CONFIGMAP_NAME, e.message)
        except Exception:  # the loop outlives any one round's surprise; it is logged
            log.exception("%s/%s: publishing failed", CONFIGMAP_NAMESPACE, CONFIGMAP_NAME)
        await asyncio.sleep(interval)
