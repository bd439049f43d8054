"""The protobuf wire format, by hand: enough to speak etcd's gRPC API without generated code.

Only what etcd's messages use: varints (wire type 0) and length-delimited fields (wire type
2: bytes, strings, nested messages, packed repeated).  Unknown wire types 1 and 5 are
skipped when decoding, so that a newer etcd adding fixed-width fields does not break us.
"""

from __future__ import annotations

from collections.abc import Iterator

VARINT = 0
FIXED64 = 1
LEN = 2
FIXED32 = 5


def varint(n: int) -> bytes:
    """Unsigned LEB128; negative int64 values are encoded as their 64-bit two's complement."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def field_varint(number: int, value: int) -> bytes:
    """A varint field; proto3 leaves out zero (default) values."""
    if not value:
        return b""
    return varint(number << 3 | VARINT) + varint(int(value))


def field_bytes(number: int, value: bytes) -> bytes:
    """A length-delimited field (bytes, string or nested message); empty values are left out."""
    if not value:
        return b""
    return varint(number << 3 | LEN) + varint(len(value)) + value


def field_message(number: int, encoded: bytes) -> bytes:
    """A nested message that must be present even when empty (e.g. a oneof member)."""
    return varint(number << 3 | LEN) + varint(len(encoded)) + encoded


def iter_fields(buf: bytes | memoryview) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value): ints for varints, bytes for length-delimited fields."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = read_varint(buf, pos)
        number, wtype = key >> 3, key & 7
        if wtype == VARINT:
            v, pos = read_varint(buf, pos)
            yield number, wtype, v
        elif wtype == LEN:
            n, pos = read_varint(buf, pos)
            yield number, wtype, bytes(buf[pos : pos + n])
            pos += n
        elif wtype == FIXED64:
            yield number, wtype, int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wtype == FIXED32:
            yield number, wtype, int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wtype} for field {number}")


def decode(buf: bytes | memoryview) -> dict[int, list[int | bytes]]:
    """All fields of a message by number (repeated fields keep their order)."""
    out: dict[int, list[int | bytes]] = {}
    for number, _, value in iter_fields(buf):
        out.setdefault(number, []).append(value)
    return out


def count_field(buf: bytes | memoryview, wanted: int) -> tuple[int, bytes]:
    """How many times length-delimited field `wanted` occurs, and its last value.

    Used to count watch events without decoding each of them (the watch benchmark must
    measure the server, not a slow Python decoder).
    """
    pos, end = 0, len(buf)
    count = 0
    last_start = last_end = 0
    while pos < end:
        key, pos = read_varint(buf, pos)
        wtype = key & 7
        if wtype == LEN:
            n, pos = read_varint(buf, pos)
            if key >> 3 == wanted:
                count += 1
                last_start, last_end = pos, pos + n
            pos += n
        elif wtype == VARINT:
            _, pos = read_varint(buf, pos)
        elif wtype == FIXED64:
            pos += 8
        elif wtype == FIXED32:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wtype}")
    return count, bytes(buf[last_start:last_end])


def first_int(fields: dict[int, list[int | bytes]], number: int, default: int = 0) -> int:
    values = fields.get(number)
    if not values:
        return default
    v = values[0]
    return v if isinstance(v, int) else default


def first_bytes(fields: dict[int, list[int | bytes]], number: int) -> bytes:
    values = fields.get(number)
    if not values:
        return b""
    v = values[0]
    return v if isinstance(v, bytes) else b""
