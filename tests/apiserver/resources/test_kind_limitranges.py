"""core/v1 LimitRange: kube's Container defaults and the ordering of min, defaults and max."""

from __future__ import annotations

from typing import Any

from tests.apiserver.kinds_support import causes, cells, create, find, headers, rejected

LIMITS = find("", "limitranges")


def limit_range(*limits: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "bounds", "namespace": "default"}, "spec": {"limits": list(limits)}}


def test_container_defaults_follow_max_then_default_then_min() -> None:
    got = create(
        LIMITS,
        limit_range(
            {"type": "Container", "max": {"cpu": "2", "memory": "1Gi"}, "min": {"ephemeral-storage": "0.5Gi"}},
            {"type": "Pod", "max": {"cpu": 4}},
        ),
    )
    container, pod = got["spec"]["limits"]
    assert container["default"] == {"cpu": "2", "memory": "1Gi"}
    assert container["defaultRequest"] == {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "512Mi"}
    assert pod == {"type": "Pod", "max": {"cpu": "4"}}  # Pod items get no defaults


def test_bounds_out_of_order_are_refused_as_kube_words_it() -> None:
    item = {
        "type": "Container",
        "min": {"cpu": "500m"},
        "max": {"cpu": "1"},
        "default": {"cpu": "2"},
        "defaultRequest": {"cpu": "100m"},
        "maxLimitRequestRatio": {"cpu": "0.5"},
    }
    assert rejected(LIMITS, limit_range(item)) == [
        'spec.limits[0].defaultRequest[cpu]: Invalid value: "100m": min value 500m is greater than default request '
        "value 100m",
        'spec.limits[0].default[cpu]: Invalid value: "1": default value 2 is greater than max value 1',
        'spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "500m": ratio 500m is less than 1',
    ]
    ratio = {"type": "Container", "min": {"cpu": "1"}, "max": {"cpu": "2"}, "maxLimitRequestRatio": {"cpu": "3"}}
    assert causes(LIMITS, limit_range(ratio)) == [
        'spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "3": ratio 3 is greater than max/min = 2.000000'
    ]


def test_types_and_resource_names() -> None:
    assert causes(
        LIMITS,
        limit_range(
            {"type": "Pod", "default": {"cpu": "1"}},
            {"type": "Pod", "max": {"gpu": "1"}},
            {"type": "PersistentVolumeClaim", "max": {"cpu": "1"}},
            {"type": "", "max": {"cpu": "1"}},
        ),
    ) == [
        "spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'",
        'spec.limits[1].type: Duplicate value: "Pod"',
        'spec.limits[1].max[gpu]: Invalid value: "gpu": must be a standard resource type or fully qualified',
        "spec.limits[2].limits: Required value: either minimum or maximum storage value is required, but neither "
        "was provided",
        'spec.limits[3].type: Invalid value: "": name part must be non-empty',
        "spec.limits[3].type: Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
        "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ]


def test_table_is_kubes_default_table() -> None:
    assert headers(LIMITS) == [("Name", 0), ("Created At", 0)]
    obj = limit_range()
    obj["metadata"]["creationTimestamp"] = "2024-05-01T10:00:00Z"
    assert cells(LIMITS, obj) == ["bounds", "2024-05-01T10:00:00Z"]
