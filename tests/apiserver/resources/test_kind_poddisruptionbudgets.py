"""policy/v1 PodDisruptionBudget: minAvailable xor maxUnavailable, int or percent; kube's columns."""

from __future__ import annotations

from typing import Any

from tests.apiserver.kinds_support import causes, cells, create, find, headers, rejected

PDB = find("policy", "poddisruptionbudgets")


def pdb(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "web", "namespace": "default"}, "spec": spec}


def test_create_get_list() -> None:
    got = create(PDB, pdb(minAvailable=2, selector={"matchLabels": {"app": "web"}}))
    assert got["spec"]["minAvailable"] == 2 and got["metadata"]["generation"] == 1


def test_bad_budgets() -> None:
    assert rejected(PDB, pdb(minAvailable="50%", maxUnavailable=1)) == [
        'spec: Invalid value: {"maxUnavailable":1,"minAvailable":"50%"}: minAvailable and maxUnavailable cannot be '
        "both set"
    ]
    assert causes(PDB, pdb(maxUnavailable="150%", unhealthyPodEvictionPolicy="Never")) == [
        'spec.maxUnavailable: Invalid value: "150%": must not be greater than 100%',
        'spec.unhealthyPodEvictionPolicy: Unsupported value: "Never": supported values: "AlwaysAllow", '
        '"IfHealthyBudget"',
    ]
    assert causes(PDB, pdb(minAvailable=-1, selector={"matchExpressions": [{"key": "a", "operator": "In"}]})) == [
        "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0",
        "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or "
        "'NotIn'",
    ]
    assert causes(PDB, pdb(maxUnavailable="10%", selector={})) == []  # an empty selector selects every pod


def test_table() -> None:
    assert headers(PDB) == [
        ("Name", 0),
        ("Min Available", 0),
        ("Max Unavailable", 0),
        ("Allowed Disruptions", 0),
        ("Age", 0),
    ]
    obj = pdb(minAvailable="50%")
    obj["status"] = {"disruptionsAllowed": 2}
    assert cells(PDB, obj)[:4] == ["web", "50%", "N/A", 2]
    assert cells(PDB, pdb(maxUnavailable=1))[1:3] == ["N/A", "1"]
