"""Kubernetes protobuf bodies (`application/vnd.kubernetes.protobuf`), decoded and encoded.

kubectl 1.32+ typed clients send protobuf with no JSON fallback; client-go asks for protobuf
first in Accept.  `decode_body` gives the same dict the JSON path would; `encode_object`
gives a protobuf body only when it is exact, else None (answer JSON: client-go decodes by
the response's Content-Type).  The schema comes from upstream files, see build_descriptors.py.
"""

from __future__ import annotations

from apiserver.protobuf.envelope import MAGIC, MEDIA_TYPE, decode_body, encode_object

__all__ = ["MAGIC", "MEDIA_TYPE", "decode_body", "encode_object"]
