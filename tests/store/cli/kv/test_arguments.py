"""Command-line words to bytes, ranges and numbers (store.cli.kv.arguments), as etcdctl reads them."""

from __future__ import annotations

import argparse

import pytest

from machinery.process.command import UsageError
from store.cli.kv.arguments import arg_bytes, key_range, non_negative, positive


def test_ranges_as_etcdctl_computes_them() -> None:
    assert key_range(b"k", None, False, False) == (b"k", b"")
    assert key_range(b"a", b"c", False, False) == (b"a", b"c")
    assert key_range(b"ab", None, True, False) == (b"ab", b"ac")
    assert key_range(b"", None, True, False) == (b"\0", b"\0")  # every key
    assert key_range(b"k", None, False, True) == (b"k", b"\0")
    for end, prefix, from_key in ((None, True, True), (b"z", True, False), (b"z", False, True)):
        with pytest.raises(UsageError):
            key_range(b"k", end, prefix, from_key)


def test_numbers_are_checked_as_argparse_types() -> None:
    assert non_negative("0") == 0 and positive("3") == 3
    for bad, parse in (("-1", non_negative), ("0", positive), ("x", non_negative)):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(bad)


def test_arguments_go_back_to_the_bytes_the_shell_passed() -> None:
    assert arg_bytes("a\udcffb") == b"a\xffb"
