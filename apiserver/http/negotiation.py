"""Bodies in and out: content types, size and depth limits, Table and YAML requests.

Every request body is checked here before anything else sees it: at most MAX_BODY_BYTES
(413), JSON or YAML that decodes (400), nested at most MAX_DEPTH (400), an object at the top
(400), and what it DECODES to at most MAX_BODY_BYTES of JSON too (413): the limit bounds what a
request expands to, not only its bytes (YAML aliases, see `yamlbody`; protobuf messages whose
defaults print as many JSON fields).  Each refusal names the limit, in kube's words where kube
has them ("Request entity too large: limit is 3145728").  Protobuf bodies (kubectl 1.32+ typed
clients: `create <generator>`, drain's DeleteOptions and Evictions) decode to the same dict as
their JSON (`apiserver.protobuf`).  No Content-Type means JSON, as client-go and the Python client assume.

Answers are JSON unless the client asks for YAML, a Table, or protobuf first (client-go's
typed clients send `Accept: application/vnd.kubernetes.protobuf,application/json`): then
protobuf when the object has an exact encoding, else JSON, which client-go decodes just as
well because it picks its decoder by the response's Content-Type.  Tables and watch
streams stay JSON.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from dataclasses import dataclass
from typing import Any

import orjson
import yaml

from apiserver import errors, jsonbudget, protobuf
from apiserver.http import yamlbody

MAX_BODY_BYTES = jsonbudget.MAX_BYTES  # kube-apiserver's default request body limit
MAX_DEPTH = jsonbudget.MAX_DEPTH

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
APPLY_PATCH_CBOR = "application/apply-patch+cbor"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def media_type(content_type: str | None) -> str:
    """`application/json; charset=utf-8` -> `application/json`; none at all -> JSON."""
    if not content_type:
        return JSON
    return content_type.split(";", 1)[0].strip().lower() or JSON


def check_size(body: bytes) -> None:
    if len(body) > MAX_BODY_BYTES:
        raise too_large(f"the request body is {len(body)} bytes")


def too_large(what: str) -> errors.StatusError:
    """413 in kube's words, then what was too large."""
    return errors.too_large(f"Request entity too large: limit is {MAX_BODY_BYTES} ({what})")


def too_deep() -> errors.StatusError:
    return errors.bad_request(f"the body is nested deeper than {MAX_DEPTH} levels")


def _yaml_load(body: bytes) -> Any:
    try:
        docs = yamlbody.load_documents(body, max_bytes=MAX_BODY_BYTES, max_depth=MAX_DEPTH)
    except yamlbody.YamlTooLarge:
        raise too_large(f"the YAML body expands to more than {MAX_BODY_BYTES} bytes of JSON") from None
    except yamlbody.YamlTooDeep:
        raise too_deep() from None
    except yamlbody.YamlRefused as e:
        raise errors.bad_request(f"the body is not valid YAML: {e}") from None
    except yaml.YAMLError as e:
        raise errors.bad_request(f"the body is not valid YAML: {e}") from None
    docs = [d for d in docs if d is not None]
    if len(docs) != 1:
        raise errors.bad_request(f"the body must hold exactly one YAML document, found {len(docs)}")
    return docs[0]


def check_decoded(value: Any) -> None:
    """The decoded body within the request limit (measured as JSON) and MAX_DEPTH: 413 / 400."""
    try:
        jsonbudget.measure(value, max_bytes=MAX_BODY_BYTES, max_depth=MAX_DEPTH)
    except jsonbudget.TooLarge:
        raise too_large(f"the body decodes to more than {MAX_BODY_BYTES} bytes of JSON") from None
    except jsonbudget.TooDeep:
        raise too_deep() from None


def decode(body: bytes, content_type: str | None, *, expect: type = dict) -> Any:
    """The body as a Python value, after every edge check."""
    check_size(body)
    kind = media_type(content_type)
    if kind == PROTOBUF:
        if expect is not dict:
            raise errors.unsupported_media_type(f"a {PROTOBUF} body cannot be a patch")
        value: Any = protobuf.decode_body(body)
    elif not body.strip():
        raise errors.bad_request("the request body is empty")
    elif kind in (JSON, JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH):
        try:
            value = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise errors.bad_request(f"the body is not valid JSON: {e}") from None
    elif kind in (YAML, APPLY_PATCH, "application/x-yaml", "text/yaml"):
        value = _yaml_load(body)
    else:
        raise errors.unsupported_media_type(
            f'the body\'s media type "{kind}" is not supported; use {JSON} or {YAML}'
            + (f" (PATCH takes {', '.join(PATCH_TYPES)})" if expect is not dict else "")
        )
    check_decoded(value)
    if not isinstance(value, expect):
        raise errors.bad_request(f"the body must be a JSON {'object' if expect is dict else 'array'}")
    return value


OFF_LOOP_BYTES = 64 * 1024
"""Bodies from this size are decoded in a worker thread: 3 MiB of YAML is seconds of CPU, and
on the event loop it would stall every other request (and /readyz) that long."""

LARGE_DECODES_AT_ONCE = 1
"""Large bodies are decoded one at a time, the rest wait their turn.  What a decode allocates
before its budget can refuse it is many times the body (a 3 MB protobuf Pod of 1.5 M empty
containers: ~400 MiB inside the protobuf parser), so the number of decodes under way, not the
write seats (hundreds), is what bounds that memory; two at once measured up to +774 MiB.
Bodies this large are rare (manifests are kilobytes), and a waiting request holds only its
raw body (at most MAX_BODY_BYTES)."""

_large_decodes = concurrent.futures.ThreadPoolExecutor(LARGE_DECODES_AT_ONCE, thread_name_prefix="decode")


async def decode_off_loop(body: bytes, content_type: str | None, *, expect: type = dict) -> Any:
    """`decode`, in a worker thread when the body is large (the GIL is still shared, but the
    event loop gets its turns every switch interval instead of waiting for the whole decode)."""
    if len(body) < OFF_LOOP_BYTES:
        return decode(body, content_type, expect=expect)
    call = functools.partial(_decode_shedding_frames, body, content_type, expect)
    return await asyncio.get_running_loop().run_in_executor(_large_decodes, call)


def _decode_shedding_frames(body: bytes, content_type: str | None, expect: type) -> Any:
    """`decode`, whose refusal leaves without the frames it was raised in: their locals are the
    half-decoded object (hundreds of MiB for an expanding body), which the traceback would keep
    alive until the request's answer is sent and a collection breaks the cycle."""
    try:
        return decode(body, content_type, expect=expect)
    except errors.StatusError as e:
        e.__context__ = None
        raise e.with_traceback(None) from None


@dataclass(frozen=True, slots=True)
class Wanted:
    """What the client asked to get back."""

    table: bool = False
    yaml: bool = False
    protobuf: bool = False  # protobuf when the object has an exact encoding, else JSON


def wanted(accept: str | None) -> Wanted:
    """Server-side printing when kubectl asks for `as=Table`; YAML or protobuf when it is the
    first acceptable choice; JSON otherwise."""
    if not accept:
        return Wanted()
    for part in accept.split(","):
        fields = [f.strip() for f in part.split(";")]
        kind = fields[0].lower()
        params = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
        if params.get("as") == "Table" and kind in (JSON, "*/*"):
            if params.get("g", "meta.k8s.io") == "meta.k8s.io" and params.get("v", "v1") in ("v1", "v1beta1"):
                return Wanted(table=True)
            continue
        if "as" in params:
            continue  # PartialObjectMetadata and other conversions: fall through to the next choice
        if kind in (YAML, "application/x-yaml"):
            return Wanted(yaml=True)
        if kind == PROTOBUF:
            return Wanted(protobuf=True)
        if kind in (JSON, "*/*", "application/*"):
            return Wanted()
    return Wanted()


def encode(value: Any, want: Wanted) -> tuple[bytes, str]:
    if want.yaml:
        return yaml.safe_dump(value, sort_keys=False).encode(), YAML
    if want.protobuf and isinstance(value, dict):
        encoded = protobuf.encode_object(value)
        if encoded is not None:
            return encoded, PROTOBUF
    return orjson.dumps(value), JSON
