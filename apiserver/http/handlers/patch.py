"""PATCH of an object (kube's handlers.PatchResource): JSON patch, merge patch, strategic merge
patch or server-side apply, of the whole object or of the part a subresource writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from apiserver import errors
from apiserver.http import negotiation, params, patching
from apiserver.http.handlers.body import read_limited
from apiserver.http.handlers.responses import respond, with_warnings
from apiserver.http.handlers.scope import ResourceScope
from apiserver.http.requestinfo import ResourcePath
from apiserver.registry.strategy import UpdateStrategy
from apiserver.resources.base import ResourceDef
from machinery.objects import Obj


@dataclass(frozen=True, slots=True)
class PatchRequest:
    """A PATCH read and checked: its type, its decoded body and its options."""

    content_type: str
    body: Any
    options: params.WriteParams
    raw: bytes = b""  # as sent (an apply patch's YAML is checked for repeated keys)

    @property
    def is_apply(self) -> bool:
        return self.content_type == negotiation.APPLY_PATCH


async def read_patch(request: Request, query: dict[str, str]) -> PatchRequest:
    """The patch in the body, refused (415) in a format that is no patch type, and an apply
    without a field manager refused (422), as kube does before reading the object."""
    w = params.write_params(query, request.headers.get("user-agent", ""), "PatchOptions")
    content_type = negotiation.media_type(request.headers.get("content-type"))
    if content_type not in negotiation.PATCH_TYPES:
        raise errors.unsupported_media_type(
            "the body of the request was in an unknown format - accepted media types include: "
            + ", ".join(negotiation.PATCH_TYPES)
        )
    raw = await read_limited(request)
    expect = list if content_type == negotiation.JSON_PATCH else dict
    body = await negotiation.decode_off_loop(raw, content_type, expect=expect)
    if content_type == negotiation.APPLY_PATCH and not query.get("fieldManager"):
        raise errors.invalid(
            "PatchOptions",
            "",
            [errors.Cause("FieldValueRequired", "is required for apply patch", "fieldManager")],
            "meta.k8s.io",
        )
    return PatchRequest(content_type, body, w, raw)


async def patch_object(
    scope: ResourceScope,
    request: Request,
    res: ResourceDef,
    target: ResourcePath,
    query: dict[str, str],
    strategy: UpdateStrategy | None = None,
) -> Response:
    """`strategy`: the subresource's (None for the object itself)."""
    assert target.name is not None
    patch = await read_patch(request, query)
    content_type, body, w, is_apply = patch.content_type, patch.body, patch.options, patch.is_apply
    warnings: list[str] = []
    decoding: list[str] = []  # an apply's repeated YAML keys, under Warn

    if is_apply:
        decoding = patching.strict_yaml(patch.raw, w.field_validation)
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

    result, created = await scope.registries[res].mutate(
        target.namespace,
        target.name,
        mutation,
        subresource=strategy,
        dry_run=w.dry_run,
        manager=w.field_manager,
        create_if_missing=is_apply and target.subresource is None,
        track=not is_apply,
    )
    return with_warnings(respond(request, res, result, scope.clock, 201 if created else 200), decoding + warnings)
