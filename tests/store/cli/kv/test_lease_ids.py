"""Lease IDs as typed (store.cli.kv.lease_ids): hex or decimal, digits only resolved later."""

from __future__ import annotations

import argparse

import pytest

from store.cli.kv.lease_ids import lease_hex, lease_ref


def test_lease_ids_are_hex_or_decimal() -> None:
    assert lease_ref("0x10").candidates == (16,)
    assert lease_ref("694d77aa9e38260f").candidates == (0x694D77AA9E38260F,)
    assert lease_ref("7").candidates == (7,)
    assert lease_ref("10").candidates == (10, 16)  # digits only: resolved against the lease list
    for bad in ("", "-5", "0x", "12g", "1" * 30):
        with pytest.raises(argparse.ArgumentTypeError):
            lease_ref(bad)


def test_lease_ids_print_as_sixteen_hex_digits() -> None:
    assert lease_hex(16) == "0000000000000010"
    assert lease_ref(lease_hex(0x694D77AA9E38260F)).candidates == (0x694D77AA9E38260F,)
