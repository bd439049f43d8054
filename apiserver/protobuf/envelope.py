"""The Kubernetes protobuf envelope: `k8s\\x00` + runtime.Unknown{typeMeta, raw, ...}.

`decode_body` turns a request body into the JSON-shaped dict the JSON path would have
produced (400 for bytes that are not a well-formed envelope or message, 415 for a kind we
have no schema for); `encode_object` turns a JSON object into a body, or None when the object
cannot be carried exactly (the caller then answers JSON).
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import DecodeError, EncodeError

from apiserver import errors
from apiserver.protobuf.from_json import NotRepresentable, fill
from apiserver.protobuf.schema import UNKNOWN, schema
from apiserver.protobuf.to_json import check_unknown_fields, to_json

MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"


def _parse(cls: Any, data: bytes, what: str) -> Any:
    msg = cls()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError, UnicodeDecodeError) as e:
        raise errors.bad_request(f"the protobuf body is not a valid {what}: {e}") from None
    return msg


def _check_text(value: object, where: str) -> None:
    """A proto2 string that is not UTF-8 comes back as bytes: refuse it (400), as Go's decoder
    would refuse the JSON it prints."""
    if not isinstance(value, str):
        raise errors.bad_request(f"the protobuf body's runtime.Unknown {where} is not valid UTF-8")


def decode_body(body: bytes) -> dict[str, Any]:
    """A protobuf request body as the object's JSON dict (apiVersion and kind included)."""
    if not body.startswith(MAGIC):
        raise errors.bad_request(
            "the protobuf body does not start with the Kubernetes magic bytes 6b 38 73 00 (k8s\\x00)"
        )
    s = schema()
    unknown = _parse(s.message_class(UNKNOWN), body[len(MAGIC) :], "runtime.Unknown envelope")
    check_unknown_fields(unknown, "")
    check_unknown_fields(unknown.typeMeta, "typeMeta")
    for name in ("contentEncoding", "contentType"):
        _check_text(getattr(unknown, name), name)
    for name in ("apiVersion", "kind"):
        _check_text(getattr(unknown.typeMeta, name), f"typeMeta.{name}")
    if unknown.contentEncoding:
        raise errors.unsupported_media_type(
            f'the protobuf body\'s content encoding "{unknown.contentEncoding}" is not supported'
        )
    if unknown.contentType not in ("", MEDIA_TYPE):
        raise errors.unsupported_media_type(
            f'the protobuf envelope holds "{unknown.contentType}"; only {MEDIA_TYPE} is supported'
        )
    api_version, kind = unknown.typeMeta.apiVersion, unknown.typeMeta.kind
    if not kind:
        raise errors.bad_request("the protobuf body does not name its kind (runtime.Unknown typeMeta.kind is empty)")
    full_name = s.message_for(api_version, kind)
    if full_name is None:
        raise errors.unsupported_media_type(
            f'protobuf bodies of kind "{kind}" in "{api_version}" are not supported; send it as {"application/json"}'
        )
    obj = to_json(s, _parse(s.message_class(full_name), unknown.raw, full_name))
    out: dict[str, Any] = {"kind": kind, "apiVersion": api_version}
    out.update(obj)
    return out


def encode_object(obj: dict[str, Any]) -> bytes | None:
    """`obj` (with apiVersion and kind) as a protobuf body, or None if it has no exact encoding."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    s = schema()
    full_name = s.message_for(api_version, kind)
    if full_name is None:
        return None
    msg = s.message_class(full_name)()
    try:
        fill(s, msg, obj)
        raw = msg.SerializeToString()
    except (NotRepresentable, EncodeError, ValueError, TypeError):
        return None
    envelope = s.message_class(UNKNOWN)()
    envelope.typeMeta.apiVersion = api_version
    envelope.typeMeta.kind = kind
    envelope.raw = raw
    envelope.contentEncoding = ""
    envelope.contentType = ""
    encoded: bytes = envelope.SerializeToString()
    return MAGIC + encoded
