"""HPACK (machinery/hpack.py): RFC 7541's own examples, round trips, and a decoder that fails only
with HpackError, within its memory bounds, whatever it is sent."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from machinery.hpack import (
    _CACHE_ENTRIES,
    _HUFFMAN_CODES,
    _STATIC_TABLE,
    Decoder,
    Encoder,
    HpackError,
    _encode_int,
    _huffman_decode,
    _read_int,
)

Fields = list[tuple[bytes, bytes]]


def _hex(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


def _table(d: Decoder) -> Fields:
    """The dynamic table newest first, as RFC 7541 Appendix C lists it."""
    return list(reversed(d._dynamic))


def _check_table(d: Decoder) -> None:
    """The dynamic table's bookkeeping is exact and within every bound."""
    assert d._size == sum(len(n) + len(v) + 32 for n, v in d._dynamic)
    assert d._size <= d._capacity <= d._max_table_size


def _huffman_encode(data: bytes) -> bytes:
    """Test-only Huffman encoder (RFC 7541 5.2), from the same Appendix B table: codes concatenated,
    then padded to a byte with the EOS code's leading one bits."""
    acc = bits = 0
    for byte in data:
        code, length = _HUFFMAN_CODES[byte]
        acc = (acc << length) | code
        bits += length
    pad = -bits % 8
    acc = (acc << pad) | ((1 << pad) - 1)
    return acc.to_bytes((bits + pad) // 8, "big")


def _string(data: bytes, huffman: bool = False) -> bytes:
    """A string literal, raw or Huffman-coded."""
    if huffman:
        data = _huffman_encode(data)
        return _encode_int(len(data), 7, 0x80) + data
    return _encode_int(len(data), 7, 0x00) + data


# --- RFC 7541 C.1: integers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "prefix", "encoded"),
    [(10, 5, "0a"), (1337, 5, "1f9a0a"), (42, 8, "2a")],
    ids=["C.1.1", "C.1.2", "C.1.3"],
)
def test_integer_examples(value: int, prefix: int, encoded: str) -> None:
    """C.1: 10 and 1337 with a 5-bit prefix, 42 starting at an octet boundary."""
    data = bytes.fromhex(encoded)
    assert _encode_int(value, prefix, 0) == data
    limit = (1 << prefix) - 1
    if data[0] == limit:
        assert _read_int(data, 1, len(data), limit) == (value, len(data))


# --- RFC 7541 C.2: one field of each kind, each on a fresh decoder ---------------------------------


@pytest.mark.parametrize(
    ("block", "field", "table"),
    [
        (
            "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
            (b"custom-key", b"custom-header"),
            [(b"custom-key", b"custom-header")],
        ),
        ("040c 2f73 616d 706c 652f 7061 7468", (b":path", b"/sample/path"), []),
        ("1008 7061 7373 776f 7264 0673 6563 7265 74", (b"password", b"secret"), []),
        ("82", (b":method", b"GET"), []),
    ],
    ids=["C.2.1-with-indexing", "C.2.2-without-indexing", "C.2.3-never-indexed", "C.2.4-indexed"],
)
def test_field_representation_examples(block: str, field: tuple[bytes, bytes], table: Fields) -> None:
    d = Decoder()
    assert d.decode(_hex(block)) == [field]
    assert _table(d) == table
    assert d._size == (55 if table else 0)


# --- RFC 7541 C.3 - C.6: request and response sequences on one connection --------------------------

_REQUEST_1 = [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b":authority", b"www.example.com")]
_REQUEST_2 = [*_REQUEST_1, (b"cache-control", b"no-cache")]
_REQUEST_3 = [
    (b":method", b"GET"),
    (b":scheme", b"https"),
    (b":path", b"/index.html"),
    (b":authority", b"www.example.com"),
    (b"custom-key", b"custom-value"),
]
_REQUEST_TABLES = [
    ([(b":authority", b"www.example.com")], 57),
    ([(b"cache-control", b"no-cache"), (b":authority", b"www.example.com")], 110),
    ([(b"custom-key", b"custom-value"), (b"cache-control", b"no-cache"), (b":authority", b"www.example.com")], 164),
]
_REQUESTS_PLAIN = [  # C.3
    "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
    "8286 84be 5808 6e6f 2d63 6163 6865",
    "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
]
_REQUESTS_HUFFMAN = [  # C.4
    "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
    "8286 84be 5886 a8eb 1064 9cbf",
    "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
]

_DATE_1 = b"Mon, 21 Oct 2013 20:13:21 GMT"
_DATE_2 = b"Mon, 21 Oct 2013 20:13:22 GMT"
_LOCATION = b"https://www.example.com"
_COOKIE = b"foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"
_RESPONSE_1 = [(b":status", b"302"), (b"cache-control", b"private"), (b"date", _DATE_1), (b"location", _LOCATION)]
_RESPONSE_2 = [(b":status", b"307"), *_RESPONSE_1[1:]]
_RESPONSE_3 = [
    (b":status", b"200"),
    (b"cache-control", b"private"),
    (b"date", _DATE_2),
    (b"location", _LOCATION),
    (b"content-encoding", b"gzip"),
    (b"set-cookie", _COOKIE),
]
_RESPONSE_TABLES = [
    ([(b"location", _LOCATION), (b"date", _DATE_1), (b"cache-control", b"private"), (b":status", b"302")], 222),
    ([(b":status", b"307"), (b"location", _LOCATION), (b"date", _DATE_1), (b"cache-control", b"private")], 222),
    ([(b"set-cookie", _COOKIE), (b"content-encoding", b"gzip"), (b"date", _DATE_2)], 215),
]
_RESPONSES_PLAIN = [  # C.5
    """4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
       2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
       6c65 2e63 6f6d""",
    "4803 3330 37c1 c0bf",
    """88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
       54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
       5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
       3d31""",
]
_RESPONSES_HUFFMAN = [  # C.6
    """4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
       2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3""",
    "4883 640e ffc1 c0bf",
    """88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
       77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
       9587 3160 65c0 03ed 4ee5 b106 3d50 07""",
]


@pytest.mark.parametrize(
    ("table_size", "blocks", "lists", "tables"),
    [
        (4096, _REQUESTS_PLAIN, [_REQUEST_1, _REQUEST_2, _REQUEST_3], _REQUEST_TABLES),
        (4096, _REQUESTS_HUFFMAN, [_REQUEST_1, _REQUEST_2, _REQUEST_3], _REQUEST_TABLES),
        (256, _RESPONSES_PLAIN, [_RESPONSE_1, _RESPONSE_2, _RESPONSE_3], _RESPONSE_TABLES),
        (256, _RESPONSES_HUFFMAN, [_RESPONSE_1, _RESPONSE_2, _RESPONSE_3], _RESPONSE_TABLES),
    ],
    ids=["C.3-requests", "C.4-requests-huffman", "C.5-responses-evicting", "C.6-responses-huffman-evicting"],
)
def test_sequence_examples(
    table_size: int, blocks: list[str], lists: list[Fields], tables: list[tuple[Fields, int]]
) -> None:
    """Three blocks on one decoder: each decodes to the RFC's list and leaves the RFC's table."""
    d = Decoder(max_table_size=table_size)
    for block, fields, (table, size) in zip(blocks, lists, tables, strict=True):
        assert d.decode(_hex(block)) == fields
        assert _table(d) == table
        assert d._size == size
        _check_table(d)


@pytest.mark.parametrize(
    ("text", "coded"),
    [
        (b"www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
        (b"no-cache", "a8eb 1064 9cbf"),
        (b"custom-key", "25a8 49e9 5ba9 7d7f"),
        (b"custom-value", "25a8 49e9 5bb8 e8b4 bf"),
        (b"302", "6402"),
        (b"307", "640e ff"),
        (b"private", "aec3 771a 4b"),
        (_DATE_1, "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff"),
        (_DATE_2, "d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff"),
        (_LOCATION, "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"),
        (b"gzip", "9bd9 ab"),
        (
            _COOKIE,
            """94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587
               3160 65c0 03ed 4ee5 b106 3d50 07""",
        ),
    ],
)
def test_huffman_strings_of_the_examples(text: bytes, coded: str) -> None:
    """The strings of C.4 and C.6 both ways: checks the test encoder (and so the table) against the RFC."""
    assert _huffman_encode(text) == _hex(coded)
    assert _huffman_decode(_hex(coded)) == text


# --- Huffman --------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_huffman_round_trip(data: bytes) -> None:
    assert _huffman_decode(_huffman_encode(data)) == data


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_huffman_decoding_arbitrary_bytes(data: bytes) -> None:
    """Arbitrary bytes either fail with HpackError or are the one valid coding of what they decode to
    (the padding rules leave each string a single coding)."""
    try:
        text = _huffman_decode(data)
    except HpackError:
        return
    assert _huffman_encode(text) == data


def test_every_symbol_at_every_bit_offset() -> None:
    """Each of the 256 symbols starting at each of the 8 bit offsets in a byte ('0' is 5 bits long)."""
    data = bytes(range(256))
    for k in range(8):
        prefix = b"0" * k
        assert _huffman_decode(_huffman_encode(prefix + data + prefix)) == prefix + data + prefix


@pytest.mark.parametrize(
    ("coded", "why"),
    [
        (b"\xff", "8 bits of padding"),
        (b"\x1f\xff", "'a' then 8 bits of padding"),
        (b"\x00", "'0' (00000) then padding 000, not ones"),
        (b"\x1e", "'a' (00011) then padding 110"),
        (b"\xff\xff\xff\xff", "the EOS code (30 ones) then 2 ones"),
        (b"\xff\xff\xff\xfc", "EOS in the string then padding with a zero"),
        (b"\xfe", "a code cut short: 7 ones then a zero is no complete code"),
    ],
)
def test_bad_huffman(coded: bytes, why: str) -> None:
    with pytest.raises(HpackError):
        _huffman_decode(coded)
    with pytest.raises(HpackError):  # and inside a header block, as a literal value
        Decoder().decode(b"\x04" + _encode_int(len(coded), 7, 0x80) + coded)


def test_good_huffman_padding() -> None:
    """No padding, and padding of 1 to 7 one bits, are all fine."""
    assert _huffman_decode(b"") == b""
    assert _huffman_decode(b"\x1f") == b"a"  # 00011 + 111
    assert _huffman_decode(b"\x07") == b"0"  # 00000 + 111
    assert _huffman_decode(b"\xfe\x3f") == b"!"  # 11111110 00 + 111111
    assert _huffman_decode(b"\x00\x00\x00\x7f") == b"00000"  # 25 zero bits + 7 ones
    assert _huffman_decode(b"\xf8") == b"&"  # 11111000, no padding
    assert _huffman_decode(_hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff")) == b"www.example.com"


# --- malformed blocks -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "block",
    [
        "80",  # indexed field with index 0
        "be",  # index 62 with an empty dynamic table
        "ff",  # truncated integer
        "ff 80",  # truncated integer after a continuation byte
        "ff 80 80 80 80 80 01",  # six continuation bytes
        "ff ff ff ff ff 0f",  # 2**32 + 127 + ...: above the cap
        "7f",  # literal with indexing, name index truncated
        "40",  # literal with a new name, no name
        "40 05 61 62",  # name longer than the block
        "40 01 61",  # no value
        "40 01 61 05 61",  # value longer than the block
        "40 01 61 7f",  # value length truncated
        "40 01 61 7f ff ff ff ff 0f",  # value length too large
        "0f 2f 00",  # literal without indexing, name index 62 past the empty dynamic table
        "1f 2f 00",  # never indexed, same
        "82 20",  # table size update after a field
        "82 3f e1 1f",  # same, a big one
        "3f e2 1f",  # size update to 4097 > 4096
        "3f ff ff ff ff 0f",  # size update beyond the integer cap
    ],
)
def test_malformed_blocks(block: str) -> None:
    with pytest.raises(HpackError):
        Decoder().decode(_hex(block))


def test_integer_at_the_cap() -> None:
    """2**32 itself is allowed (as an index it is then simply past the table); 2**32 + 1 is not."""
    data = _encode_int(1 << 32, 7, 0x80)
    assert _read_int(data, 1, len(data), 0x7F) == (1 << 32, len(data))
    data = _encode_int((1 << 32) + 1, 7, 0x80)
    with pytest.raises(HpackError):
        _read_int(data, 1, len(data), 0x7F)
    with pytest.raises(HpackError):
        Decoder().decode(_encode_int(1 << 32, 7, 0x80))


# --- the dynamic table ----------------------------------------------------------------------------


def test_table_size_updates() -> None:
    d = Decoder(max_table_size=4096)
    d.decode(_hex(_REQUESTS_PLAIN[0]) + _hex(_REQUESTS_PLAIN[1])[3:])  # two entries, 110 bytes
    assert d._size == 110
    assert d.decode(_hex("3f 32")) == []  # 31 + 50 = 81: keeps only the newest entry (53 bytes)
    assert _table(d) == [(b"cache-control", b"no-cache")]
    assert d.decode(b"\x20\x3f\xe1\x1f\x82") == [(b":method", b"GET")]  # 0, then 4096, at the start
    assert d._dynamic == [] and d._capacity == 4096
    _check_table(d)
    with pytest.raises(HpackError):  # no more than the setting we advertise
        Decoder(max_table_size=100).decode(_encode_int(101, 5, 0x20))
    assert Decoder(max_table_size=100).decode(_encode_int(100, 5, 0x20)) == []


def test_an_entry_larger_than_the_table_empties_it() -> None:
    """RFC 7541 4.4: adding an entry larger than the table's maximum size empties the table."""
    d = Decoder(max_table_size=100)
    d.decode(b"\x40" + _string(b"a") + _string(b"b"))
    assert d._size == 34
    assert d.decode(b"\x40" + _string(b"big") + _string(b"x" * 70)) == [(b"big", b"x" * 70)]
    assert d._dynamic == [] and d._size == 0


def test_a_new_entry_may_name_the_entry_it_evicts() -> None:
    """RFC 7541 4.4: the name is taken before the old entry is evicted."""
    d = Decoder(max_table_size=60)
    d.decode(b"\x40" + _string(b"name") + _string(b"v1"))  # 38 bytes
    assert d.decode(b"\x7e" + _string(b"v2")) == [(b"name", b"v2")]  # name index 62
    assert _table(d) == [(b"name", b"v2")]


def test_header_list_size_bounds_amplification() -> None:
    """One-byte references to a big entry cannot decode into more than max_header_list_size."""
    d = Decoder(max_header_list_size=64 << 10)
    d.decode(b"\x40" + _string(b"x") + _string(b"y" * 4000))
    entry = 1 + 4000 + 32
    fits = (64 << 10) // entry
    assert len(d.decode(b"\xbe" * fits)) == fits
    with pytest.raises(HpackError):
        d.decode(b"\xbe" * (fits + 1))
    with pytest.raises(HpackError):
        d.decode(b"\xbe" * 100_000)


def test_header_list_size_is_exact_for_long_huffman_codes() -> None:
    """The early refusal of long strings never refuses a list that fits: newlines take 30 bits each."""
    block = b"\x00" + _string(b"n") + _string(b"\n" * 100, huffman=True)
    assert Decoder(max_header_list_size=1 + 100 + 32).decode(block) == [(b"n", b"\n" * 100)]
    with pytest.raises(HpackError):
        Decoder(max_header_list_size=1 + 100 + 31).decode(block)


def test_a_bytearray_block_decodes_to_bytes() -> None:
    """Fields are bytes (hashable, immutable) even from a block an untyped caller passed as a bytearray."""
    fields = Decoder().decode(bytearray(_hex(_RESPONSES_PLAIN[0])))  # type: ignore[arg-type]
    assert fields == _RESPONSE_1
    assert all(type(n) is bytes and type(v) is bytes for n, v in fields)


# --- the encoder ----------------------------------------------------------------------------------

_NAMES = st.one_of(
    st.sampled_from(sorted({n for n, _ in _STATIC_TABLE})),
    st.text("abcdefghijklmnopqrstuvwxyz0123456789-_:", min_size=1, max_size=20).map(str.encode),
)
_VALUES = st.one_of(st.sampled_from(sorted({v for _, v in _STATIC_TABLE})), st.binary(max_size=300))
_FIELDS = st.lists(st.one_of(st.sampled_from(_STATIC_TABLE), st.tuples(_NAMES, _VALUES)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(_FIELDS)
def test_encoder_round_trip(headers: Fields) -> None:
    """What the encoder writes decodes back, twice over (the cache is on the second pass), and
    leaves the peer's dynamic table alone."""
    enc, dec = Encoder(), Decoder()
    for _ in range(2):
        block = enc.encode(headers)
        assert dec.decode(block) == headers
        assert dec._dynamic == []


@settings(max_examples=150, deadline=None)
@given(_FIELDS)
def test_header_list_size_is_counted_as_rfc_7540_says(headers: Fields) -> None:
    block = Encoder().encode(headers)
    total = sum(len(n) + len(v) + 32 for n, v in headers)
    assert Decoder(max_header_list_size=total).decode(block) == headers
    if headers:
        with pytest.raises(HpackError):
            Decoder(max_header_list_size=total - 1).decode(block)


def test_encoder_representations() -> None:
    enc = Encoder()
    assert enc.encode([(b":status", b"200")]) == b"\x88"  # full static match: indexed
    assert enc.encode([(b":authority", b"")]) == b"\x81"
    assert enc.encode([(b"content-type", b"application/grpc")]) == b"\x0f\x10\x10application/grpc"  # name 31
    assert enc.encode([(b"grpc-status", b"0")]) == b"\x00\x0bgrpc-status\x010"  # new name, no indexing
    long = b"v" * 200
    assert enc.encode([(b"x", long)]) == b"\x00\x01x\x7f\x49" + long  # 200 = 127 + 73


def test_encoder_cache_is_bounded() -> None:
    enc = Encoder()
    headers = [(b"x-n", str(i).encode()) for i in range(3 * _CACHE_ENTRIES)]
    block = enc.encode(headers)
    assert len(enc._cache) <= _CACHE_ENTRIES
    assert Decoder(max_header_list_size=1 << 20).decode(block) == headers
    enc.encode([(b"x-big", b"v" * 5000)])
    assert (b"x-big", b"v" * 5000) not in enc._cache


# --- fuzzing the decoder --------------------------------------------------------------------------


@st.composite
def _blocks(draw: st.DrawFn) -> bytes:
    """Header blocks built of plausible representations with plausible indices (so that the decoder
    gets past the first byte), some of them then cut short or corrupted."""
    parts: list[bytes] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["indexed", "literal", "size"]))
        if kind == "indexed":
            parts.append(_encode_int(draw(st.integers(0, 70)), 7, 0x80))
        elif kind == "size":
            parts.append(_encode_int(draw(st.integers(0, 5000)), 5, 0x20))
        else:
            flags, prefix = draw(st.sampled_from([(0x40, 6), (0x00, 4), (0x10, 4)]))
            index = draw(st.integers(0, 70))
            part = _encode_int(index, prefix, flags)
            if index == 0:
                part += _string(draw(st.binary(max_size=10)), draw(st.booleans()))
            part += _string(draw(st.binary(max_size=300)), draw(st.booleans()))
            parts.append(part)
    block = b"".join(parts)
    mutation = draw(st.sampled_from(["none", "cut", "flip", "append"]))
    if mutation == "cut" and block:
        block = block[: draw(st.integers(0, len(block) - 1))]
    elif mutation == "flip" and block:
        at = draw(st.integers(0, len(block) - 1))
        block = block[:at] + bytes((block[at] ^ draw(st.integers(1, 255)),)) + block[at + 1 :]
    elif mutation == "append":
        block += draw(st.binary(min_size=1, max_size=8))
    return block


def _decode_or_hpack_error(d: Decoder, block: bytes) -> None:
    try:
        fields = d.decode(block)
    except HpackError:
        pass
    else:
        assert sum(len(n) + len(v) + 32 for n, v in fields) <= d._max_header_list_size
    _check_table(d)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_to_a_fresh_decoder(block: bytes) -> None:
    _decode_or_hpack_error(Decoder(), block)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=100), _blocks()), min_size=1, max_size=4), st.integers(0, 600))
def test_arbitrary_blocks_to_a_decoder_with_state(blocks: list[bytes], table_size: int) -> None:
    """Blocks in a row on one decoder (small tables, so entries are evicted) after the RFC's requests
    filled its table: nothing but HpackError, and the table and the decoded lists stay in bounds."""
    d = Decoder(max_table_size=table_size, max_header_list_size=2000)
    if table_size >= 164:
        for request in _REQUESTS_HUFFMAN:
            d.decode(_hex(request))
    for block in blocks:
        _decode_or_hpack_error(d, block)
