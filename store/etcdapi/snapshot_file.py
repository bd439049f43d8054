"""A backup of ours in the file format `etcdctl snapshot save` writes and checks.

etcdctl checks what a member's Snapshot stream sent: its size must be a multiple of 512
plus 32, the last 32 bytes the SHA-256 of the rest (etcd's bbolt pages, then the hash).  Our
backup is no bbolt file, so it is framed to pass that check and to be recognised again:
a magic line, the backup's length, the backup, zero padding, the hash.  `raftkube store
snapshot restore` reads both this and our own backup files; etcdutl cannot restore it.
"""

from __future__ import annotations

import hashlib

SNAPSHOT_MAGIC = b"raftkube-backup\n"


def etcd_snapshot_bytes(backup: bytes) -> bytes:
    """Our backup as etcd frames a snapshot: a magic line, the 8-byte length, the backup,
    zero padding to a multiple of 512, then the SHA-256 of everything before it."""
    body = SNAPSHOT_MAGIC + len(backup).to_bytes(8, "big") + backup
    body += b"\0" * (-len(body) % 512)
    return body + hashlib.sha256(body).digest()


def backup_from_etcd_snapshot(data: bytes) -> bytes | None:
    """The backup inside a file `etcd_snapshot_bytes` made (None if it is not one, or damaged)."""
    if len(data) < len(SNAPSHOT_MAGIC) + 8 + 32 or not data.startswith(SNAPSHOT_MAGIC):
        return None
    body, digest = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        return None
    n = int.from_bytes(body[len(SNAPSHOT_MAGIC) : len(SNAPSHOT_MAGIC) + 8], "big")
    start = len(SNAPSHOT_MAGIC) + 8
    if start + n > len(body):
        return None
    return body[start : start + n]
