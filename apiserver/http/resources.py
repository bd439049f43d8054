"""The verbs on resources: list/watch from the watch caches, reads and writes through the registries."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from typing import Any

import orjson
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from apiserver import errors
from apiserver.admission.interface import AdmissionChain
from apiserver.auth.token_request import TokenRequests
from apiserver.bootstrap import ensure_system_namespaces
from apiserver.http import negotiation, params, patching
from apiserver.http.inflight import InFlight
from apiserver.http.kubelet_proxy import NodeAccess
from apiserver.http.requestinfo import ResourcePath
from apiserver.http.watch_stream import WatchBody, json_line, table_line
from apiserver.registry import eviction, subresources
from apiserver.registry.deletion import DeleteOptions
from apiserver.registry.generic import Registry
from apiserver.registry.storage_list import list_from_storage
from apiserver.resources.base import ResourceDef, object_fields
from apiserver.storage.interface import Storage
from apiserver.table import table
from apiserver.warnings import header_values
from apiserver.watchcache import Cacher

Obj = dict[str, Any]

# (the requesting user, the URL's namespace, the posted object) -> the answer
VirtualHandler = Callable[[Any, str | None, Obj], Obj]

# the discovery verb a method on a named object's subresource needs
_SUBRESOURCE_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "POST": "create", "DELETE": "delete"}


class ResourceHandlers:
    def __init__(
        self,
        storage: Storage,
        resources: tuple[ResourceDef, ...],
        clock: Callable[[], float],
        watch_cache_capacity: int = 10_000,
    ) -> None:
        self.clock = clock
        self.storage = storage
        self.inflight = InFlight()
        self.by_path: dict[tuple[str, str, str], ResourceDef] = {}
        self.registries: dict[ResourceDef, Registry] = {}
        # One cache per resource (events.k8s.io and core events share storage, not their shape).
        self.caches: dict[ResourceDef, Cacher] = {}
        # the answers of resources that are not stored (access reviews...), by `extra["virtual"]`
        self.virtual: dict[str, VirtualHandler] = {}
        # serviceaccounts/token (set by the app, which owns the signing key)
        self.token_requests: TokenRequests | None = None
        self.node_access: NodeAccess | None = None  # pods/log, exec, portforward, nodes/proxy
        for res in resources:
            self.by_path[(res.group, res.version, res.plural)] = res
            if res.extra.get("virtual"):
                continue
            self.registries[res] = Registry(res, storage, clock=clock, track_fields=patching.track_fields)
            self.caches[res] = Cacher(
                storage, res, capacity=watch_cache_capacity, fields_of=functools.partial(object_fields, res)
            )

    def use_admission(self, chain: AdmissionChain) -> None:
        """Every write from now on passes `chain` (built once the caches it reads exist)."""
        for registry in self.registries.values():
            registry.admission = chain

    async def start(self) -> None:
        await asyncio.gather(*(c.start() for c in self.caches.values()))
        namespaces = self.by_path.get(("", "v1", "namespaces"))
        if namespaces is not None:
            await ensure_system_namespaces(self.registries[namespaces])

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.caches.values()), return_exceptions=True)

    def ready(self) -> bool:
        return all(c.ready for c in self.caches.values())

    # -- dispatch ---------------------------------------------------------------------------

    async def handle(self, request: Request, target: ResourcePath) -> Response:
        res = self.by_path.get((target.group, target.version, target.resource))
        if res is None:
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        if res.namespaced is False and target.namespace is not None:
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        if target.subresource:
            sub = next((s for s in res.subresources if s.name == target.subresource), None)
            if sub is None:
                raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
            if _SUBRESOURCE_VERBS.get(request.method) not in sub.verbs:
                raise errors.method_not_allowed(
                    f"{request.method} is not supported on {res.plural}/{sub.name} (it supports {', '.join(sub.verbs)})"
                )
        query = dict(request.query_params)
        method = request.method
        if res.extra.get("virtual"):
            return await self.virtual_create(request, res, target)
        if target.name is None:
            if method == "GET":
                return await self.list_or_watch(request, res, target, query)
            if method == "POST":
                return await self.create(request, res, target, query)
            if method == "DELETE":
                return await self.delete_collection(request, res, target, query)
            raise errors.method_not_allowed(f"{method} is not supported on a collection of {res.plural}")
        if method == "GET":
            return await self.get(request, res, target)
        if method == "PUT":
            return await self.update(request, res, target, query)
        if method == "PATCH":
            return await self.patch(request, res, target, query)
        if method == "DELETE":
            return await self.delete(request, res, target, query)
        if method == "POST" and target.subresource in ("exec", "portforward"):
            # kubectl's SPDY retry after a refused WebSocket: it gets what the WebSocket got
            access = self._node_access()
            user = getattr(request.state, "user", None)
            failed = access.failed_upgrades.recall(user.name if user else "", request.url.path, request.url.query)
            if failed is not None:
                raise failed
            await access.check_stream(target.namespace, target.name, target.subresource, request.query_params)
            raise errors.bad_request(
                f"pods/{target.subresource} is served over WebSocket only (kubectl 1.31 or newer); "
                "this server does not upgrade to SPDY"
            )
        if method == "POST" and target.subresource in ("binding", "eviction"):
            return await self.action(request, res, target, query)
        if method == "POST" and target.subresource == "token" and self.token_requests is not None:
            return await self.token(request, res, target)
        raise errors.method_not_allowed(f"{method} is not supported on {res.plural}")

    # -- helpers ----------------------------------------------------------------------------

    def _respond(self, request: Request, res: ResourceDef, obj: Obj, code: int = 200) -> Response:
        want = negotiation.wanted(request.headers.get("accept"))
        if want.table and obj.get("kind") == res.kind:
            include = request.query_params.get("includeObject", "Metadata") or "Metadata"
            obj = table(res, [obj], now=self.clock(), include_object=include)
        body, content_type = negotiation.encode(obj, want)
        return Response(body, status_code=code, media_type=content_type)

    async def _body(self, request: Request, res: ResourceDef, *, expect: type = dict) -> Any:
        body = await _read_limited(request)
        value = await negotiation.decode_off_loop(body, request.headers.get("content-type"), expect=expect)
        return value

    def _typed_body(self, res: ResourceDef, obj: Obj, target: ResourcePath, kind: str | None = None) -> Obj:
        """Default a missing apiVersion/kind from the URL; refuse a body of another kind."""
        want_kind = kind or res.kind
        want_gv = res.group_version
        given_kind = obj.get("kind")
        given_gv = obj.get("apiVersion")
        if given_kind not in (None, "") and given_kind != want_kind:
            raise errors.bad_request(
                f"the API version in the data ({given_gv}) and kind ({given_kind}) do not match the "
                f"resource {res.plural} of {want_gv} ({want_kind} expected)"
            )
        if given_gv not in (None, "") and given_gv != want_gv and kind is None:
            raise errors.bad_request(
                f"the API version in the data ({given_gv}) does not match the expected API version ({want_gv})"
            )
        return obj

    def _node_access(self) -> NodeAccess:
        if self.node_access is None:
            raise errors.unavailable("this apiserver does not reach kubelets")
        return self.node_access

    # -- verbs ------------------------------------------------------------------------------

    async def get(self, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        assert target.name is not None
        registry = self.registries[res]
        if target.subresource == "log":
            return await self._node_access().pod_log(target.namespace, target.name, request.query_params)
        if target.subresource == "proxy" and res.plural == "nodes":
            return await self._node_access().node_proxy(target.name, target.subpath, request.url.query)
        if target.subresource in ("exec", "portforward"):
            raise errors.bad_request("Upgrade request required")  # kube's answer to a plain GET
        obj = await registry.get(target.namespace, target.name)
        if target.subresource == "scale":
            return _answer(request, subresources.scale_of(res, obj))
        return self._respond(request, res, obj)

    async def list_or_watch(
        self, request: Request, res: ResourceDef, target: ResourcePath, query: dict[str, str]
    ) -> Response:
        p = params.list_params(res, query)
        cache = self.caches[res]
        want = negotiation.wanted(request.headers.get("accept"))
        if p.watch:
            seat = self.inflight.acquire("watch", getattr(request.state, "user", None))
            try:
                watcher = await cache.watch(
                    namespace=target.namespace,
                    labels=p.labels,
                    fields=p.fields,
                    resource_version=p.resource_version,
                    allow_bookmarks=p.allow_bookmarks,
                    send_initial_events=p.send_initial_events,
                )
            except BaseException as e:
                seat.release()
                if not isinstance(e, errors.StatusError) or e.code != 410:
                    raise
                # kube answers a watch from a compacted revision with a stream holding one ERROR
                # event (410 Expired), which reflectors take as "re-list"
                line = orjson.dumps({"type": "ERROR", "object": e.to_status()}) + b"\n"
                return Response(line, media_type=negotiation.JSON)
            if want.table:
                key, make = f"table:{res.plural}:{p.include_object}", table_line(res, p.include_object, self.clock)
            else:
                key, make = "json", json_line
            watch_body = WatchBody(watcher, key, make, p.timeout_seconds, on_end=seat.release)
            return StreamingResponse(
                watch_body.chunks(),
                media_type=negotiation.JSON,
                headers={"Transfer-Encoding": "chunked"},
                background=BackgroundTask(watch_body.end),
            )
        if (not p.resource_version or p.continue_token) and not await self.storage.progress_supported():
            registry = self.registries[res]
            page = await list_from_storage(
                self.storage,
                res,
                registry.decode,
                functools.partial(object_fields, res),
                namespace=target.namespace,
                labels=p.labels,
                fields=p.fields,
                limit=p.limit,
                continue_token=p.continue_token,
            )
        else:
            page = await cache.list(
                namespace=target.namespace,
                labels=p.labels,
                fields=p.fields,
                resource_version=p.resource_version,
                match=p.match,
                limit=p.limit,
                continue_token=p.continue_token,
            )
        if want.table:
            body = table(
                res,
                page.items,
                now=self.clock(),
                include_object=p.include_object,
                resource_version=str(page.resource_version),
                continue_token=page.continue_token,
                remaining=page.remaining,
            )
            encoded, content_type = negotiation.encode(body, negotiation.Wanted())
            return Response(encoded, media_type=content_type)
        list_meta: Obj = {"resourceVersion": str(page.resource_version)}
        if page.continue_token:
            list_meta["continue"] = page.continue_token
            if page.remaining is not None:
                list_meta["remainingItemCount"] = page.remaining
        body = {"kind": res.list_kind, "apiVersion": res.group_version, "metadata": list_meta, "items": page.items}
        encoded, content_type = negotiation.encode(body, want)
        return Response(encoded, media_type=content_type)

    async def create(self, request: Request, res: ResourceDef, target: ResourcePath, query: dict[str, str]) -> Response:
        if res.namespaced and target.namespace is None:
            raise errors.method_not_allowed(
                f"{res.plural} are created in a namespace: POST /…/namespaces/NS/{res.plural}"
            )
        w = params.write_params(query, request.headers.get("user-agent", ""))
        obj = self._typed_body(res, await self._body(request, res), target)
        warnings = patching.prune_body(res, obj, w.field_validation)
        created = await self.registries[res].create(target.namespace, obj, dry_run=w.dry_run, manager=w.field_manager)
        return _with_warnings(self._respond(request, res, created, 201), warnings)

    async def virtual_create(self, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        """A resource that is only ever created and answered, never stored (reviews)."""
        if request.method != "POST" or target.name is not None:
            raise errors.method_not_allowed(f"{request.method} is not supported on {res.plural}: only create is")
        if res.namespaced and target.namespace is None:
            raise errors.method_not_allowed(f"{res.plural} are created in a namespace")
        handler = self.virtual.get(str(res.extra["virtual"]))
        if handler is None:
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        obj = self._typed_body(res, await self._body(request, res), target)
        obj["apiVersion"], obj["kind"] = res.group_version, res.kind
        answer = handler(request.state.user, target.namespace, obj)
        return _answer(request, answer, 201)

    async def update(self, request: Request, res: ResourceDef, target: ResourcePath, query: dict[str, str]) -> Response:
        assert target.name is not None
        w = params.write_params(query, request.headers.get("user-agent", ""), "UpdateOptions")
        body = await self._body(request, res)
        registry = self.registries[res]
        if target.subresource == "scale":
            scale = await subresources.write_scale(
                registry, target.namespace, target.name, body, dry_run=w.dry_run, manager=w.field_manager
            )
            return _answer(request, scale)
        obj = self._typed_body(res, body, target)
        warnings = patching.prune_body(res, obj, w.field_validation)
        result, created = await registry.update(
            target.namespace,
            target.name,
            obj,
            subresource=target.subresource,
            dry_run=w.dry_run,
            manager=w.field_manager,
        )
        return _with_warnings(self._respond(request, res, result, 201 if created else 200), warnings)

    async def patch(self, request: Request, res: ResourceDef, target: ResourcePath, query: dict[str, str]) -> Response:
        assert target.name is not None
        w = params.write_params(query, request.headers.get("user-agent", ""), "PatchOptions")
        content_type = negotiation.media_type(request.headers.get("content-type"))
        if content_type not in negotiation.PATCH_TYPES:
            raise errors.unsupported_media_type(
                "the body of the request was in an unknown format - accepted media types include: "
                + ", ".join(negotiation.PATCH_TYPES)
            )
        raw = await _read_limited(request)
        expect = list if content_type == negotiation.JSON_PATCH else dict
        body = await negotiation.decode_off_loop(raw, content_type, expect=expect)
        registry = self.registries[res]
        is_apply = content_type == negotiation.APPLY_PATCH
        if is_apply and not query.get("fieldManager"):
            raise errors.invalid(
                "PatchOptions",
                "",
                [errors.Cause("FieldValueRequired", "is required for apply patch", "fieldManager")],
                "meta.k8s.io",
            )
        if target.subresource == "scale":

            def scale_mutation(old: Obj | None) -> Obj:
                assert old is not None
                patched = patching.apply_patch(
                    content_type, subresources.scale_of(res, old), body, "Scale", "autoscaling", w
                )
                old.setdefault("spec", {})["replicas"] = subresources.replicas_from_scale(patched)
                old["metadata"].pop("resourceVersion", None)
                return old

            result, _ = await registry.mutate(target.namespace, target.name, scale_mutation, dry_run=w.dry_run)
            return _answer(request, subresources.scale_of(res, result))
        warnings: list[str] = []

        if is_apply:
            patching.refuse_unknown_applied(res, body, target.namespace, target.name)
        in_patch = patching.json_patch_unknown_fields(body) if content_type == negotiation.JSON_PATCH else []

        def mutation(old: Obj | None) -> Obj:
            if old is not None:
                # (a copy) kept before unknown fields were dropped: what the patch brings is judged
                patching.prune_patched(res, old, "Ignore")
            # apply creates when absent (a patch of anything else is 404 before this)
            new = patching.apply_patch(content_type, old, body, res.kind, res.group, w, res)
            # (a retried mutation judges again: its warnings replace the last attempt's)
            warnings[:] = patching.prune_patched(res, new, "Ignore" if is_apply else w.field_validation, in_patch)
            return new

        result, created = await registry.mutate(
            target.namespace,
            target.name,
            mutation,
            subresource=target.subresource,
            dry_run=w.dry_run,
            manager=w.field_manager,
            create_if_missing=is_apply and target.subresource is None,
            track=not is_apply,
        )
        return _with_warnings(self._respond(request, res, result, 201 if created else 200), warnings)

    async def delete(self, request: Request, res: ResourceDef, target: ResourcePath, query: dict[str, str]) -> Response:
        assert target.name is not None
        raw = await _read_limited(request)
        body: Obj | None = None
        if raw.strip():
            # kubectl drain's fallback sends a protobuf DeleteOptions: decoded like JSON
            body = await negotiation.decode_off_loop(raw, request.headers.get("content-type"))
        options = DeleteOptions.parse(body, query)
        obj, gone = await self.registries[res].delete(target.namespace, target.name, options)
        if gone and not res.extra.get("return_deleted"):
            meta = obj.get("metadata") or {}
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {"name": target.name, "kind": res.plural, "group": res.group, "uid": meta.get("uid", "")},
            }
            return _with_warnings(_answer(request, status), [])
        return _with_warnings(self._respond(request, res, obj, 200), [])

    async def delete_collection(
        self, request: Request, res: ResourceDef, target: ResourcePath, query: dict[str, str]
    ) -> Response:
        p = params.list_params(res, query)
        raw = await _read_limited(request)
        body = await negotiation.decode_off_loop(raw, request.headers.get("content-type")) if raw.strip() else None
        options = DeleteOptions.parse(body, query)
        registry = self.registries[res]
        items = await registry.list_all(target.namespace)
        deleted: list[Obj] = []
        for obj in items:
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if p.labels is not None and not p.labels.matches(labels):
                continue
            if p.fields is not None and not p.fields.matches(object_fields(res, obj)):
                continue
            meta = obj["metadata"]
            with contextlib.suppress(errors.StatusError):
                result, _ = await registry.delete(meta.get("namespace"), meta["name"], options)
                deleted.append(result)
        body_out = {"kind": res.list_kind, "apiVersion": res.group_version, "metadata": {}, "items": deleted}
        return _answer(request, body_out)

    async def action(self, request: Request, res: ResourceDef, target: ResourcePath, query: dict[str, str]) -> Response:
        assert target.name is not None
        body = await self._body(request, res)
        registry = self.registries[res]
        dry_run = query.get("dryRun") == "All"
        if target.subresource == "binding":
            await subresources.bind(registry, target.namespace, target.name, body, dry_run=dry_run)
            return _answer(request, subresources.success("pods", target.name), 201)
        budgets_def = self.by_path.get(("policy", "v1", "poddisruptionbudgets"))
        budgets = self.registries.get(budgets_def) if budgets_def is not None else None
        await eviction.evict(registry, target.namespace, target.name, body, query, budgets)
        return _answer(request, subresources.success("pods", target.name), 201)

    async def token(self, request: Request, res: ResourceDef, target: ResourcePath) -> Response:
        """serviceaccounts/token: a TokenRequest answered with a signed token (never stored)."""
        assert target.name is not None and target.namespace is not None and self.token_requests is not None
        body = await self._body(request, res)
        answer = await self.token_requests.create(target.namespace, target.name, body)
        return _with_warnings(_answer(request, answer.body, 201), list(answer.warnings))


async def _read_limited(request: Request) -> bytes:
    """The body, refused with 413 as soon as it passes the limit (never buffered past it), in
    kube's words ("Request entity too large: limit is 3145728")."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > negotiation.MAX_BODY_BYTES:
        raise errors.too_large(
            f"Request entity too large: limit is {negotiation.MAX_BODY_BYTES} (the body is {declared} bytes)"
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > negotiation.MAX_BODY_BYTES:
            raise errors.too_large(f"Request entity too large: limit is {negotiation.MAX_BODY_BYTES}")
        chunks.append(chunk)
    return b"".join(chunks)


def _answer(request: Request, value: Any, code: int = 200) -> Response:
    """JSON, or protobuf when the client asks for it first (a Status, a Scale, a list)."""
    want = negotiation.wanted(request.headers.get("accept"))
    body, content_type = negotiation.encode(value, negotiation.Wanted(protobuf=want.protobuf))
    return Response(body, status_code=code, media_type=content_type)


def _with_warnings(response: Response, warnings: list[str]) -> Response:
    # quoted ASCII-only: a field name outside latin-1 once made the header itself fail (a 500)
    for value in header_values(warnings[:20]):
        response.headers.append("Warning", value)
    return response


_ = PlainTextResponse
