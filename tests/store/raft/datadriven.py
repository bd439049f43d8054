"""A tiny "script and expected output" test format, in the spirit of cockroachdb/datadriven.

A test file is a sequence of stanzas separated by blank lines.  Each stanza is a command
line, optional input lines, a `----` line, then the expected output (which must not contain
blank lines: a blank line ends the stanza).  Lines starting with `#` between stanzas are
comments and are kept verbatim on rewrite::

    # elect node 1
    campaign 1
    ----
    ok

    add-nodes 3 voters=(1,2,3) prevote=true
    ----
    ...

Arguments are `word`, `key=value` or `key=(v1,v2,...)`.  Why a home-grown format: the
scenarios read as a transcript of what happened, a change in behaviour shows up as a diff,
and `RAFT_REWRITE=1` regenerates the expected output after an intended change (which must
then be read, not just accepted).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SEPARATOR = "----"
REWRITE_ENV = "RAFT_REWRITE"


def rewrite_requested() -> bool:
    """True when the environment asks for expected outputs to be regenerated."""
    return os.environ.get(REWRITE_ENV, "") not in ("", "0", "false", "no")


class DataDrivenError(Exception):
    """The file is malformed, or a command was used wrongly; names the offending line."""


@dataclass(frozen=True, slots=True)
class Arg:
    key: str
    vals: tuple[str, ...] = ()

    def __str__(self) -> str:
        if not self.vals:
            return self.key
        if len(self.vals) == 1:
            return f"{self.key}={self.vals[0]}"
        return f"{self.key}=({','.join(self.vals)})"


@dataclass(slots=True)
class TestData:
    """One stanza: the command, its arguments and input, and the expected output."""

    __test__ = False  # not a pytest class, despite the name

    pos: str
    cmd: str
    args: list[Arg]
    input: list[str]
    expected: str
    raw: str = ""
    """The command line exactly as written, reproduced verbatim on rewrite."""

    # -- argument helpers: commands call these so that errors name the stanza -------------
    def fail(self, msg: str) -> DataDrivenError:
        return DataDrivenError(f"{self.pos}: {self.cmd}: {msg}")

    def positional(self) -> list[str]:
        """Bare words (arguments without `=`)."""
        return [a.key for a in self.args if not a.vals]

    def has(self, key: str) -> bool:
        return any(a.key == key and a.vals for a in self.args)

    def get(self, key: str, default: str | None = None) -> str | None:
        for a in self.args:
            if a.key == key and a.vals:
                if len(a.vals) != 1:
                    raise self.fail(f"{key} takes one value, got {a.vals}")
                return a.vals[0]
        return default

    def get_int(self, key: str, default: int) -> int:
        v = self.get(key)
        if v is None:
            return default
        try:
            return int(v)
        except ValueError:
            raise self.fail(f"{key}={v} is not an integer") from None

    def get_bool(self, key: str, default: bool) -> bool:
        v = self.get(key)
        if v is None:
            return default
        if v in ("true", "false"):
            return v == "true"
        raise self.fail(f"{key}={v} is not true/false")

    def get_list(self, key: str) -> list[str]:
        for a in self.args:
            if a.key == key and a.vals:
                return list(a.vals)
        return []

    def get_ints(self, key: str) -> list[int]:
        try:
            return [int(v) for v in self.get_list(key)]
        except ValueError:
            raise self.fail(f"{key} must be a list of integers") from None

    def check_keys(self, allowed: set[str]) -> None:
        """Reject misspelt options instead of silently ignoring them."""
        for a in self.args:
            if a.vals and a.key not in allowed:
                raise self.fail(f"unknown option {a.key}= (allowed: {sorted(allowed)})")


@dataclass(slots=True)
class _Text:
    lines: list[str] = field(default_factory=list)


def parse_args(line: str, pos: str) -> tuple[str, list[Arg]]:
    """Split a command line into the command and its arguments (parentheses group values)."""
    tokens: list[str] = []
    cur = ""
    depth = 0
    for ch in line:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise DataDrivenError(f"{pos}: unbalanced ')' in {line!r}")
        if ch.isspace() and depth == 0:
            if cur:
                tokens.append(cur)
            cur = ""
        else:
            cur += ch
    if depth != 0:
        raise DataDrivenError(f"{pos}: unbalanced '(' in {line!r}")
    if cur:
        tokens.append(cur)
    if not tokens:
        raise DataDrivenError(f"{pos}: empty command")
    args: list[Arg] = []
    for tok in tokens[1:]:
        key, eq, val = tok.partition("=")
        if not eq:
            args.append(Arg(tok))
        elif val.startswith("(") and val.endswith(")"):
            inner = val[1:-1]
            vals = tuple(v.strip() for v in inner.split(",") if v.strip())
            args.append(Arg(key, vals))
        else:
            args.append(Arg(key, (val,)))
    return tokens[0], args


def parse(text: str, name: str) -> list[TestData | _Text]:
    """Split a file into stanzas and the comment/blank text around them."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    chunks: list[TestData | _Text] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            if not chunks or not isinstance(chunks[-1], _Text):
                chunks.append(_Text())
            last = chunks[-1]
            assert isinstance(last, _Text)
            last.lines.append(line)
            i += 1
            continue
        start = i
        pos = f"{name}:{start + 1}"
        cmd, args = parse_args(line, pos)
        i += 1
        inp: list[str] = []
        while i < len(lines) and lines[i] != SEPARATOR:
            if not lines[i].strip():
                raise DataDrivenError(f"{pos}: expected {SEPARATOR!r} after command {line!r}")
            inp.append(lines[i])
            i += 1
        if i >= len(lines):
            raise DataDrivenError(f"{pos}: missing {SEPARATOR!r} after command {line!r}")
        i += 1  # the separator
        out: list[str] = []
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        chunks.append(TestData(pos=pos, cmd=cmd, args=args, input=inp, expected="\n".join(out), raw=line))
    return chunks


def _normalise(output: str) -> str:
    out = output.rstrip("\n")
    if not out.strip():
        return "ok"
    if any(not ln.strip() for ln in out.split("\n")):
        raise DataDrivenError("command output must not contain blank lines (they end a stanza)")
    return out


Handler = Callable[[TestData], str]


def run_text(text: str, name: str, handler: Handler) -> list[tuple[TestData, str]]:
    """Run every stanza of `text`; returns (stanza, actual output) pairs, expected unchecked."""
    results: list[tuple[TestData, str]] = []
    for chunk in parse(text, name):
        if isinstance(chunk, TestData):
            results.append((chunk, _normalise(handler(chunk))))
    return results


def diff(expected: str, actual: str) -> str:
    return "\n".join(
        difflib.unified_diff(expected.split("\n"), actual.split("\n"), "expected", "actual", lineterm="", n=3)
    )


def run_file(path: Path, handler: Handler, rewrite: bool | None = None) -> None:
    """Run `path`, raising AssertionError with a diff at the first mismatching stanza.

    With `rewrite` (default: the RAFT_REWRITE environment variable) every expected output
    is replaced by the actual one and the file is written back instead.
    """
    if rewrite is None:
        rewrite = rewrite_requested()
    text = path.read_text()
    chunks = parse(text, path.name)
    out_lines: list[str] = []
    for chunk in chunks:
        if isinstance(chunk, _Text):
            out_lines.extend(chunk.lines)
            continue
        actual = _normalise(handler(chunk))
        if rewrite:
            out_lines.append(chunk.raw)
            out_lines.extend(chunk.input)
            out_lines.append(SEPARATOR)
            out_lines.extend(actual.split("\n"))
            continue
        if actual != chunk.expected:
            raise AssertionError(
                f"{chunk.pos}: output of {chunk.raw!r} differs "
                f"(rerun with {REWRITE_ENV}=1 to regenerate, then review the diff):\n" + diff(chunk.expected, actual)
            )
    if rewrite:
        new = "\n".join(out_lines) + "\n"
        if new != text:
            path.write_text(new)
