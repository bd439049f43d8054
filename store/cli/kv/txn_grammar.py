"""etcdctl's txn text, parsed into a TxnRequest before anything is sent: compares, a blank
line, success ops, a blank line, failure ops.  Compares: `mod("k") > "5"`, `value("k") = "v"`,
`version("k") != "0"`, `create("k") < "3"`, `lease("k") = "694d77aa9e38260f"` (hex).  Ops:
`put k v`, `get k [end] [--prefix|--from-key] [--limit N] [--rev N] [--keys-only]
[--count-only]`, `del k [end] [--prefix|--from-key] [--prev-kv]`.  Keys and values may be
"Go-quoted" (Go's escapes) or `raw`.  A `TxnSyntaxError` names the line at fault."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

from machinery.process.command import UsageError
from store.api.kv import (
    Compare,
    CompareResult,
    CompareTarget,
    DeleteRangeRequest,
    PutRequest,
    RangeRequest,
    RequestOp,
    TxnRequest,
)
from store.cli.kv.arguments import key_range, non_negative


def _txn_bytes(text: str) -> bytes:
    """Txn text is decoded as UTF-8 with surrogateescape (see commands.cmd_txn): this undoes it exactly."""
    return text.encode("utf-8", "surrogateescape")


class TxnSyntaxError(ValueError):
    """A txn text that cannot be parsed; the message names the line."""


_QUOTED = r'"(?:[^"\\]|\\.)*"|`[^`]*`'
_COMPARE_RE = re.compile(
    rf"^(?P<target>[A-Za-z]+)\s*\(\s*(?P<key>{_QUOTED}|[^()\s]+)\s*\)\s*"
    rf"(?P<op>!=|==|=|<|>)\s*(?P<value>{_QUOTED}|\S+)$"
)
_TOKEN_RE = re.compile(rf"\s*(?:(?P<q>{_QUOTED})|(?P<w>\S+))")
_TARGETS = {
    "ver": CompareTarget.VERSION,
    "version": CompareTarget.VERSION,
    "c": CompareTarget.CREATE,
    "create": CompareTarget.CREATE,
    "m": CompareTarget.MOD,
    "mod": CompareTarget.MOD,
    "val": CompareTarget.VALUE,
    "value": CompareTarget.VALUE,
    "lease": CompareTarget.LEASE,
}
_RESULTS = {
    "=": CompareResult.EQUAL,
    "==": CompareResult.EQUAL,
    "!=": CompareResult.NOT_EQUAL,
    "<": CompareResult.LESS,
    ">": CompareResult.GREATER,
}
_SIMPLE_ESCAPES = {
    "a": b"\a",
    "b": b"\b",
    "f": b"\f",
    "n": b"\n",
    "r": b"\r",
    "t": b"\t",
    "v": b"\v",
    "\\": b"\\",
    '"': b'"',
    "'": b"'",
}


def unquote(token: str) -> bytes:
    """A key or value as written: "Go-quoted", `raw`, or bare."""
    if token.startswith("`"):
        return _txn_bytes(token[1:-1])
    if not token.startswith('"'):
        return _txn_bytes(token)
    body = token[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += _txn_bytes(ch)
            i += 1
            continue
        esc = body[i + 1]  # the pattern only matches a backslash followed by a character
        if esc in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[esc]
            i += 2
        elif esc == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", body[i + 2 : i + 4]):
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        elif esc in "uU":
            n = 4 if esc == "u" else 8
            digits = body[i + 2 : i + 2 + n]
            try:
                if not re.fullmatch(rf"[0-9a-fA-F]{{{n}}}", digits):
                    raise ValueError(digits)
                out += chr(int(digits, 16)).encode("utf-8")
            except (ValueError, UnicodeEncodeError):
                raise TxnSyntaxError(f"bad escape \\{esc}{digits} in {token}") from None
            i += 2 + n
        elif re.fullmatch(r"[0-7]{3}", body[i + 1 : i + 4]) and int(body[i + 1 : i + 4], 8) < 256:
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            raise TxnSyntaxError(f"bad escape \\{esc} in {token}")
    return bytes(out)


def _tokens(line: str) -> list[tuple[str, bool]]:
    """Shell-like words of an op line: (text, quoted)."""
    out: list[tuple[str, bool]] = []
    for m in _TOKEN_RE.finditer(line):
        if m.group("q") is not None:
            out.append((m.group("q"), True))
        else:
            w = m.group("w")
            if w[0] in '"`':
                raise TxnSyntaxError(f"unterminated quote in {w}")
            out.append((w, False))
    return out


def parse_compare(line: str) -> Compare:
    m = _COMPARE_RE.match(line)
    if m is None:
        hint = ""
        if line.split(maxsplit=1)[0] in ("put", "get", "del", "delete"):
            hint = " (compares come first: an op list starts after a blank line)"
        raise TxnSyntaxError(f'malformed comparison {line!r}; expected like mod("key") > "5"{hint}')
    target = _TARGETS.get(m.group("target").lower())
    if target is None:
        raise TxnSyntaxError(f"unknown compare target {m.group('target')!r} (version, create, mod, value, lease)")
    key = unquote(m.group("key"))
    raw = unquote(m.group("value"))
    value: int | bytes
    if target is CompareTarget.VALUE:
        value = raw
    else:
        text = raw.decode("utf-8", "replace").strip()
        try:
            if target is CompareTarget.LEASE:
                # etcdctl reads lease IDs in compares as hex.
                value = int(text[2:] if text.lower().startswith("0x") else text, 16)
            else:
                value = int(text, 10)
        except ValueError:
            kind = "a hex lease ID" if target is CompareTarget.LEASE else "an integer"
            raise TxnSyntaxError(f"{m.group('target')} compares against {kind}, got {text!r}") from None
    return Compare(_RESULTS[m.group("op")], target, key, value)


_OP_FLAGS: dict[str, dict[str, bool]] = {
    # flag -> takes a value
    "put": {"--prev-kv": False, "--ignore-value": False, "--ignore-lease": False},
    "get": {
        "--prefix": False,
        "--from-key": False,
        "--keys-only": False,
        "--count-only": False,
        "--limit": True,
        "--rev": True,
    },
    "del": {"--prefix": False, "--from-key": False, "--prev-kv": False},
}


def parse_op(line: str) -> RequestOp:
    toks = _tokens(line)
    name = toks[0][0]
    if toks[0][1] or name not in ("put", "get", "del", "delete"):
        raise TxnSyntaxError(f"unknown operation {name!r} (put, get, del)")
    name = "del" if name == "delete" else name
    allowed = _OP_FLAGS[name]
    flags: dict[str, str | None] = {}
    pos: list[str] = []
    rest = toks[1:]
    i = 0
    while i < len(rest):
        text, quoted = rest[i]
        i += 1
        if quoted or not text.startswith("--"):
            pos.append(text)
            continue
        flag, eq, val = text.partition("=")
        if flag not in allowed:
            raise TxnSyntaxError(f"{name}: unknown flag {flag} (allowed: {', '.join(allowed) or 'none'})")
        if allowed[flag] and not eq:
            if i >= len(rest):
                raise TxnSyntaxError(f"{name}: {flag} needs a value")
            val = rest[i][0]
            i += 1
        elif not allowed[flag] and eq:
            raise TxnSyntaxError(f"{name}: {flag} takes no value")
        flags[flag] = val if allowed[flag] else None

    def number(flag: str) -> int:
        text = flags.get(flag)
        if text is None:
            return 0
        try:
            return non_negative(text)
        except argparse.ArgumentTypeError as e:
            raise TxnSyntaxError(f"{name}: {flag}: {e}") from None

    if name == "put":
        want = 1 if "--ignore-value" in flags else 2
        if len(pos) != want:
            usage = "KEY (with --ignore-value)" if want == 1 else "KEY VALUE"
            raise TxnSyntaxError(f"put needs {usage}, got {len(pos)} arguments")
        value = unquote(pos[1]) if want == 2 else b""
        return PutRequest(
            unquote(pos[0]), value, 0, "--prev-kv" in flags, "--ignore-value" in flags, "--ignore-lease" in flags
        )
    if not 1 <= len(pos) <= 2:
        raise TxnSyntaxError(f"{name} needs KEY [RANGE_END] (got {len(pos)} arguments)")
    try:
        end = unquote(pos[1]) if len(pos) == 2 else None
        key, end = key_range(unquote(pos[0]), end, "--prefix" in flags, "--from-key" in flags)
    except UsageError as e:
        raise TxnSyntaxError(f"{name}: {e}") from None
    if name == "del":
        return DeleteRangeRequest(key, end, "--prev-kv" in flags)
    return RangeRequest(
        key,
        end,
        limit=number("--limit"),
        revision=number("--rev"),
        keys_only="--keys-only" in flags,
        count_only="--count-only" in flags,
    )


def parse_txn(text: str) -> TxnRequest:
    """etcdctl's txn text: compares, blank line, success ops, blank line, failure ops."""
    sections: list[list[tuple[int, str]]] = [[], [], []]
    section = 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            section += 1
            continue
        if section > 2:
            raise TxnSyntaxError(
                f"line {lineno}: text after the failure ops (a txn is compares, a blank line, "
                "success ops, a blank line, failure ops)"
            )
        sections[section].append((lineno, line))
    req = TxnRequest()
    for lineno, line in sections[0]:
        req.compare.append(_at(lineno, parse_compare, line))
    for lineno, line in sections[1]:
        req.success.append(_at(lineno, parse_op, line))
    for lineno, line in sections[2]:
        req.failure.append(_at(lineno, parse_op, line))
    return req


def _at(lineno: int, parse: Callable[[str], Any], line: str) -> Any:
    try:
        return parse(line)
    except TxnSyntaxError as e:
        raise TxnSyntaxError(f"line {lineno}: {e}") from None
