"""What the scheduler's /metrics page says: samples, and quantiles of a histogram.

The quantile is estimated as Prometheus' histogram_quantile estimates it: find the bucket the
rank falls in and interpolate linearly inside it.  It is only as fine as the buckets
(components/scheduler/metrics.py: 0.01 ... 300 s), which is why the driver's own per-pod
times are reported next to it.
"""

from __future__ import annotations

import math
import re

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Sample = tuple[str, dict[str, str], float]


def parse(text: str) -> list[Sample]:
    """(name, labels, value) of every sample line of a Prometheus text exposition."""
    out: list[Sample] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        try:
            value = float(m["value"])
        except ValueError:
            continue
        out.append((m["name"], dict(_LABEL.findall(m["labels"] or "")), value))
    return out


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0 when none)."""
    return sum(v for n, ls, v in samples if n == name and all(ls.get(k) == x for k, x in labels.items()))


def buckets(samples: list[Sample], histogram: str) -> list[tuple[float, float]]:
    """(upper bound, cumulative count) of a histogram, sorted by bound, +Inf last."""
    out = [(float(ls["le"]), v) for n, ls, v in samples if n == f"{histogram}_bucket" and "le" in ls]
    return sorted(out)


def quantile(q: float, cumulative: list[tuple[float, float]]) -> float | None:
    """histogram_quantile(q): None for an empty histogram; the highest finite bound when the
    rank falls in the +Inf bucket."""
    if not cumulative or cumulative[-1][1] <= 0:
        return None
    rank = q * cumulative[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in cumulative:
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower
