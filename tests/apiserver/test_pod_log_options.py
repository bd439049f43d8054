"""PodLogOptions from the query kubectl logs sends: each option, and what each bad value gets."""

from __future__ import annotations

import pytest

from apiserver.resources.pod_log_options import PodLogOptions, parse


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
