"""Strict decoding of wire arrays: the one place where untrusted msgpack becomes typed values.

Everything a client, a peer or a log entry sends is a msgpack array whose fields are
checked here, one by one, before any of it is used: bytes are bytes, ints are ints (not
bools, not floats, within the range the field allows), strings are strings of bounded
length, lists are lists of bounded length.  The first field that is wrong raises
InvalidArgumentError naming it (`put.value: expected bytes, got str`), so a client learns
exactly what it got wrong and nothing half-decoded ever reaches the state machine.

A `Fields` walks one array in order:

    f = Fields(w, "put", 6)
    PutRequest(f.blob("key"), f.blob("value"), f.integer("lease"), f.flag("prev_kv"), ...)

Nested arrays get their own `Fields` with a longer path (`txn.success[2].put.key`).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar

from store.api.errors import InvalidArgumentError

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)
UINT64_MAX = (1 << 64) - 1
MAX_KEY_BYTES = 1 << 21
"""No key or value can be larger than a request (1.5 MiB); this bound only stops absurd sizes
before the request-size check, which counts the whole frame."""
MAX_STR = 4096
"""Names, URLs and other strings: no legitimate one comes close."""
MAX_LIST = 1 << 16

E = TypeVar("E", bound=IntEnum)


def _kind(v: Any) -> str:
    if v is None:
        return "nil"
    return {bytes: "bytes", str: "str", bool: "bool", int: "int", float: "float", list: "array", dict: "map"}.get(
        type(v), type(v).__name__
    )


class Fields:
    """The fields of one wire array, read in order and checked as they are read."""

    __slots__ = ("_i", "_path", "_w")

    def __init__(self, w: Any, path: str, n: int, n_max: int | None = None) -> None:
        """`w` must be an array of `n` fields (up to `n_max` when later fields are optional)."""
        if type(w) is not list:
            raise InvalidArgumentError(f"{path}: expected an array, got {_kind(w)}", field=path)
        hi = n if n_max is None else n_max
        if not n <= len(w) <= hi:
            want = str(n) if hi == n else f"{n} to {hi}"
            raise InvalidArgumentError(f"{path}: expected {want} fields, got {len(w)}", field=path)
        self._w = w
        self._path = path
        self._i = 0

    def _next(self, name: str) -> tuple[Any, str]:
        i = self._i
        self._i = i + 1
        return self._w[i], f"{self._path}.{name}"

    def more(self) -> bool:
        """Whether an optional trailing field is present."""
        return self._i < len(self._w)

    @staticmethod
    def fail(path: str, message: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"{path}: {message}", field=path)

    def blob(self, name: str, max_len: int = MAX_KEY_BYTES) -> bytes:
        v, path = self._next(name)
        return check_bytes(v, path, max_len)

    def integer(self, name: str, lo: int = 0, hi: int = INT64_MAX) -> int:
        v, path = self._next(name)
        return check_int(v, path, lo, hi)

    def flag(self, name: str) -> bool:
        v, path = self._next(name)
        if type(v) is not bool:
            raise self.fail(path, f"expected bool, got {_kind(v)}")
        return v

    def text(self, name: str, max_len: int = MAX_STR) -> str:
        v, path = self._next(name)
        return check_str(v, path, max_len)

    def enum(self, name: str, cls: type[E]) -> E:
        v, path = self._next(name)
        if type(v) is not int:
            raise self.fail(path, f"expected int, got {_kind(v)}")
        try:
            return cls(v)
        except ValueError:
            raise self.fail(path, f"{v} is not a valid {cls.__name__}") from None

    def array(self, name: str, max_len: int = MAX_LIST) -> tuple[list[Any], str]:
        """A nested array, unchecked inside: returns it with its path for the caller to walk."""
        v, path = self._next(name)
        if type(v) is not list:
            raise self.fail(path, f"expected an array, got {_kind(v)}")
        if len(v) > max_len:
            raise self.fail(path, f"more than {max_len} items")
        return v, path

    def any(self, name: str) -> tuple[Any, str]:
        """A field whose type depends on another (a compare's value): the caller checks it."""
        return self._next(name)


def check_bytes(v: Any, path: str, max_len: int = MAX_KEY_BYTES) -> bytes:
    if type(v) is not bytes:
        raise Fields.fail(path, f"expected bytes, got {_kind(v)}")
    if len(v) > max_len:
        raise Fields.fail(path, f"longer than {max_len} bytes")
    return v


def check_int(v: Any, path: str, lo: int = 0, hi: int = INT64_MAX) -> int:
    if type(v) is not int:
        raise Fields.fail(path, f"expected int, got {_kind(v)}")
    if not lo <= v <= hi:
        raise Fields.fail(path, f"{v} is out of range [{lo}, {hi}]")
    return v


def check_str(v: Any, path: str, max_len: int = MAX_STR) -> str:
    if type(v) is not str:
        raise Fields.fail(path, f"expected str, got {_kind(v)}")
    if len(v) > max_len:
        raise Fields.fail(path, f"longer than {max_len} characters")
    return v
