"""Reading a request's body: bounded in size, decoded off the event loop, and checked to be of
the resource's kind and version (defaults from the URL)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from apiserver import errors
from apiserver.http import negotiation
from apiserver.http.duplicate_fields import duplicate_paths
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj


async def read_limited(request: Request) -> bytes:
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


async def read_body(request: Request, *, expect: type = dict) -> Any:
    """The decoded body (JSON, YAML or protobuf by its content type)."""
    body = await read_limited(request)
    return await negotiation.decode_off_loop(body, request.headers.get("content-type"), expect=expect)


async def read_object_body(request: Request, field_validation: str) -> tuple[Obj, list[str]]:
    """A create's or update's object, and under `fieldValidation=Strict` the paths of the keys a
    JSON body repeats (duplicate_fields.py; [] otherwise: YAML and protobuf cannot repeat keys
    past their own decoders)."""
    body = await read_limited(request)
    content_type = request.headers.get("content-type")
    obj = await negotiation.decode_off_loop(body, content_type, expect=dict)
    repeated: list[str] = []
    if field_validation == "Strict" and negotiation.media_type(content_type) == negotiation.JSON:
        repeated = duplicate_paths(body)
    return obj, repeated


def typed_body(res: ResourceDef, obj: Obj) -> Obj:
    """Refuse a body of another kind or API version than the URL's resource (missing ones are fine)."""
    want_kind = res.kind
    want_gv = res.group_version
    given_kind = obj.get("kind")
    given_gv = obj.get("apiVersion")
    if given_kind not in (None, "") and given_kind != want_kind:
        raise errors.bad_request(
            f"the API version in the data ({given_gv}) and kind ({given_kind}) do not match the "
            f"resource {res.plural} of {want_gv} ({want_kind} expected)"
        )
    if given_gv not in (None, "") and given_gv != want_gv:
        raise errors.bad_request(
            f"the API version in the data ({given_gv}) does not match the expected API version ({want_gv})"
        )
    return obj
