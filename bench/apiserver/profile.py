"""What a py-spy profile of the apiserver says: where its samples fall, as short tables.

py-spy's raw format is one collapsed stack per line, "frame;frame;...;leaf COUNT", each frame
"function (file:line)".  The summary keeps the functions with the most samples on top of the
stack (self) and those of our own code with the most samples anywhere below them (inclusive),
which together say where the time goes.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_LINE = re.compile(r"^(.*) (\d+)$")
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]*)(?::\d+)?\)$")
OUR_CODE = ("apiserver/", "store/")


def _name(frame: str) -> tuple[str, str]:
    """(function with its file, file) of one collapsed frame; line numbers dropped."""
    m = _FRAME.match(frame.strip())
    if m is None:
        return frame.strip(), ""
    path = m["file"]
    for marker in ("site-packages/", "/lib/python3", "/work/"):
        if marker in path:
            path = path.split(marker, 1)[1]
    path = re.sub(r"^\.\d+/", "", path)
    path = re.sub(r"^wt/[^/]+/|^main/", "", path)
    return f"{m['func']} ({path})", path


def summarise(
    raw: str,
    seconds: float,
    rate: float,
    top: int = 15,
    ours: tuple[str, ...] = OUR_CODE,
    entry_points: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Top frames by share of samples; busy_pct = samples over what an always-running process
    would give (py-spy leaves out idle samples, so that is the main thread's CPU share).
    `ours`: the path prefixes whose functions the inclusive list counts; `entry_points`: files
    under every sample, left out of it (they would top it and say nothing)."""
    total = 0
    self_: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    for line in raw.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        count = int(m[2])
        frames = [_name(f) for f in m[1].split(";") if f]
        if not frames:
            continue
        total += count
        leaf = frames[-1][0]
        self_[leaf] += count
        seen: set[str] = set()
        for name, path in frames:
            if path.startswith(ours) and not path.startswith(entry_points) and name not in seen:
                seen.add(name)
                inclusive[name] += count

    def pct(c: Counter[str]) -> list[dict[str, Any]]:
        return [{"frame": k, "pct": round(100.0 * v / max(1, total), 1)} for k, v in c.most_common(top)]

    busy = round(100.0 * total / max(1.0, seconds * rate), 1)
    return {
        "samples": total,
        "seconds": round(seconds, 2),
        "busy_pct": busy,
        "self": pct(self_),
        "inclusive": pct(inclusive),
    }
