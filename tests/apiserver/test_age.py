"""Ages as apimachinery's duration.HumanDuration prints them."""

from __future__ import annotations

import pytest

from apiserver.age import human_duration, since


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (5, "5s"),
        (119, "119s"),
        (120, "2m"),
        (182, "3m2s"),
        (599, "9m59s"),
        (600, "10m"),
        (179 * 60 + 59, "179m"),
        (3 * 3600, "3h"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (8 * 3600 + 59 * 60, "8h"),
        (47 * 3600, "47h"),
        (2 * 86400 + 3 * 3600, "2d3h"),
        (7 * 86400, "7d"),
        (8 * 86400 + 5 * 3600, "8d"),
        (729 * 86400, "729d"),
        (730 * 86400, "2y"),
        (775 * 86400, "2y45d"),
        (8 * 365 * 86400, "8y"),
    ],
)
def test_human_duration(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown


def test_since() -> None:
    assert since(None, 0.0) == "<unknown>"
    assert since("2024-05-01T10:00:00Z", 1714557600.0 + 65) == "65s"
