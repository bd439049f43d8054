"""core/v1 ResourceQuota: canonical quantities, kube's checks and Request/Limit cells."""

from __future__ import annotations

from tests.apiserver.kinds_support import causes, cells, create, find, headers, rejected

QUOTA = find("", "resourcequotas")


def quota(**spec: object) -> dict[str, object]:
    return {"metadata": {"name": "compute", "namespace": "default"}, "spec": spec}


def test_create_stores_canonical_quantities() -> None:
    got = create(QUOTA, quota(hard={"requests.cpu": "0.5", "requests.memory": 1073741824, "pods": "10"}))
    assert got["spec"]["hard"] == {"requests.cpu": "500m", "requests.memory": "1073741824", "pods": "10"}
    assert got["kind"] == "ResourceQuota" and "generation" not in got["metadata"]


def test_bad_quotas_are_named_field_by_field() -> None:
    assert rejected(QUOTA, quota(hard={"cpu": "-1", "pods": "1.5", "gpus": "1", "memory": "1X"})) == [
        'spec.hard[cpu]: Invalid value: "-1": must be greater than or equal to 0',
        'spec.hard[pods]: Invalid value: "1500m": must be an integer',
        'spec.hard[gpus]: Invalid value: "gpus": must be a standard resource for quota',
        'spec.hard[memory]: Invalid value: "1X": quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    ]
    assert causes(QUOTA, quota(hard={"cpu": "1"}, scopes=["BestEffort"])) == [
        'spec.scopes: Invalid value: ["BestEffort"]: unsupported scope applied to resource'
    ]
    assert causes(QUOTA, quota(hard={"pods": "1"}, scopes=["Terminating", "NotTerminating", "Later"])) == [
        'spec.scopes: Invalid value: ["Terminating","NotTerminating","Later"]: unsupported scope',
        'spec.scopes: Invalid value: ["Terminating","NotTerminating","Later"]: conflicting scopes',
    ]
    selector = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]}
    assert causes(QUOTA, quota(hard={"pods": "1"}, scopeSelector=selector)) == [
        "spec.scopeSelector.matchExpressions[0].values: Required value: must be at least one value when "
        "`operator` is 'In' or 'NotIn' for scope selector"
    ]
    assert causes(QUOTA, quota(hard={"count/deployments.apps": "2", "example.com/gpu": "1"})) == []


def test_table_as_kubectl_prints_it() -> None:
    assert headers(QUOTA) == [("Name", 0), ("Age", 0), ("Request", 0), ("Limit", 0)]
    obj = {
        **quota(hard={"pods": "10"}),
        "status": {
            "hard": {"pods": "10", "requests.cpu": "1", "limits.memory": "2Gi", "limits.cpu": "2"},
            "used": {"pods": "3", "limits.memory": "512Mi"},
        },
    }
    obj["metadata"] = {**obj["metadata"], "creationTimestamp": "2023-11-14T22:08:20Z"}  # type: ignore[dict-item]
    assert cells(QUOTA, obj) == [
        "compute",
        "5m",
        "pods: 3/10, requests.cpu: 0/1",
        "limits.cpu: 0/2, limits.memory: 512Mi/2Gi",
    ]
