"""Settings from files a user edits: one checker for a dataclass field's value, and one
loader for a section of `cluster.toml`.

Every section of cluster.toml ([store], [store.raft], [apiserver], [kubelets]) is a frozen
dataclass whose fields declare the keys, their types and defaults (ranges and choices in the
field's metadata); member.json is checked by the same rules.  The rules live here once, so a
port is refused the same way in every section and the message always names the file and the
key:

- bools are not integers, floats are not integers, integers are positive (or at least the
  field's metadata "min", at most its "max", one of its "choices") and at most INT_MAX;
- numbers of seconds are finite and positive (an integer is taken as seconds too);
- strings are not empty unless the field's metadata says "empty"; a field whose metadata has
  a "check" callable is also refused when that callable raises ValueError (a URL's syntax);
- lists of strings (a field typed `tuple[str, ...]`: a component's extra flags) hold at most
  MAX_LIST_ITEMS strings of at most MAX_LIST_ITEM_CHARS characters each, none with a NUL
  (an argv entry cannot carry one).

Errors are typed: `SettingError` (a ValueError) carries the field's name, for a caller that
reads one file field by field (member.json); `ConfigError` is cluster.toml missing,
unreadable, or holding a value of the wrong kind, with a message naming the file and key.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import Field, fields
from functools import cache
from pathlib import Path
from typing import Any, get_type_hints

INT_MAX = (1 << 63) - 1
"""No integer setting or ID goes above this (msgpack's and the WAL's signed 64-bit range)."""
MAX_LIST_ITEMS = 256
MAX_LIST_ITEM_CHARS = 4096


class ConfigError(Exception):
    """cluster.toml is missing, unreadable, or has a value of the wrong kind."""


class SettingError(ValueError):
    """A setting (in cluster.toml or member.json) cannot be used; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def check_value(f: Field[Any], kind: Any, value: Any, what: str) -> Any:
    """`value` for the field `f` of declared type `kind`, or SettingError naming `what`
    (the rules are in the module docstring)."""
    if kind is bool:
        if not isinstance(value, bool):
            raise SettingError(f.name, f"{what} must be true or false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingError(f.name, f"{what} must be an integer, got {value!r}")
        choices = f.metadata.get("choices")
        if choices is not None and value not in choices:
            raise SettingError(f.name, f"{what} must be {' or '.join(map(str, choices))}, got {value}")
        lo: int = f.metadata.get("min", 1)
        hi: int = f.metadata.get("max", INT_MAX)
        if value < lo:
            raise SettingError(f.name, f"{what} must be {'positive' if lo == 1 else f'at least {lo}'}, got {value}")
        if value > hi:
            raise SettingError(f.name, f"{what} must be at most {hi}, got {value}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise SettingError(f.name, f"{what} must be a positive number of seconds, got {value!r}")
        return float(value)
    if kind is str or kind is Path:
        may_be_empty = bool(f.metadata.get("empty"))  # a field that may be empty says so
        if not isinstance(value, str) or not (value or may_be_empty):
            kind_text = "a string" if may_be_empty else "a non-empty string"
            raise SettingError(f.name, f"{what} must be {kind_text}, got {value!r}")
        check = f.metadata.get("check")
        if check is not None:
            try:
                check(value)
            except ValueError as e:
                raise SettingError(f.name, f"{what}: {e}") from None
        return Path(value) if kind is Path else value
    if kind == tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SettingError(f.name, f"{what} must be a list of strings, got {value!r}")
        if len(value) > MAX_LIST_ITEMS:
            raise SettingError(f.name, f"{what} must hold at most {MAX_LIST_ITEMS} strings, got {len(value)}")
        for i, v in enumerate(value):
            if len(v) > MAX_LIST_ITEM_CHARS or "\0" in v:
                raise SettingError(f.name, f"{what}[{i}] must be at most {MAX_LIST_ITEM_CHARS} characters with no NUL")
        return tuple(value)
    raise TypeError(f"no check for settings of type {kind!r} ({what})")  # a programming error


@cache
def field_types(cls: type) -> dict[str, Any]:
    """The declared type of each field of the dataclass `cls` (annotations resolved)."""
    return get_type_hints(cls)


def check_field(cls: type, f: Field[Any], value: Any, what: str) -> Any:
    """`value` for field `f` of the dataclass `cls`, checked as its declared type demands."""
    return check_value(f, field_types(cls)[f.name], value, what)


def read_toml(path: Path) -> dict[str, Any]:
    """The document in `path`; ConfigError if it is missing or not TOML."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None


def load_section(
    cls: type, path: Path, section: str, *, tables: tuple[str, ...] = (), missing_file_ok: bool = False
) -> dict[str, Any]:
    """The values of the TOML table `section` of `path` (dotted: "store.raft") for the
    fields of the dataclass `cls`, each checked; ConfigError names the file and key.

    A table the file leaves out is empty (every field takes its default).  `tables` are
    fields that are sub-tables, left to their own loader.  With `missing_file_ok` a missing
    file is empty too, as a section it leaves out."""
    if missing_file_ok and not path.exists():
        return {}
    table = read_toml(path)
    parts = section.split(".")
    for depth in range(len(parts)):
        table = table.get(parts[depth], {})
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [{'.'.join(parts[: depth + 1])}] must be a table")
    known = {f.name: f for f in fields(cls) if f.name not in tables}
    unknown = sorted(set(table) - set(known) - set(tables))
    if unknown:
        raise ConfigError(f"{path}: {section} has unknown keys: {', '.join(unknown)}")
    try:
        return {k: check_field(cls, known[k], v, f"{path}: {section}.{k}") for k, v in table.items() if k not in tables}
    except SettingError as e:
        raise ConfigError(str(e)) from None
