"""Test-only unsafe modes ("canaries"): deliberate correctness bugs a chaos checker must catch.

A checker that never fails proves nothing; with a canary on, the member really misbehaves
and the checker's verdict must turn red.  Enabled only from the environment, read once at
import: `RAFTKUBE_UNSAFE=<name>[,<name>]`.  An unknown name makes `check_env()` (called at
member start) fail; a member running any canary logs a loud warning.

* `ack-before-fsync`: client writes are acknowledged but never fsynced (the WAL is fsynced
  only for the bootstrap snapshot, a new term or vote and conf changes; the member's own
  snapshot markers are written unsynced, and the snapshot file the durable marker names is
  kept until a newer marker is durable); a crash that drops unsynced data (machinery.process.disk's
  crash simulation) loses them, while the consistent prefix that survives lets the cluster
  restart, so the lost writes can be seen missing.
* `read-without-readindex`: linearizable reads skip ReadIndex and answer from local state,
  on any member, even a deposed leader or one cut off from the quorum (stale reads).
* `drop-watch-event-at-compaction`: after a compaction is applied, the next event each
  existing watcher would be sent is silently left out.
* `skip-prev-kv`: DELETE events go out without prev_kv even to watchers that asked for it.

Each is a module-level boolean, so a disabled canary costs one attribute check at its site.
"""

from __future__ import annotations

import os

ENV = "RAFTKUBE_UNSAFE"

NAMES: tuple[str, ...] = (
    "ack-before-fsync",
    "read-without-readindex",
    "drop-watch-event-at-compaction",
    "skip-prev-kv",
)

ACK_BEFORE_FSYNC = False
READ_WITHOUT_READINDEX = False
DROP_WATCH_EVENT_AT_COMPACTION = False
SKIP_PREV_KV = False

ACTIVE: tuple[str, ...] = ()
"""The canaries on, in NAMES order."""

_env_error: str | None = None


class CanaryError(ValueError):
    """An unknown canary name; the message names it."""


def parse(spec: str) -> tuple[str, ...]:
    names = [n.strip() for n in spec.split(",") if n.strip()]
    for n in names:
        if n not in NAMES:
            raise CanaryError(f"unknown unsafe mode {n!r} in {ENV}; known: {', '.join(NAMES)}")
    return tuple(n for n in NAMES if n in names)


def configure(spec: str) -> None:
    """Turn on exactly the canaries in `spec` (comma-separated); for tests in this process."""
    global ACTIVE, ACK_BEFORE_FSYNC, READ_WITHOUT_READINDEX, DROP_WATCH_EVENT_AT_COMPACTION, SKIP_PREV_KV  # noqa: PLW0603
    ACTIVE = parse(spec)
    ACK_BEFORE_FSYNC = "ack-before-fsync" in ACTIVE
    READ_WITHOUT_READINDEX = "read-without-readindex" in ACTIVE
    DROP_WATCH_EVENT_AT_COMPACTION = "drop-watch-event-at-compaction" in ACTIVE
    SKIP_PREV_KV = "skip-prev-kv" in ACTIVE


def check_env() -> None:
    """Raise CanaryError if the environment named an unknown canary (the member refuses to start)."""
    if _env_error is not None:
        raise CanaryError(_env_error)


def _load_env() -> None:
    global _env_error  # noqa: PLW0603
    try:
        configure(os.environ.get(ENV, ""))
    except CanaryError as e:
        _env_error = str(e)


_load_env()
