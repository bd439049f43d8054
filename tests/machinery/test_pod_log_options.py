"""PodLogOptions from the query kubectl logs sends: each option, and what each bad value gets."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from machinery.pod_log_options import PodLogOptions, parse


def test_what_kubectl_logs_sends() -> None:
    got = parse(
        {
            "container": "c",
            "follow": "true",
            "previous": "false",
            "timestamps": "true",
            "tailLines": "10",
            "sinceSeconds": "60",
            "limitBytes": "100",
            "insecureSkipTLSVerifyBackend": "true",
        }
    )
    assert got == PodLogOptions("c", True, False, True, 10, 60, "", 100)
    assert got.query() == "follow=true&timestamps=true&tailLines=10&sinceSeconds=60&limitBytes=100"
    assert got.since_ns(1000.0) == 940 * 10**9
    assert parse({}) == PodLogOptions()


def test_since_time() -> None:
    got = parse({"sinceTime": "2026-12-02T06:00:00Z"})
    assert got.since_ns(0) == 1796191200 * 10**9
    assert "sinceTime=2026-12-02T06%3A00%3A00Z" in got.query()
    assert parse({"sinceTime": "2026-12-02T07:00:00+01:00"}).since_ns(0) == 1796191200 * 10**9


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"follow": "yes"}, "follow"),
        ({"tailLines": "-1"}, "tailLines"),
        ({"tailLines": "x"}, "tailLines"),
        ({"sinceSeconds": "0"}, "sinceSeconds"),
        ({"limitBytes": "0"}, "limitBytes"),
        ({"sinceTime": "yesterday"}, "sinceTime"),
        ({"sinceTime": "2026-12-02T06:00:00"}, "sinceTime"),
        ({"sinceTime": "2026-12-02T06:00:00Z", "sinceSeconds": "5"}, "sinceSeconds and sinceTime"),
    ],
)
def test_bad_values_name_the_parameter(query: dict[str, str], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        parse(query)


KEYS = ["container", "follow", "previous", "timestamps", "tailLines", "sinceSeconds", "sinceTime", "limitBytes", "x"]


@given(st.dictionaries(st.sampled_from(KEYS), st.text(max_size=30), max_size=6))
def test_any_query_parses_or_names_a_parameter(query: dict[str, str]) -> None:
    try:
        options = parse(query)
    except ValueError as e:
        assert any(k in str(e) for k in KEYS), e
        return
    assert options.tail_lines is None or options.tail_lines >= 0
    assert options.since_seconds is None or options.since_seconds >= 1
    assert options.limit_bytes is None or options.limit_bytes >= 1
    passed_on = dict(parse_qsl(options.query()))
    assert parse(passed_on) == PodLogOptions(
        "",
        options.follow,
        options.previous,
        options.timestamps,
        options.tail_lines,
        options.since_seconds,
        options.since_time,
        options.limit_bytes,
    )  # what the kubelet is sent means the same (the container goes in its path)
