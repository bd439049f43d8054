"""`PodLogOptions` from a query string, checked as kube checks them: what `kubectl logs` sends
to `pods/log` and what the apiserver passes on to the kubelet's `/containerLogs`.

    container  follow  previous  timestamps  tailLines (>= 0)  sinceSeconds (>= 1)
    sinceTime (RFC 3339)  limitBytes (>= 1)  insecureSkipTLSVerifyBackend (accepted, unused)

A bad value is a ValueError naming the parameter (the apiserver's 400).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlencode

MAX_TAIL_LINES = 1_000_000
MAX_SINCE_SECONDS = 100 * 365 * 24 * 3600
KNOWN = frozenset(
    {
        "container",
        "follow",
        "previous",
        "timestamps",
        "tailLines",
        "sinceSeconds",
        "sinceTime",
        "limitBytes",
        "insecureSkipTLSVerifyBackend",
        "pretty",
        "stream",
    }
)


@dataclass(frozen=True, slots=True)
class PodLogOptions:
    container: str = ""
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    since_seconds: int | None = None
    since_time: str = ""  # as given, RFC 3339
    limit_bytes: int | None = None

    def since_ns(self, now: float) -> int | None:
        """The earliest entry time wanted, in ns since the epoch."""
        if self.since_seconds is not None:
            return int((now - self.since_seconds) * 1e9)
        if self.since_time:
            return int(_parse_time(self.since_time).timestamp()) * 1_000_000_000
        return None

    def query(self) -> str:
        """The options as the kubelet's /containerLogs takes them."""
        q: dict[str, str] = {}
        for name, flag in (("follow", self.follow), ("previous", self.previous), ("timestamps", self.timestamps)):
            if flag:
                q[name] = "true"
        for name, number in (
            ("tailLines", self.tail_lines),
            ("sinceSeconds", self.since_seconds),
            ("limitBytes", self.limit_bytes),
        ):
            if number is not None:
                q[name] = str(number)
        if self.since_time:
            q["sinceTime"] = self.since_time
        return urlencode(q)


def _flag(query: Mapping[str, str], name: str) -> bool:
    value = query.get(name)
    if value is None or value == "":
        return False
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise ValueError(f"{name}: must be true or false, got {value!r}")


def _number(query: Mapping[str, str], name: str, least: int, most: int) -> int | None:
    value = query.get(name)
    if value is None or value == "":
        return None
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"{name}: must be an integer, got {value!r}") from None
    if not least <= n <= most:
        raise ValueError(f"{name}: must be from {least} to {most}, got {n}")
    return n


def _parse_time(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"sinceTime: must be an RFC 3339 time, got {text!r}") from None
    if moment.tzinfo is None:
        raise ValueError(f"sinceTime: must carry a time zone, got {text!r}")
    return moment.astimezone(UTC)


def parse(query: Mapping[str, str]) -> PodLogOptions:
    options = PodLogOptions(
        container=query.get("container") or "",
        follow=_flag(query, "follow"),
        previous=_flag(query, "previous"),
        timestamps=_flag(query, "timestamps"),
        tail_lines=_number(query, "tailLines", 0, MAX_TAIL_LINES),
        since_seconds=_number(query, "sinceSeconds", 1, MAX_SINCE_SECONDS),
        since_time=query.get("sinceTime") or "",
        limit_bytes=_number(query, "limitBytes", 1, 1 << 62),
    )
    if options.since_time:
        _parse_time(options.since_time)
    if options.since_seconds is not None and options.since_time:
        raise ValueError("sinceSeconds and sinceTime: at most one of them may be given")
    return options
