"""batch/v1 CronJob: defaults, the schedule grammar (robfig/cron's messages), the job template
checked by the Job's rules, and kube's columns."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from machinery.cron import CronError, check_schedule, schedule_error
from tests.apiserver.kinds_support import causes, cells, create, find, headers, rejected

CJ = find("batch", "cronjobs")
POD = {"containers": [{"name": "tick", "image": "busybox:1.36"}], "restartPolicy": "OnFailure"}


def cronjob(schedule: str = "*/5 * * * *", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "tick", "namespace": "default"},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": copy.deepcopy(POD)}}}, **spec},
    }


def test_create_defaults_as_kube() -> None:
    got = create(CJ, cronjob())
    spec = got["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"]) == ("Allow", False)
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["dnsPolicy"] == "ClusterFirst" and pod["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert "backoffLimit" not in spec["jobTemplate"]["spec"]  # kube does not default the template's JobSpec
    assert got["metadata"]["generation"] == 1


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("*/5 * * * *", ""),
        ("0 0 1 jan-mar mon-fri", ""),
        ("0 0 ? * ?", ""),
        ("@hourly", ""),
        ("@every 1h30m", ""),
        ("0 0 * *", "expected exactly 5 fields, found 4: [0 0 * *]"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("1/2/3 * * * *", "too many slashes: 1/2/3"),
        ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@every soon", 'failed to parse duration @every soon: time: invalid duration "soon"'),
        ("TZ=Europe/Berlin 0 0 * * *", ""),
        ("TZ=Mars/Olympus 0 0 * * *", "provided bad location Mars/Olympus: unknown time zone Mars/Olympus"),
    ],
)
def test_schedules(schedule: str, message: str) -> None:
    assert schedule_error(schedule) == message


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789*/-,?@ abcdefghijklmnopqrstuvwxyzTZ=", max_size=30))
def test_any_schedule_text_is_accepted_or_refused_with_a_message(text: str) -> None:
    try:
        check_schedule(text)
    except CronError as err:
        assert str(err)


def test_bad_cronjobs_are_named_field_by_field() -> None:
    assert rejected(CJ, cronjob("TZ=UTC 0 * * * *")) == [
        'spec.schedule: Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field '
        "instead"
    ]
    bad = cronjob("0 * * * *", concurrencyPolicy="Sometimes", timeZone="Local", startingDeadlineSeconds=-1)
    template = bad["spec"]["jobTemplate"]["spec"]
    template["selector"] = {"matchLabels": {"a": "b"}}
    template["template"]["spec"]["restartPolicy"] = "Always"
    assert causes(CJ, bad) == [
        "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
        'spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"',
        'spec.timeZone: Invalid value: "Local": timeZone must be an explicit time zone as defined in '
        "https://www.iana.org/time-zones",
        'spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: '
        '"OnFailure", "Never"',
        'spec.jobTemplate.spec.selector: Invalid value: {"matchLabels":{"a":"b"}}: `selector` will be auto-generated',
    ]
    assert causes(CJ, {"metadata": {"name": "x" * 53, "namespace": "default"}, "spec": {}}) == [
        f'metadata.name: Invalid value: "{"x" * 53}": must be no more than 52 characters',
        "spec.schedule: Required value",
        "spec.jobTemplate.spec.template: Required value",
    ]


def test_tz_in_the_schedule_stays_allowed_on_update_when_it_was_there() -> None:
    old = cronjob("TZ=UTC 0 * * * *")
    new = copy.deepcopy(old)
    new["spec"]["schedule"] = "TZ=UTC 5 * * * *"
    assert causes(CJ, new, old) == []


def test_table() -> None:
    assert headers(CJ) == [
        ("Name", 0),
        ("Schedule", 0),
        ("Timezone", 0),
        ("Suspend", 0),
        ("Active", 0),
        ("Last Schedule", 0),
        ("Age", 0),
        ("Containers", 1),
        ("Images", 1),
        ("Selector", 1),
    ]
    obj = cronjob(suspend=True, timeZone="Europe/Berlin")
    obj["metadata"]["creationTimestamp"] = "2023-11-14T21:13:20Z"
    obj["status"] = {"active": [{"name": "tick-1"}], "lastScheduleTime": "2023-11-14T22:12:20Z"}
    assert cells(CJ, obj) == [
        "tick",
        "*/5 * * * *",
        "Europe/Berlin",
        "True",
        1,
        "60s",
        "60m",
        "tick",
        "busybox:1.36",
        "<none>",
    ]
    assert cells(CJ, cronjob())[2:6] == ["<none>", "<unset>", 0, "<none>"]
