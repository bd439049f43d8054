"""The etcdctl snapshot framing of our backups (store/etcdapi/snapshot_file.py): etcdctl
accepts a snapshot only if its size is a multiple of 512 plus a 32-byte SHA-256 of the rest,
and `store snapshot restore` must get the very backup back, or refuse a damaged file."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from store.etcdapi.snapshot_file import SNAPSHOT_MAGIC, backup_from_etcd_snapshot, etcd_snapshot_bytes


@settings(max_examples=50, deadline=None)
@given(backup=st.binary(max_size=3000))
def test_a_framed_backup_passes_etcdctls_check_and_comes_back(backup: bytes) -> None:
    framed = etcd_snapshot_bytes(backup)
    assert len(framed) % 512 == 32  # what etcdctl's snapshot save checks
    assert hashlib.sha256(framed[:-32]).digest() == framed[-32:]
    assert framed.startswith(SNAPSHOT_MAGIC)
    assert backup_from_etcd_snapshot(framed) == backup


@settings(max_examples=50, deadline=None)
@given(backup=st.binary(min_size=1, max_size=600), at=st.integers(0, 10_000), flip=st.integers(1, 255))
def test_any_damage_is_refused(backup: bytes, at: int, flip: int) -> None:
    framed = bytearray(etcd_snapshot_bytes(backup))
    framed[at % len(framed)] ^= flip
    assert backup_from_etcd_snapshot(bytes(framed)) is None
    assert backup_from_etcd_snapshot(bytes(framed[:100])) is None
    assert backup_from_etcd_snapshot(b"") is None
