"""Webhook configuration objects -> compiled hooks, rebuilt only when the configurations change.

The source is the watch cache of mutatingwebhookconfigurations or validatingwebhookconfigurations
(anything with `objects()` and a `generation` that moves on every change).  Hooks run in kube's
order: configurations by name, then each configuration's webhooks in their order.  Defaults
are v1's: failurePolicy Fail, matchPolicy Equivalent, timeoutSeconds 10, reinvocationPolicy
Never, empty selectors (everything).  matchConditions' CEL is compiled here, so once per
generation of the configurations.  What kube refuses when a configuration is written but
could still reach us here (a bad URL or caBundle, an unparsable selector) is kept as a
`problem` and turns every call of that hook into a call failure, which failurePolicy decides.

`clientConfig.service` is kept as a reference (port defaulting to 443, path to "/"); the
client resolves it on every call through the Service's EndpointSlices (`apiserver.service_routing`).
"""

from __future__ import annotations

import base64
import binascii
import logging
import ssl
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from apiserver.admission.cel import WEBHOOK
from apiserver.admission.matchconditions import Named, compile_conditions
from apiserver.admission.rules import Rule, parse_rule
from machinery.objects import Obj
from machinery.selectors import LabelSelector, SelectorError

log = logging.getLogger("raftkube.admission.webhook")

DEFAULT_TIMEOUT = 10
MAX_TIMEOUT = 30


class ConfigSource(Protocol):
    """What the plugins read configurations from (the watch cache offers exactly this)."""

    @property
    def generation(self) -> int: ...

    def objects(self) -> Iterable[Obj]: ...


@dataclass(frozen=True, slots=True)
class ServiceRef:
    namespace: str
    name: str
    port: int
    path: str


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where to POST: a URL, or a service the client's resolver turns into an endpoint."""

    url: str | None
    service: ServiceRef | None
    ssl: ssl.SSLContext | None
    problem: str | None = None  # why this hook cannot be called at all


@dataclass(frozen=True, slots=True)
class Hook:
    uid: str  # "<configuration>/<webhook>/<index>": reinvocation's identity of a hook
    name: str
    configuration: str
    rules: tuple[Rule, ...]
    match_policy: str  # Exact or Equivalent
    namespace_selector: LabelSelector
    object_selector: LabelSelector
    failure_policy: str  # Fail or Ignore
    side_effects: str | None  # None, NoneOnDryRun, Some, Unknown; None when absent
    timeout: int  # seconds, for the whole call
    reinvoke: bool  # reinvocationPolicy IfNeeded
    review_versions: tuple[str, ...]
    endpoint: Endpoint
    selector_problem: str | None = None
    match_conditions: tuple[Named, ...] = ()  # compiled once per generation of the configurations

    @property
    def ignores_failures(self) -> bool:
        return self.failure_policy == "Ignore"


class TLSContexts:
    """One SSLContext per distinct caBundle, kept across recompiles: the HTTP client pools
    connections by context, so a configuration change must not cost every hook a handshake."""

    def __init__(self) -> None:
        self._by_bundle: dict[str, ssl.SSLContext] = {}
        self._default: ssl.SSLContext | None = None

    def for_bundle(self, bundle: Any) -> ssl.SSLContext | str:
        """The context trusting `bundle` (base64 of PEM certificates; empty: the system's roots),
        or why it is unusable."""
        if bundle in (None, ""):
            if self._default is None:
                self._default = ssl.create_default_context()
            return self._default
        if not isinstance(bundle, str):
            return "clientConfig.caBundle must be base64-encoded PEM certificates"
        found = self._by_bundle.get(bundle)
        if found is not None:
            return found
        try:
            pem = base64.b64decode(bundle, validate=True).decode("ascii")
            context = ssl.create_default_context(cadata=pem)
        except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError) as e:
            return f"clientConfig.caBundle holds no usable PEM certificates: {e}"
        if len(self._by_bundle) > 1024:  # bounded: configurations come and go
            self._by_bundle.clear()
        self._by_bundle[bundle] = context
        return context


def _endpoint(raw: Any, tls: TLSContexts) -> Endpoint:
    if not isinstance(raw, dict):
        return Endpoint(None, None, None, "clientConfig is missing")
    context = tls.for_bundle(raw.get("caBundle"))
    if isinstance(context, str):
        return Endpoint(None, None, None, context)
    url, service = raw.get("url"), raw.get("service")
    if isinstance(url, str) and url:
        parts = urlsplit(url)
        if parts.scheme != "https":
            return Endpoint(None, None, None, f"clientConfig.url {url!r}: 'https' is the only allowed URL scheme")
        if not parts.hostname or parts.username or parts.password or parts.fragment or parts.query:
            return Endpoint(None, None, None, f"clientConfig.url {url!r}: needs a host, and no user, query or fragment")
        return Endpoint(url, None, context)
    if isinstance(service, dict):
        port = service.get("port", 443)
        path = service.get("path") or "/"
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            return Endpoint(None, None, None, "clientConfig.service.port must be a port number (1-65535)")
        ref = ServiceRef(str(service.get("namespace", "")), str(service.get("name", "")), port, str(path))
        return Endpoint(None, ref, context)
    return Endpoint(None, None, None, "clientConfig needs a url or a service")


def _selector(raw: Any, field: str) -> tuple[LabelSelector, str | None]:
    try:
        return LabelSelector.from_dict(raw if raw is not None else {}), None
    except SelectorError as e:
        return LabelSelector.nothing(), f"{field}: {e}"


def _timeout(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        return DEFAULT_TIMEOUT
    return min(max(raw, 1), MAX_TIMEOUT)


def compile_hook(config_name: str, index: int, raw: Any, tls: TLSContexts, mutating: bool) -> Hook | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        return None
    name = raw["name"]
    ns_sel, ns_problem = _selector(raw.get("namespaceSelector"), "namespaceSelector")
    obj_sel, obj_problem = _selector(raw.get("objectSelector"), "objectSelector")
    versions = raw.get("admissionReviewVersions")
    side_effects = raw.get("sideEffects")
    rules = raw.get("rules")
    return Hook(
        uid=f"{config_name}/{name}/{index}",
        name=name,
        configuration=config_name,
        rules=tuple(parse_rule(r) for r in rules) if isinstance(rules, list) else (),
        match_policy="Exact" if raw.get("matchPolicy") == "Exact" else "Equivalent",
        namespace_selector=ns_sel,
        object_selector=obj_sel,
        failure_policy="Ignore" if raw.get("failurePolicy") == "Ignore" else "Fail",
        side_effects=side_effects if isinstance(side_effects, str) else None,
        timeout=_timeout(raw.get("timeoutSeconds")),
        reinvoke=mutating and raw.get("reinvocationPolicy") == "IfNeeded",
        review_versions=tuple(v for v in versions if isinstance(v, str)) if isinstance(versions, list) else (),
        endpoint=_endpoint(raw.get("clientConfig"), tls),
        selector_problem=ns_problem or obj_problem,
        match_conditions=compile_conditions(WEBHOOK, raw.get("matchConditions")),
    )


def compile_configurations(objects: Iterable[Obj], tls: TLSContexts, mutating: bool) -> tuple[Hook, ...]:
    """Every hook of every configuration, configurations sorted by name (kube's order)."""

    def config_name(obj: Obj) -> str:
        meta = obj.get("metadata")
        return str(meta.get("name", "")) if isinstance(meta, dict) else ""

    hooks: list[Hook] = []
    for obj in sorted(objects, key=config_name):
        webhooks = obj.get("webhooks")
        if not isinstance(webhooks, list):
            continue
        for i, raw in enumerate(webhooks):
            hook = compile_hook(config_name(obj), i, raw, tls, mutating)
            if hook is None:
                log.warning("webhook configuration %s: webhooks[%d] has no name; skipped", config_name(obj), i)
            else:
                hooks.append(hook)
    return tuple(hooks)


class CompiledHooks:
    """The current hooks of a source that may not exist yet (looked up on every call: the
    lead wires the watch caches after the plugins are built).  No source: no hooks."""

    def __init__(self, source: Callable[[], ConfigSource | None], *, mutating: bool) -> None:
        self._source = source
        self._mutating = mutating
        self._tls = TLSContexts()
        self._key: tuple[int, int] | None = None
        self._hooks: tuple[Hook, ...] = ()

    def current(self) -> tuple[Hook, ...]:
        source = self._source()
        if source is None:
            return ()
        key = (id(source), source.generation)
        if key != self._key:
            self._hooks = compile_configurations(source.objects(), self._tls, self._mutating)
            self._key = key
        return self._hooks
