"""The switch of the test-only broken modes (`RAFTKUBE_CHAOS_CANARY`) that `raftkube chaos
cluster --canary MODE` starts a cluster's processes with, to show its checks catch the bug
each is there for.  Nothing else sets it; a process ignores a mode that is not its own.

    drop-watch-event, ack-before-commit   the apiserver's (apiserver/canary.py)
    scheduler-ignores-lease               a scheduler schedules whether or not it holds its
                                          Lease (components/scheduler/main.py)
"""

from __future__ import annotations

import os

ENV = "RAFTKUBE_CHAOS_CANARY"
SCHEDULER_IGNORES_LEASE = "scheduler-ignores-lease"


def mode() -> str:
    return os.environ.get(ENV, "")
