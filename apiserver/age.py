"""The Age column's human durations (kubectl's HumanDuration), not Go durations (that is
machinery/duration.py): RFC 3339 timestamps in, `kubectl get`'s "3m2s" out.

`human_duration` follows apimachinery's `duration.HumanDuration` step for step (two units while
the larger is small, one unit after), because the Age column kubectl shows comes from the server.
"""

from __future__ import annotations

from typing import Any

from machinery.timestamps import parse_time


def human_duration(seconds: float) -> str:
    """`5s`, `119s`, `2m`, `3m2s`, `10m`, `2h5m`, `8h`, `2d3h`, `9d`, `2y45d`, `8y`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def since(timestamp: Any, now: float) -> str:
    """kubectl's `translateTimestampSince`: the age of a timestamp, `<unknown>` when there is none."""
    at = parse_time(timestamp)
    return "<unknown>" if at is None else human_duration(now - at)
