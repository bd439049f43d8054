"""HPACK (RFC 7541): the header compression of HTTP/2, for the etcd v3 gRPC front.

gRPC rides on HTTP/2, and every HEADERS block on an HTTP/2 connection is HPACK-coded, so the
gRPC server needs both halves:

* `Decoder` reads the request headers the peer sends.  It keeps the connection's dynamic
  table (RFC 7541 2.3.2, 4): a Go gRPC client indexes its headers on the first call and from
  then on sends most of them as one-byte references to that table, with the few literals left
  (`grpc-timeout`, new paths) Huffman-coded (5).  Whatever the peer sends, decoding fails only
  with `HpackError` (the HTTP/2 layer answers it with a COMPRESSION_ERROR, RFC 7540 4.3), and
  memory stays bounded: no block decodes into more than `max_header_list_size`.
* `Encoder` writes the response headers and trailers.  It never inserts into the peer's
  dynamic table and never Huffman-codes, so it keeps no per-connection state and every field
  encodes the same way on every call -- which lets it cache the few (name, value) pairs a gRPC
  server repeats on each call (`:status: 200`, `content-type: application/grpc`,
  `grpc-status: 0`).  The price is a few bytes per response, far below a gRPC message's size.

Huffman decoding runs a byte at a time through a precomputed state machine (the states are the
inner nodes of the code tree; each (state, byte) pair has its next state and the 0-2 symbols it
completes), so the per-bit work is done once, at import, not on every string.
"""

from __future__ import annotations

__all__ = ["Decoder", "Encoder", "HpackError"]


class HpackError(Exception):
    """A header block that cannot be decoded (a COMPRESSION_ERROR for the connection), or one that is too big."""


# RFC 7541 Appendix A: the static table, index 1 to 61.
_STATIC_TABLE: tuple[tuple[bytes, bytes], ...] = (
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
)
_STATIC_LEN = len(_STATIC_TABLE)  # 61: dynamic-table indices start right after it (RFC 7541 2.3.3)

# RFC 7541 Appendix B: the Huffman code of each symbol (0-255 and EOS, 256) as (code, bit length),
# the code right-aligned as in the RFC's "code as hex" column.
_HUFFMAN_CODES: tuple[tuple[int, int], ...] = (
    (0x1FF8, 13),  # 0
    (0x7FFFD8, 23),  # 1
    (0xFFFFFE2, 28),  # 2
    (0xFFFFFE3, 28),  # 3
    (0xFFFFFE4, 28),  # 4
    (0xFFFFFE5, 28),  # 5
    (0xFFFFFE6, 28),  # 6
    (0xFFFFFE7, 28),  # 7
    (0xFFFFFE8, 28),  # 8
    (0xFFFFEA, 24),  # 9
    (0x3FFFFFFC, 30),  # 10
    (0xFFFFFE9, 28),  # 11
    (0xFFFFFEA, 28),  # 12
    (0x3FFFFFFD, 30),  # 13
    (0xFFFFFEB, 28),  # 14
    (0xFFFFFEC, 28),  # 15
    (0xFFFFFED, 28),  # 16
    (0xFFFFFEE, 28),  # 17
    (0xFFFFFEF, 28),  # 18
    (0xFFFFFF0, 28),  # 19
    (0xFFFFFF1, 28),  # 20
    (0xFFFFFF2, 28),  # 21
    (0x3FFFFFFE, 30),  # 22
    (0xFFFFFF3, 28),  # 23
    (0xFFFFFF4, 28),  # 24
    (0xFFFFFF5, 28),  # 25
    (0xFFFFFF6, 28),  # 26
    (0xFFFFFF7, 28),  # 27
    (0xFFFFFF8, 28),  # 28
    (0xFFFFFF9, 28),  # 29
    (0xFFFFFFA, 28),  # 30
    (0xFFFFFFB, 28),  # 31
    (0x14, 6),  # 32 ' '
    (0x3F8, 10),  # 33 '!'
    (0x3F9, 10),  # 34 '"'
    (0xFFA, 12),  # 35 '#'
    (0x1FF9, 13),  # 36 '$'
    (0x15, 6),  # 37 '%'
    (0xF8, 8),  # 38 '&'
    (0x7FA, 11),  # 39 "'"
    (0x3FA, 10),  # 40 '('
    (0x3FB, 10),  # 41 ')'
    (0xF9, 8),  # 42 '*'
    (0x7FB, 11),  # 43 '+'
    (0xFA, 8),  # 44 ','
    (0x16, 6),  # 45 '-'
    (0x17, 6),  # 46 '.'
    (0x18, 6),  # 47 '/'
    (0x0, 5),  # 48 '0'
    (0x1, 5),  # 49 '1'
    (0x2, 5),  # 50 '2'
    (0x19, 6),  # 51 '3'
    (0x1A, 6),  # 52 '4'
    (0x1B, 6),  # 53 '5'
    (0x1C, 6),  # 54 '6'
    (0x1D, 6),  # 55 '7'
    (0x1E, 6),  # 56 '8'
    (0x1F, 6),  # 57 '9'
    (0x5C, 7),  # 58 ':'
    (0xFB, 8),  # 59 ';'
    (0x7FFC, 15),  # 60 '<'
    (0x20, 6),  # 61 '='
    (0xFFB, 12),  # 62 '>'
    (0x3FC, 10),  # 63 '?'
    (0x1FFA, 13),  # 64 '@'
    (0x21, 6),  # 65 'A'
    (0x5D, 7),  # 66 'B'
    (0x5E, 7),  # 67 'C'
    (0x5F, 7),  # 68 'D'
    (0x60, 7),  # 69 'E'
    (0x61, 7),  # 70 'F'
    (0x62, 7),  # 71 'G'
    (0x63, 7),  # 72 'H'
    (0x64, 7),  # 73 'I'
    (0x65, 7),  # 74 'J'
    (0x66, 7),  # 75 'K'
    (0x67, 7),  # 76 'L'
    (0x68, 7),  # 77 'M'
    (0x69, 7),  # 78 'N'
    (0x6A, 7),  # 79 'O'
    (0x6B, 7),  # 80 'P'
    (0x6C, 7),  # 81 'Q'
    (0x6D, 7),  # 82 'R'
    (0x6E, 7),  # 83 'S'
    (0x6F, 7),  # 84 'T'
    (0x70, 7),  # 85 'U'
    (0x71, 7),  # 86 'V'
    (0x72, 7),  # 87 'W'
    (0xFC, 8),  # 88 'X'
    (0x73, 7),  # 89 'Y'
    (0xFD, 8),  # 90 'Z'
    (0x1FFB, 13),  # 91 '['
    (0x7FFF0, 19),  # 92 '\\'
    (0x1FFC, 13),  # 93 ']'
    (0x3FFC, 14),  # 94 '^'
    (0x22, 6),  # 95 '_'
    (0x7FFD, 15),  # 96 '`'
    (0x3, 5),  # 97 'a'
    (0x23, 6),  # 98 'b'
    (0x4, 5),  # 99 'c'
    (0x24, 6),  # 100 'd'
    (0x5, 5),  # 101 'e'
    (0x25, 6),  # 102 'f'
    (0x26, 6),  # 103 'g'
    (0x27, 6),  # 104 'h'
    (0x6, 5),  # 105 'i'
    (0x74, 7),  # 106 'j'
    (0x75, 7),  # 107 'k'
    (0x28, 6),  # 108 'l'
    (0x29, 6),  # 109 'm'
    (0x2A, 6),  # 110 'n'
    (0x7, 5),  # 111 'o'
    (0x2B, 6),  # 112 'p'
    (0x76, 7),  # 113 'q'
    (0x2C, 6),  # 114 'r'
    (0x8, 5),  # 115 's'
    (0x9, 5),  # 116 't'
    (0x2D, 6),  # 117 'u'
    (0x77, 7),  # 118 'v'
    (0x78, 7),  # 119 'w'
    (0x79, 7),  # 120 'x'
    (0x7A, 7),  # 121 'y'
    (0x7B, 7),  # 122 'z'
    (0x7FFE, 15),  # 123 '{'
    (0x7FC, 11),  # 124 '|'
    (0x3FFD, 14),  # 125 '}'
    (0x1FFD, 13),  # 126 '~'
    (0xFFFFFFC, 28),  # 127
    (0xFFFE6, 20),  # 128
    (0x3FFFD2, 22),  # 129
    (0xFFFE7, 20),  # 130
    (0xFFFE8, 20),  # 131
    (0x3FFFD3, 22),  # 132
    (0x3FFFD4, 22),  # 133
    (0x3FFFD5, 22),  # 134
    (0x7FFFD9, 23),  # 135
    (0x3FFFD6, 22),  # 136
    (0x7FFFDA, 23),  # 137
    (0x7FFFDB, 23),  # 138
    (0x7FFFDC, 23),  # 139
    (0x7FFFDD, 23),  # 140
    (0x7FFFDE, 23),  # 141
    (0xFFFFEB, 24),  # 142
    (0x7FFFDF, 23),  # 143
    (0xFFFFEC, 24),  # 144
    (0xFFFFED, 24),  # 145
    (0x3FFFD7, 22),  # 146
    (0x7FFFE0, 23),  # 147
    (0xFFFFEE, 24),  # 148
    (0x7FFFE1, 23),  # 149
    (0x7FFFE2, 23),  # 150
    (0x7FFFE3, 23),  # 151
    (0x7FFFE4, 23),  # 152
    (0x1FFFDC, 21),  # 153
    (0x3FFFD8, 22),  # 154
    (0x7FFFE5, 23),  # 155
    (0x3FFFD9, 22),  # 156
    (0x7FFFE6, 23),  # 157
    (0x7FFFE7, 23),  # 158
    (0xFFFFEF, 24),  # 159
    (0x3FFFDA, 22),  # 160
    (0x1FFFDD, 21),  # 161
    (0xFFFE9, 20),  # 162
    (0x3FFFDB, 22),  # 163
    (0x3FFFDC, 22),  # 164
    (0x7FFFE8, 23),  # 165
    (0x7FFFE9, 23),  # 166
    (0x1FFFDE, 21),  # 167
    (0x7FFFEA, 23),  # 168
    (0x3FFFDD, 22),  # 169
    (0x3FFFDE, 22),  # 170
    (0xFFFFF0, 24),  # 171
    (0x1FFFDF, 21),  # 172
    (0x3FFFDF, 22),  # 173
    (0x7FFFEB, 23),  # 174
    (0x7FFFEC, 23),  # 175
    (0x1FFFE0, 21),  # 176
    (0x1FFFE1, 21),  # 177
    (0x3FFFE0, 22),  # 178
    (0x1FFFE2, 21),  # 179
    (0x7FFFED, 23),  # 180
    (0x3FFFE1, 22),  # 181
    (0x7FFFEE, 23),  # 182
    (0x7FFFEF, 23),  # 183
    (0xFFFEA, 20),  # 184
    (0x3FFFE2, 22),  # 185
    (0x3FFFE3, 22),  # 186
    (0x3FFFE4, 22),  # 187
    (0x7FFFF0, 23),  # 188
    (0x3FFFE5, 22),  # 189
    (0x3FFFE6, 22),  # 190
    (0x7FFFF1, 23),  # 191
    (0x3FFFFE0, 26),  # 192
    (0x3FFFFE1, 26),  # 193
    (0xFFFEB, 20),  # 194
    (0x7FFF1, 19),  # 195
    (0x3FFFE7, 22),  # 196
    (0x7FFFF2, 23),  # 197
    (0x3FFFE8, 22),  # 198
    (0x1FFFFEC, 25),  # 199
    (0x3FFFFE2, 26),  # 200
    (0x3FFFFE3, 26),  # 201
    (0x3FFFFE4, 26),  # 202
    (0x7FFFFDE, 27),  # 203
    (0x7FFFFDF, 27),  # 204
    (0x3FFFFE5, 26),  # 205
    (0xFFFFF1, 24),  # 206
    (0x1FFFFED, 25),  # 207
    (0x7FFF2, 19),  # 208
    (0x1FFFE3, 21),  # 209
    (0x3FFFFE6, 26),  # 210
    (0x7FFFFE0, 27),  # 211
    (0x7FFFFE1, 27),  # 212
    (0x3FFFFE7, 26),  # 213
    (0x7FFFFE2, 27),  # 214
    (0xFFFFF2, 24),  # 215
    (0x1FFFE4, 21),  # 216
    (0x1FFFE5, 21),  # 217
    (0x3FFFFE8, 26),  # 218
    (0x3FFFFE9, 26),  # 219
    (0xFFFFFFD, 28),  # 220
    (0x7FFFFE3, 27),  # 221
    (0x7FFFFE4, 27),  # 222
    (0x7FFFFE5, 27),  # 223
    (0xFFFEC, 20),  # 224
    (0xFFFFF3, 24),  # 225
    (0xFFFED, 20),  # 226
    (0x1FFFE6, 21),  # 227
    (0x3FFFE9, 22),  # 228
    (0x1FFFE7, 21),  # 229
    (0x1FFFE8, 21),  # 230
    (0x7FFFF3, 23),  # 231
    (0x3FFFEA, 22),  # 232
    (0x3FFFEB, 22),  # 233
    (0x1FFFFEE, 25),  # 234
    (0x1FFFFEF, 25),  # 235
    (0xFFFFF4, 24),  # 236
    (0xFFFFF5, 24),  # 237
    (0x3FFFFEA, 26),  # 238
    (0x7FFFF4, 23),  # 239
    (0x3FFFFEB, 26),  # 240
    (0x7FFFFE6, 27),  # 241
    (0x3FFFFEC, 26),  # 242
    (0x3FFFFED, 26),  # 243
    (0x7FFFFE7, 27),  # 244
    (0x7FFFFE8, 27),  # 245
    (0x7FFFFE9, 27),  # 246
    (0x7FFFFEA, 27),  # 247
    (0x7FFFFEB, 27),  # 248
    (0xFFFFFFE, 28),  # 249
    (0x7FFFFEC, 27),  # 250
    (0x7FFFFED, 27),  # 251
    (0x7FFFFEE, 27),  # 252
    (0x7FFFFEF, 27),  # 253
    (0x7FFFFF0, 27),  # 254
    (0x3FFFFEE, 26),  # 255
    (0x3FFFFFFF, 30),  # 256 EOS
)
_EOS = 256

# Integers above this are refused: no length, index or table size a peer may send comes near it,
# and the cap bounds both the work on a run of continuation bytes and the values passed on.
_MAX_INT = 1 << 32


def _build_huffman_machine() -> tuple[list[int], list[bytes], tuple[bool, ...]]:
    """The byte-at-a-time Huffman decoder: (next state, emitted bytes) for each (state, byte), and
    which states a string may end in.

    The states are the 256 inner nodes of the code tree (0 is the root: nothing pending) plus a
    sink (256) that an EOS symbol leads to and no byte leads out of, so the decoding loop needs
    no per-byte check for it.  A string may end only in a state on the all-ones path from the
    root at most 7 bits deep: its pending bits are then padding that is the EOS code's prefix and
    shorter than a byte (RFC 7541 5.2).  Transitions are indexed by state * 256 + byte, and the
    next state is stored premultiplied by 256, so the loop does one addition per byte.
    """
    # The code tree: children[node] = [child for bit 0, child for bit 1]; an inner node is its
    # index (> 0: the root is nobody's child), a leaf is -1 - symbol.
    children: list[list[int]] = [[0, 0]]
    for sym, (code, length) in enumerate(_HUFFMAN_CODES):
        node = 0
        for shift in range(length - 1, 0, -1):
            bit = (code >> shift) & 1
            nxt = children[node][bit]
            if nxt == 0:
                nxt = len(children)
                children.append([0, 0])
                children[node][bit] = nxt
            node = nxt
        children[node][code & 1] = -1 - sym
    sink = len(children)  # 256: the code is complete, so 257 leaves have 256 inner nodes
    accept = [False] * (sink + 1)
    node = 0
    for _ in range(8):  # depths 0..7 of the all-ones path
        accept[node] = True
        node = children[node][1]

    # First the 16 four-bit steps from each state, then each byte as two of them: 16x fewer
    # bit-walks than walking all 256 bytes from every state.
    nibble: list[list[tuple[int, bytes]]] = []
    for state in range(sink):
        row: list[tuple[int, bytes]] = []
        for value in range(16):
            node, out = state, bytearray()
            for shift in (3, 2, 1, 0):
                child = children[node][(value >> shift) & 1]
                if child > 0:
                    node = child
                elif child == -1 - _EOS:
                    node = sink
                    break
                else:
                    out.append(-1 - child)
                    node = 0
            row.append((node, bytes(out)))
        nibble.append(row)

    interned: dict[bytes, bytes] = {}
    next_state: list[int] = []
    emitted: list[bytes] = []
    for state in range(sink):
        row = nibble[state]
        for byte in range(256):
            mid, first = row[byte >> 4]
            if mid == sink:
                end, symbols = sink, b""
            else:
                end, second = nibble[mid][byte & 15]
                symbols = first + second if end != sink else b""
            next_state.append(end << 8)
            emitted.append(interned.setdefault(symbols, symbols))
    next_state += [sink << 8] * 256
    emitted += [b""] * 256
    return next_state, emitted, tuple(accept)


_HUFFMAN_NEXT, _HUFFMAN_EMIT, _HUFFMAN_ACCEPT = _build_huffman_machine()


def _huffman_decode(data: bytes) -> bytes:
    """A Huffman-coded string literal (RFC 7541 5.2), or HpackError for an EOS symbol in it or
    padding that is longer than 7 bits or not all ones."""
    nxt = _HUFFMAN_NEXT
    emit = _HUFFMAN_EMIT
    out = bytearray()
    state = 0
    for byte in data:
        i = state + byte
        out += emit[i]
        state = nxt[i]
    if not _HUFFMAN_ACCEPT[state >> 8]:
        raise HpackError("bad Huffman code: EOS, or padding that is not up to 7 one bits")
    return bytes(out)


def _read_int(block: bytes, pos: int, end: int, value: int) -> tuple[int, int]:
    """The rest of an integer (RFC 7541 5.1) whose prefix was all ones (`value`, the prefix's
    maximum): its continuation bytes from `pos`, and the position after them.

    Capped at `_MAX_INT` and at five continuation bytes, so a run of 0x80 bytes is refused
    rather than read on."""
    shift = 0
    while True:
        if pos >= end:
            raise HpackError("truncated integer")
        b = block[pos]
        pos += 1
        value += (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 28:
            raise HpackError("integer with too many continuation bytes")
    if value > _MAX_INT:
        raise HpackError(f"integer {value} too large")
    return value, pos


def _read_string(block: bytes, pos: int, end: int, budget: int) -> tuple[bytes, int]:
    """A string literal (RFC 7541 5.2) at `pos`, and the position after it.

    A string that alone must decode to more than `budget` (what is left of the header list's
    bound) is refused before it is decoded, so a big block is not Huffman-decoded just to be
    thrown away.  Only certain failures are refused early: a Huffman string of n bytes decodes to
    at least (8n - 7) / 30 symbols (no code is longer than 30 bits, and at most 7 bits are
    padding)."""
    if pos >= end:
        raise HpackError("truncated string")
    b = block[pos]
    pos += 1
    length = b & 0x7F
    if length == 0x7F:
        length, pos = _read_int(block, pos, end, 0x7F)
    stop = pos + length
    if stop > end:
        raise HpackError("string longer than the rest of the header block")
    if (length if not b & 0x80 else (8 * length - 7) // 30) > budget:
        raise HpackError("header list too large")
    if b & 0x80:
        return _huffman_decode(block[pos:stop]), stop
    return block[pos:stop], stop


class Decoder:
    """Decodes the header blocks of one HTTP/2 connection, in the order they arrive.

    One per connection and direction: the dynamic table it keeps is the peer encoder's, mirrored
    (RFC 7541 2.2), so every block of the connection must pass through it in order, including
    blocks of streams that are then refused.  After an HpackError the table is undefined and the
    connection must end (RFC 7540 4.3), which is why decoding does not roll back a half-applied
    block.
    """

    def __init__(self, max_table_size: int = 4096, max_header_list_size: int = 64 << 10) -> None:
        """`max_table_size` is the SETTINGS_HEADER_TABLE_SIZE we advertise: the table starts that
        big and the peer may resize it up to that, no further.  `max_header_list_size` bounds each
        decoded block as RFC 7540 6.5.2 counts it (name + value + 32 per field)."""
        if max_table_size < 0 or max_header_list_size < 0:
            raise ValueError("sizes must not be negative")
        self._max_table_size = max_table_size
        self._max_header_list_size = max_header_list_size
        self._capacity = max_table_size  # the table's current maximum size (RFC 7541 4.2)
        self._size = 0  # the sum of its entries' sizes (4.1)
        self._dynamic: list[tuple[bytes, bytes]] = []  # oldest first: index 62 is the last entry

    def decode(self, block: bytes) -> list[tuple[bytes, bytes]]:
        """The (name, value) fields of one complete header block (HEADERS plus its
        CONTINUATIONs), updating the dynamic table as the block says."""
        block = bytes(block)  # no copy for bytes; a bytearray would otherwise leak into the fields
        headers: list[tuple[bytes, bytes]] = []
        budget = self._max_header_list_size
        dynamic = self._dynamic
        end = len(block)
        pos = 0
        while pos < end:
            b = block[pos]
            pos += 1
            if b & 0x80:  # 6.1 indexed header field
                index = b & 0x7F
                if index == 0x7F:
                    index, pos = _read_int(block, pos, end, 0x7F)
                if index <= _STATIC_LEN:
                    if index == 0:
                        raise HpackError("index 0")
                    field = _STATIC_TABLE[index - 1]
                else:
                    index -= _STATIC_LEN
                    if index > len(dynamic):
                        raise HpackError("index past the dynamic table")
                    field = dynamic[-index]
            elif b & 0xE0 == 0x20:  # 6.3 dynamic table size update
                if headers:
                    raise HpackError("dynamic table size update after a header field")
                size = b & 0x1F
                if size == 0x1F:
                    size, pos = _read_int(block, pos, end, 0x1F)
                if size > self._max_table_size:
                    raise HpackError(f"dynamic table size {size} above the {self._max_table_size} we allow")
                self._capacity = size
                self._evict()
                continue
            else:  # 6.2 literal header field, with (01), without (0000) or never (0001) indexing
                if b & 0x40:
                    index = b & 0x3F
                    if index == 0x3F:
                        index, pos = _read_int(block, pos, end, 0x3F)
                else:
                    index = b & 0x0F
                    if index == 0x0F:
                        index, pos = _read_int(block, pos, end, 0x0F)
                if index:
                    name = self._name(index)
                else:
                    name, pos = _read_string(block, pos, end, budget)
                value, pos = _read_string(block, pos, end, budget - len(name))
                field = (name, value)
                if b & 0x40:
                    dynamic.append(field)
                    self._size += len(name) + len(value) + 32
                    if self._size > self._capacity:
                        self._evict()
            budget -= len(field[0]) + len(field[1]) + 32
            if budget < 0:
                raise HpackError(f"header list larger than {self._max_header_list_size} bytes")
            headers.append(field)
        return headers

    def _name(self, index: int) -> bytes:
        """The name at a table index (RFC 7541 2.3.3), for a literal field with an indexed name."""
        if index <= _STATIC_LEN:
            return _STATIC_TABLE[index - 1][0]
        index -= _STATIC_LEN
        if index > len(self._dynamic):
            raise HpackError("name index past the dynamic table")
        return self._dynamic[-index][0]

    def _evict(self) -> None:
        """Drops the oldest entries until the table fits its maximum size (RFC 7541 4.3, 4.4).

        An entry is appended before this runs, so one larger than the whole table evicts
        everything, itself included, as 4.4 says adding it must."""
        dynamic = self._dynamic
        size = self._size
        drop = 0
        while size > self._capacity:
            name, value = dynamic[drop]
            size -= len(name) + len(value) + 32
            drop += 1
        del dynamic[:drop]
        self._size = size


def _encode_int(value: int, prefix_bits: int, flags: int) -> bytes:
    """`value` as an HPACK integer with an N-bit prefix (RFC 7541 5.1), `flags` in the first
    byte's high bits."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((flags | value,))
    out = bytearray((flags | limit,))
    value -= limit
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _encode_string(data: bytes) -> bytes:
    """A raw (not Huffman-coded) string literal (RFC 7541 5.2)."""
    return _encode_int(len(data), 7, 0x00) + data


_STATIC_FIELD_INDEX: dict[tuple[bytes, bytes], int] = {}
_STATIC_NAME_INDEX: dict[bytes, int] = {}
for _i, _field in enumerate(_STATIC_TABLE, 1):
    _STATIC_FIELD_INDEX.setdefault(_field, _i)
    _STATIC_NAME_INDEX.setdefault(_field[0], _i)
del _i, _field

# The encoder's cache: enough for every header a gRPC server repeats; a field bigger than
# _CACHE_FIELD_MAX (a long grpc-message, say) is encoded afresh each time rather than kept.
_CACHE_ENTRIES = 1024
_CACHE_FIELD_MAX = 1024


def _encode_field(name: bytes, value: bytes) -> bytes:
    """One field: an indexed field on a full static-table match (RFC 7541 6.1), else a literal
    without indexing (6.2.2) naming the static entry when its name is there, else with a literal
    name."""
    index = _STATIC_FIELD_INDEX.get((name, value))
    if index is not None:
        return bytes((0x80 | index,))
    index = _STATIC_NAME_INDEX.get(name)
    head = _encode_int(index, 4, 0x00) if index is not None else b"\x00" + _encode_string(name)
    return head + _encode_string(value)


class Encoder:
    """Encodes header lists for the peer, without touching its dynamic table.

    Stateless on the wire (no field is ever indexed into the peer's table, so no size update is
    ever owed either), which makes each field's encoding a pure function of the field and lets
    one cache of encoded fields serve every call.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[bytes, bytes], bytes] = {}

    def encode(self, headers: list[tuple[bytes, bytes]]) -> bytes:
        """One header block for `headers`, in order."""
        cache = self._cache
        parts: list[bytes] = []
        for field in headers:
            encoded = cache.get(field)
            if encoded is None:
                name, value = field
                encoded = _encode_field(name, value)
                if len(name) + len(value) <= _CACHE_FIELD_MAX:
                    if len(cache) >= _CACHE_ENTRIES:
                        # Emptied rather than trimmed: the fields in use come back on the next call.
                        cache.clear()
                    cache[field] = encoded
            parts.append(encoded)
        return b"".join(parts)
