"""The apiserver's HTTP application: one ASGI application, one dispatcher for every path.

Per request: authenticate (401 without credentials, unless anonymous requests are on) ->
impersonate (`Impersonate-*` headers, each part authorized) -> authorize (403) -> parse the
path (requestinfo) -> decode and check the body (negotiation) -> the verb on the resource's
registry or watch cache -> encode as JSON, YAML or a Table.  Every failure leaves as a
`metav1.Status`; an unexpected exception is logged and answered 500 without a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.websockets import WebSocket

from apiserver import default_service_cidr, discovery, errors, openapi, version, warnings
from apiserver.admission.assembly import AdmissionContext, build_chain, plugin_names
from apiserver.admission.webhook.wiring import service_resolver
from apiserver.aggregator.availability import APIServiceAvailability, is_available
from apiserver.aggregator.front_proxy import FrontProxy, authentication_configmap, publish_forever
from apiserver.aggregator.local_apiservices import LocalAPIServices
from apiserver.aggregator.proxy import AggregatorClient
from apiserver.auth import impersonation, issuer_discovery
from apiserver.auth.authn import Union
from apiserver.auth.serviceaccount_setup import ServiceAccountTokens, ServiceAccountTokenSettings
from apiserver.auth.serviceaccount_tokens import NODES, PODS, SECRETS, SERVICE_ACCOUNTS
from apiserver.auth.token_review import TokenReviews
from apiserver.auth.user import ANONYMOUS, UNAUTHENTICATED_GROUP, User
from apiserver.authz.assembly import DEFAULT_MODE, Authorization, parse_mode
from apiserver.authz.attributes import Attributes, request_attributes
from apiserver.authz.bootstrap_policy import ensure_bootstrap_policy
from apiserver.authz.forbidden import forbidden
from apiserver.authz.rbac.aggregation import keep_aggregated
from apiserver.authz.reviews import Reviews
from apiserver.bootstrap import ensure_system_namespaces
from apiserver.compactor import DEFAULT_INTERVAL, compact_forever
from apiserver.crd.kinds import CRD_GROUP
from apiserver.crd.serving import CustomResourceServing
from apiserver.http import negotiation
from apiserver.http.asgi import ApiApplication
from apiserver.http.handlers.body import read_limited
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.inflight import InFlight, InFlightLimits, kind_of
from apiserver.http.kubelet_proxy import KubeletClient, NodeAccess, kubelet_of
from apiserver.http.metrics import Metrics, request_labels
from apiserver.http.pod_proxy import PodProxyClient
from apiserver.http.requestinfo import parse_resource_path
from apiserver.http.router import find_subresource, route
from apiserver.kubernetes_service import DEFAULT_SERVICE_CIDR, KubernetesService, keep_forever
from apiserver.master_leases import MasterLeases
from apiserver.node_ports import DEFAULT_RANGE as DEFAULT_NODE_PORTS
from apiserver.node_ports import NodePortAllocator
from apiserver.openapi_v2 import SwaggerDocument
from apiserver.request_context import reset_user, set_user
from apiserver.resource_metrics import INTERVAL_S as METRICS_INTERVAL_S
from apiserver.resource_metrics import MAX_BYTES as METRICS_MAX_BYTES
from apiserver.resource_metrics import ResourceMetrics
from apiserver.resources import catalog
from apiserver.resources.base import ResourceDef
from apiserver.service_allocation import ServiceAllocation, ServiceAllocationRepair
from apiserver.service_ips import ClusterIPAllocator
from apiserver.storage.interface import Storage, StorageError

log = logging.getLogger("raftkube.apiserver")

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
RELEASE_TIMEOUT_S = 2.0  # how long stopping waits to take its address out of default/kubernetes
NOBODY = User("")  # the user of a request's attributes when only its metric labels need them


class Authenticator(Protocol):
    def authenticate(self, scope: Any) -> Any: ...


def status_response(err: errors.StatusError, accept: str | None = None) -> Response:
    """The error as a Status: protobuf when the client asks for it first (client-go's typed
    clients), else JSON."""
    want = negotiation.wanted(accept) if accept else negotiation.Wanted()
    body, content_type = negotiation.encode(err.to_status(), negotiation.Wanted(protobuf=want.protobuf))
    retry_after = (err.details or {}).get("retryAfterSeconds")
    headers = {"Retry-After": str(retry_after)} if isinstance(retry_after, int) and retry_after > 0 else None
    return Response(body, status_code=err.code, media_type=content_type, headers=headers)


class Api:
    """Everything a request may reach, built once per server."""

    def __init__(
        self,
        storage: Storage,
        resources: tuple[ResourceDef, ...],
        clock: Callable[[], float],
        compaction_interval: float = DEFAULT_INTERVAL,
        watch_cache_capacity: int = 10_000,
        authorization_mode: str = DEFAULT_MODE,
        admission_plugins: Sequence[str] | None = None,
        service_accounts: ServiceAccountTokenSettings | None = None,
        kubelet_tls: ssl.SSLContext | None = None,
        inflight_limits: InFlightLimits | None = None,
        kubernetes_service: KubernetesService | None = None,
        front_proxy: FrontProxy | None = None,
        client_ca_pem: str = "",
        node_port_range: tuple[int, int] = DEFAULT_NODE_PORTS,
        metric_resolution: float = METRICS_INTERVAL_S,
    ) -> None:
        self.storage = storage
        self.kubernetes_service = kubernetes_service
        self._service_keeper: asyncio.Task[None] | None = None
        self._master_lease: MasterLeases | None = None
        if admission_plugins is None:
            admission_plugins = plugin_names()
        self.compaction_interval = compaction_interval
        self._compactor: asyncio.Task[None] | None = None
        self._aggregator: asyncio.Task[None] | None = None
        self.clock = clock
        self.scope = ResourceScope(storage, resources, clock, watch_cache_capacity)
        self.metrics = Metrics()
        self.inflight = self.scope.inflight = InFlight(inflight_limits)
        self._openapi = (self.scope.generation, openapi.OpenAPIDocuments(resources))
        self._swagger = (self.scope.generation, SwaggerDocument(resources))
        crds = self.scope.by_path.get((CRD_GROUP, "v1", "customresourcedefinitions"))
        self.custom_resources: CustomResourceServing | None = None
        self._crd_loop: asyncio.Task[None] | None = None
        caches = {(r.group, r.plural): c for r, c in self.scope.caches.items()}
        self.authorization = Authorization(parse_mode(authorization_mode), caches)
        self.reviews = Reviews(self.authorization.chain, self.authorization.policy)
        self.scope.virtual.update(self.reviews.handlers())
        context = AdmissionContext(
            registries={(r.group, r.plural): reg for r, reg in self.scope.registries.items()},
            caches=caches,
            authorization=self.authorization,
            clock=clock,
            served=self.scope.resources,
        )
        self.admission = build_chain(admission_plugins, context)
        if crds is not None:
            self.custom_resources = CustomResourceServing(
                self.scope, crds, clock=clock, resolve_service=service_resolver(context.caches, context.registries)
            )
        self.scope.use_admission(self.admission)
        self._background: list[asyncio.Task[None]] = []
        self.service_repair = self._allocate_services(
            kubernetes_service.service_cidr if kubernetes_service is not None else DEFAULT_SERVICE_CIDR,
            node_port_range,
        )
        self.aggregator_client = (
            AggregatorClient(front_proxy, service_resolver(context.caches, context.registries))
            if front_proxy is not None
            else None
        )
        apiservices = self.scope.by_path.get(("apiregistration.k8s.io", "v1", "apiservices"))
        self.local_apiservices = (
            LocalAPIServices(
                self.scope.registries[apiservices],
                self.scope.caches[apiservices],
                {(r.group, r.version) for r in self.scope.resources()},  # before any CRD is served
                self.scope.resources,
            )
            if apiservices is not None and apiservices in self.scope.caches
            else None
        )
        self.apiservices = (
            APIServiceAvailability(
                self.scope.caches[apiservices], self.scope.registries[apiservices], self.aggregator_client, clock=clock
            )
            if apiservices is not None and apiservices in self.scope.caches
            else None
        )
        self.authentication_info = (
            authentication_configmap(client_ca_pem, front_proxy) if client_ca_pem or front_proxy else None
        )
        core = {
            plural: self.scope.by_path.get(("", "v1", plural)) for plural in (SERVICE_ACCOUNTS, PODS, SECRETS, NODES)
        }
        self.service_accounts = ServiceAccountTokens(
            service_accounts or ServiceAccountTokenSettings.ephemeral(),
            {plural: self.scope.caches[res] for plural, res in core.items() if res in self.scope.caches},
            self._get_core,
            clock,
        )
        self.scope.token_requests = self.service_accounts.requests
        self.kubelets = KubeletClient(kubelet_tls)
        self.scope.pod_proxy = PodProxyClient()
        self.resource_metrics = ResourceMetrics(self._kubelet_usage, clock, metric_resolution)
        self.scope.computed.update(
            nodemetrics=self._node_metrics,
            podmetrics=self._pod_metrics,
        )
        self.scope.node_access = NodeAccess(
            self.kubelets, functools.partial(self._get_core, PODS), functools.partial(self._get_core, NODES)
        )

    async def _kubelet_usage(self, node: dict[str, Any]) -> str:
        """A kubelet's /metrics/resource (what metrics.k8s.io is computed from)."""
        _, body = await self.kubelets.stream(kubelet_of(node).url("/metrics/resource"))
        chunks, size = [], 0
        async for chunk in body:
            chunks.append(chunk)
            size += len(chunk)
            if size > METRICS_MAX_BYTES:
                break
        return b"".join(chunks).decode(errors="replace")

    def _cached(self, group: str, plural: str) -> Any:
        res = self.scope.by_path.get((group, "v1", plural))
        return self.scope.caches.get(res) if res is not None else None

    def _node_metrics(self, namespace: str | None, name: str | None) -> list[dict[str, Any]]:
        nodes = self._cached("", "nodes")
        if nodes is None:
            return []
        chosen = [n for n in (nodes.objects() if name is None else [nodes.get_object(None, name)]) if n]
        return [m for m in (self.resource_metrics.node_metrics(n) for n in chosen) if m is not None]

    def _pod_metrics(self, namespace: str | None, name: str | None) -> list[dict[str, Any]]:
        pods = self._cached("", "pods")
        if pods is None:
            return []
        chosen = [p for p in (pods.objects(namespace) if name is None else [pods.get_object(namespace, name)]) if p]
        return [m for m in (self.resource_metrics.pod_metrics(p) for p in chosen) if m is not None]

    @property
    def resources(self) -> tuple[ResourceDef, ...]:
        """What is served now: the built-in kinds and the custom ones of the stored CRDs."""
        return self.scope.resources()

    @property
    def openapi(self) -> openapi.OpenAPIDocuments:
        """The OpenAPI documents of what is served now (rebuilt when a CRD changes it)."""
        generation, documents = self._openapi
        if generation != self.scope.generation:
            documents = openapi.OpenAPIDocuments(self.resources)
            self._openapi = (self.scope.generation, documents)
        return documents

    @property
    def swagger(self) -> SwaggerDocument:
        """The OpenAPI v2 document of what is served now."""
        generation, document = self._swagger
        if generation != self.scope.generation:
            document = SwaggerDocument(self.resources)
            self._swagger = (self.scope.generation, document)
        return document

    def _allocate_services(self, cidr: str, node_ports: tuple[int, int]) -> ServiceAllocationRepair | None:
        """Services get cluster IPs (IPAddress objects) and node ports when written; None when
        this apiserver serves no Services or no IPAddresses."""
        services = self.scope.by_path.get(("", "v1", "services"))
        addresses = self.scope.by_path.get(("networking.k8s.io", "v1", "ipaddresses"))
        if services is None or addresses is None or addresses not in self.scope.caches:
            return None
        ips = ClusterIPAllocator(cidr, self.scope.registries[addresses], self.scope.caches[addresses])
        allocation = ServiceAllocation(ips, NodePortAllocator(self.storage, node_ports))
        registry = self.scope.registries[services]
        registry.write_hooks = allocation
        registry.after_delete.append(allocation.released)
        return ServiceAllocationRepair(
            allocation, self.scope.caches[services], self.scope.registries[addresses], self.scope.caches[addresses]
        )

    async def _get_core(self, plural: str, namespace: str | None, name: str) -> dict[str, Any]:
        """A fresh read of a core/v1 object (what TokenRequest and token checks look up)."""
        res = self.scope.by_path.get(("", "v1", plural))
        if res is None or res not in self.scope.registries:
            raise errors.not_found(plural, name)
        return await self.scope.registries[res].get(namespace, name)

    def allowed(self, attrs: Attributes) -> bool:
        return self.authorization.chain.authorize(attrs).allowed

    def authorize(self, attrs: Attributes) -> None:
        """403 unless the chain allows `attrs`."""
        verdict = self.authorization.chain.authorize(attrs)
        if not verdict.allowed:
            raise forbidden(attrs, verdict.reason)

    async def start(self) -> None:
        await self.scope.start()
        namespaces = self.scope.by_path.get(("", "v1", "namespaces"))
        if namespaces is not None:
            await ensure_system_namespaces(self.scope.registries[namespaces])
        roles = self.scope.by_path.get(("rbac.authorization.k8s.io", "v1", "clusterroles"))
        bindings = self.scope.by_path.get(("rbac.authorization.k8s.io", "v1", "clusterrolebindings"))
        if roles is not None and bindings is not None:
            rbac = [self.scope.by_path.get(("rbac.authorization.k8s.io", "v1", p)) for p in ("roles", "rolebindings")]
            namespaced = [self.scope.registries[r] if r is not None else None for r in rbac]
            policy = await ensure_bootstrap_policy(
                self.scope.registries[roles], self.scope.registries[bindings], namespaced[0], namespaced[1]
            )
            # serve once the authorizer sees the bootstrap policy, as kube-apiserver's
            # rbac/bootstrap-roles post-start hook holds readiness: each cache up to its own
            # policy objects' newest revision, not the storage's (an etcd whose progress
            # notifications are not trusted could not show that an idle cache has caught up with
            # that, and readiness waited out the cache's timeout twice, 4 s)
            for res in (roles, bindings):
                with contextlib.suppress(errors.StatusError):
                    rv = str(policy[res.plural]) if res.plural in policy else ""
                    await self.scope.caches[res].list(limit=1, resource_version=rv, match="NotOlderThan" if rv else "")
            self._aggregator = asyncio.create_task(
                keep_aggregated(self.scope.caches[roles], self.scope.registries[roles])
            )
        if self.custom_resources is not None:
            self._crd_loop = asyncio.create_task(self.custom_resources.run())
        if self.apiservices is not None:
            self._background.append(asyncio.create_task(self.apiservices.run()))
        if self.local_apiservices is not None:
            self._background.append(asyncio.create_task(self.local_apiservices.run()))
        if self.service_repair is not None:
            self._background.append(asyncio.create_task(self.service_repair.run()))
        service_cidrs = self.scope.by_path.get(("networking.k8s.io", "v1", "servicecidrs"))
        if service_cidrs is not None and service_cidrs in self.scope.registries:
            cidr = self.kubernetes_service.service_cidr if self.kubernetes_service else DEFAULT_SERVICE_CIDR
            self._background.append(
                asyncio.create_task(default_service_cidr.keep_forever(self.scope.registries[service_cidrs], [cidr]))
            )
        nodes = self._cached("", "nodes")
        if self.kubelets.tls is not None and nodes is not None:  # metrics.k8s.io: the kubelets' usage
            self._background.append(asyncio.create_task(self.resource_metrics.scrape_forever(nodes.objects)))
        configmaps = self.scope.by_path.get(("", "v1", "configmaps"))
        if self.authentication_info is not None and configmaps is not None and configmaps in self.scope.registries:
            self._background.append(
                asyncio.create_task(publish_forever(self.scope.registries[configmaps], self.authentication_info))
            )
        if self.compaction_interval > 0:
            self._compactor = asyncio.create_task(compact_forever(self.storage, self.compaction_interval))
        kept = [self.scope.by_path.get(p) for p in (("", "v1", "services"), ("", "v1", "endpoints"))]
        kept.append(self.scope.by_path.get(("discovery.k8s.io", "v1", "endpointslices")))
        if self.kubernetes_service is not None and all(r is not None and r in self.scope.registries for r in kept):
            services, endpoints, slices = (self.scope.registries[r] for r in kept if r is not None)
            target = self.kubernetes_service
            self._master_lease = MasterLeases(self.storage, target.address, target.port)
            self._service_keeper = asyncio.create_task(
                keep_forever(target, services, endpoints, slices, leases=self._master_lease)
            )

    async def stop(self) -> None:
        for task in (self._aggregator, self._compactor, self._service_keeper, self._crd_loop, *self._background):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._master_lease is not None and self.kubernetes_service and self.kubernetes_service.self_advertised:
            with contextlib.suppress(StorageError, OSError, TimeoutError):  # best effort: else it runs out
                await asyncio.wait_for(self._master_lease.release(), RELEASE_TIMEOUT_S)
        # the caches first: a custom kind's cache converts what it follows through the
        # conversion webhook's client, which would open a session again after it was closed
        await self.scope.stop()
        if self.custom_resources is not None:
            await self.custom_resources.stop()
        await self.admission.close()
        await self.kubelets.close()
        if self.aggregator_client is not None:
            await self.aggregator_client.close()
        if self.scope.pod_proxy is not None:
            await self.scope.pod_proxy.close()

    def ready(self) -> bool:
        """The built-in kinds' caches are filled and the stored CRDs' kinds are served."""
        crds = self.custom_resources
        return self.scope.ready() and (crds is None or crds.synced)


def build_app(
    storage: Storage,
    authenticator: Authenticator,
    *,
    clock: Callable[[], float] = time.time,
    resources: tuple[ResourceDef, ...] | None = None,
    compaction_interval: float = DEFAULT_INTERVAL,
    watch_cache_capacity: int = 10_000,
    authorization_mode: str = DEFAULT_MODE,
    anonymous: bool = False,
    admission_plugins: Sequence[str] | None = None,
    service_accounts: ServiceAccountTokenSettings | None = None,
    kubelet_tls: ssl.SSLContext | None = None,
    inflight_limits: InFlightLimits | None = None,
    kubernetes_service: KubernetesService | None = None,
    front_proxy: FrontProxy | None = None,
    client_ca_pem: str = "",
    node_port_range: tuple[int, int] = DEFAULT_NODE_PORTS,
    metric_resolution: float = METRICS_INTERVAL_S,
) -> ApiApplication:
    """`compaction_interval`: seconds between storage compactions (0: never, for a storage
    that another apiserver or etcd itself compacts).  `watch_cache_capacity`: events each
    resource's watch cache keeps for watches that resume (older ones get 410 Expired).
    `authorization_mode`: as `--authorization-mode` (Node,RBAC).  `anonymous`: a request
    without credentials runs as system:anonymous (authorization decides) instead of 401.
    `admission_plugins`: the admission plugins in order (default: every one, kube's order).
    `service_accounts`: the keys, issuers and audiences of service-account tokens (default: a key
    made up for this process); their authenticator is asked after `authenticator`.
    `kubelet_tls`: how to reach kubelets (the apiserver's client certificate and the kubelets'
    CA); without it pods/log, exec, portforward and nodes/proxy answer 503.  `inflight_limits`:
    the seats of requests and watches each priority level has (apiserver.http.inflight).
    `kubernetes_service`: where `default/kubernetes` points (None: no such Service is kept).
    `front_proxy`: the aggregator's client identity (None: APIServices with a service are
    never reachable); with `client_ca_pem` (the CA of client certificates) it is published in
    kube-system/extension-apiserver-authentication for aggregated servers.  Services get their
    cluster IPs from `kubernetes_service`'s service CIDR (10.96.0.0/16 without one) and node ports
    from `node_port_range`.  `metric_resolution`: seconds between two readings of the kubelets'
    usage (metrics.k8s.io)."""
    api = Api(
        storage,
        resources if resources is not None else catalog(),
        clock,
        compaction_interval,
        watch_cache_capacity,
        authorization_mode,
        admission_plugins,
        service_accounts,
        kubelet_tls,
        inflight_limits,
        kubernetes_service,
        front_proxy,
        client_ca_pem,
        node_port_range,
        metric_resolution,
    )
    authenticator = Union(
        authenticator, [api.service_accounts.authenticator], api.service_accounts.settings.api_audiences
    )
    api.scope.virtual["tokenreviews"] = TokenReviews(authenticator).create

    async def dispatch(request: Request) -> Response:
        started = time.perf_counter()
        attrs: Attributes | None = None
        code = 500
        warned: list[str] = []  # warnings raised while serving (admission webhooks)
        try:
            user = await who(request.scope)
            attrs = request_attributes(user, request.method, request.url.path, request.query_params)
            api.authorize(attrs)
            request.state.user = user
            as_user = set_user(user)
            try:
                with api.inflight.admit(kind_of(request.method), user), warnings.collect(warned):
                    response = await _route(api, request)
            finally:
                reset_user(as_user)
            code = response.status_code
            return _add_warnings(response, warned)
        except errors.StatusError as e:
            code = e.code
            # a webhook may warn and then refuse: kube sends both
            return _add_warnings(status_response(e, request.headers.get("accept")), warned)
        except ClientDisconnect:
            code = 499  # the client left (or its body timed out) before it sent the whole request: no one to answer
            return Response(status_code=400)
        except Exception:
            log.exception("%s %s failed", request.method, request.url.path)
            return status_response(errors.internal("an internal error occurred; the server logged it"))
        finally:
            if attrs is None:  # refused before authorization (401): the labels need no user
                attrs = request_attributes(NOBODY, request.method, request.url.path, request.query_params)
            labels = request_labels(
                attrs,
                request.method,
                request.query_params.getlist("dryRun"),
                request.headers.get("content-type", ""),
                api.scope.by_path,
            )
            api.metrics.observe(labels, code, time.perf_counter() - started)

    async def who(scope: Any) -> User:
        """The request's user (impersonated when it asks): 401 without credentials."""
        user = authenticator.authenticate(scope)
        if inspect.isawaitable(user):
            user = await user
        if user is None:
            if not anonymous:
                raise errors.unauthorized()
            user = User(ANONYMOUS, (UNAUTHENTICATED_GROUP,))
        wanted = impersonation.requested(scope["headers"])
        if wanted is not None:
            user = impersonation.impersonate(user, wanted, api.allowed)
        return user

    async def stream(websocket: WebSocket) -> None:
        """exec, port-forward and log: checked like any request (a log as its GET), then the
        subresource's session serves the socket (wsstream)."""
        user: User | None = None
        try:
            user = await who(websocket.scope)
            path = websocket.url.path
            target = parse_resource_path(path)
            found = find_subresource(api.scope, target) if target is not None else None
            if target is None or found is None or not found[1].handler.streams:
                raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
            query = list(websocket.query_params.multi_items())
            api.authorize(request_attributes(user, "GET", path, dict(query)))
            session = await found[1].handler.open_stream(
                api.scope, target, query, list(websocket.scope.get("subprotocols") or ())
            )
        except errors.StatusError as e:
            if api.scope.node_access is not None and user is not None:
                api.scope.node_access.failed_upgrades.remember(user.name, websocket.url.path, websocket.url.query, e)
            await websocket.send_denial_response(status_response(e, websocket.headers.get("accept")))
            return
        except Exception:
            log.exception("opening %s failed", websocket.url.path)
            await websocket.send_denial_response(status_response(errors.internal("an internal error occurred")))
            return
        await websocket.accept(subprotocol=session.protocol)
        await session.serve(websocket)

    return ApiApplication(api, dispatch, stream, METHODS)


def _add_warnings(response: Response, warned: list[str]) -> Response:
    for value in warnings.header_values(warned):
        response.headers.append("Warning", value)
    return response


def _json(value: Any, code: int = 200, content_type: str = negotiation.JSON) -> Response:
    return Response(orjson.dumps(value), status_code=code, media_type=content_type)


async def _route(api: Api, request: Request) -> Response:
    path = request.url.path.rstrip("/") or "/"
    apiservice = _remote_apiservice(api, path)
    if apiservice is not None:
        return await _aggregated(api, request, apiservice)
    if request.method == "GET":
        if path in ("/healthz", "/livez"):
            return PlainTextResponse("ok")
        if path == "/readyz":
            if not api.ready():
                raise errors.unavailable("the watch caches are not ready yet")
            return PlainTextResponse("ok")
        if path == "/version":
            return _json(version.version_info())
        if path == "/metrics":
            body, content_type = api.metrics.render()
            return Response(body, media_type=content_type)
        if path in (issuer_discovery.OPENID_CONFIGURATION_PATH, issuer_discovery.JWKS_PATH):
            return _issuer_discovery(api, request, path)
        found = _discovery(api, request, path)
        if found is not None:
            return found
        if path == "/openapi/v2":
            if not _accepts_json(request.headers.get("accept", "")):
                # client-go asks for v2 in protobuf, which we do not serve: a JSON body would
                # fail its decoding, a 406 says why
                raise errors.StatusError(406, "NotAcceptable", "only application/json is served at /openapi/v2")
            body, etag = api.swagger.body()
            if request.headers.get("if-none-match") == etag:
                return Response(status_code=304, headers={"ETag": etag})
            return Response(body, media_type=negotiation.JSON, headers={"ETag": etag})
        if path == "/openapi/v3":
            remote = api.apiservices.remote_openapi() if api.apiservices is not None else {}
            if not remote:
                return Response(api.openapi.root(), media_type=negotiation.JSON)
            root = orjson.loads(api.openapi.root())
            root["paths"] |= {key: {"serverRelativeURL": url} for key, url in remote.items()}
            return _json(root)
        if path.startswith("/openapi/v3/"):
            body, etag = api.openapi.document(path[len("/openapi/v3/") :])
            headers = {"ETag": etag}
            if request.query_params.get("hash") == etag.strip('"'):
                headers["Cache-Control"] = "public, immutable"
            return Response(body, media_type=negotiation.JSON, headers=headers)
    target = parse_resource_path(path)
    if target is None:
        raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
    if request.method == "HEAD" and target.subresource != "proxy":
        return Response(status_code=405)  # only a proxy relays HEAD (to the pod or service)
    return await route(api.scope, request, target)


def _remote_apiservice(api: Api, path: str) -> dict[str, Any] | None:
    """The APIService handing the path's group-version (`/apis/<group>/<version>[/...]`, or
    its OpenAPI document `/openapi/v3/apis/<group>/<version>`) to another server; None when
    there is none or this server serves that group-version itself."""
    if api.apiservices is None:
        return None
    if path.startswith("/openapi/v3/apis/"):
        path = path[len("/openapi/v3") :]
    if not path.startswith("/apis/"):
        return None
    parts = path.split("/", 4)
    if len(parts) < 4 or not parts[2] or not parts[3] or api.scope.serves(parts[2], parts[3]):
        return None
    return api.apiservices.remote_for(parts[2], parts[3])


async def _aggregated(api: Api, request: Request, apiservice: dict[str, Any]) -> Response:
    """A request for a group-version an APIService hands to another server: relayed to it for
    the user already authenticated and authorized here; 503 while it is not available."""
    if api.aggregator_client is None or not is_available(apiservice):
        raise errors.unavailable("service unavailable")
    body = await read_limited(request)
    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return await api.aggregator_client.relay(
        apiservice, request.method, path, request.headers, body, request.state.user
    )


def _accepts_json(accept: str) -> bool:
    if not accept.strip():
        return True
    kinds = {part.split(";", 1)[0].strip() for part in accept.split(",")}
    return bool(kinds & {"application/json", "application/*", "*/*"})


def _issuer_discovery(api: Api, request: Request, path: str) -> Response:
    tokens = api.service_accounts
    if not tokens.discovery_served():
        raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
    headers = {"Cache-Control": issuer_discovery.CACHE_CONTROL}
    if path == issuer_discovery.JWKS_PATH:
        return Response(orjson.dumps(tokens.jwks()), media_type=issuer_discovery.JWKS_CONTENT_TYPE, headers=headers)
    host = request.headers.get("host") or "localhost"
    return Response(orjson.dumps(tokens.openid_configuration(host)), media_type=negotiation.JSON, headers=headers)


def _discovery(api: Api, request: Request, path: str) -> Response | None:
    remote = api.apiservices.remote_versions() if api.apiservices is not None else ()
    if path in ("/api", "/apis"):
        server = f"{request.url.hostname}:{request.url.port}" if request.url.port else str(request.url.hostname)
        body, content_type = discovery.discovery_root(
            api.resources,
            request.headers.get("accept", ""),
            core=path == "/api",
            server_address=server,
            remote=remote,
        )
        return _json(body, content_type=content_type)
    parts = [p for p in path.split("/") if p]
    if len(parts) == 2 and parts[0] == "api":
        return _json(discovery.api_resource_list(api.resources, parts[1]))
    if len(parts) == 3 and parts[0] == "apis":
        return _json(discovery.api_resource_list(api.resources, f"{parts[1]}/{parts[2]}"))
    if len(parts) == 2 and parts[0] == "apis":
        return _json(discovery.api_group(api.resources, parts[1], remote))
    return None


__all__ = ["build_app", "status_response"]
# StreamingResponse is re-exported for the resource handlers' watch responses.
_ = StreamingResponse
