"""A CustomResourceDefinition on the user's path: kubectl 1.31-1.33 against the apiserver process.

`kubectl apply` a CRD with a schema, a default, printer columns, a status subresource and a
short name; `kubectl wait` for Established; create custom resources (client-side and
server-side apply), see them by short name with the CRD's columns, `kubectl explain` a field,
watch the schema refuse a bad object with kube's message, and `kubectl delete crd` take the
objects with it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.apiserver.kubectl_support import MINORS, rows, write
from tests.apiserver.support import ApiserverUnderTest

GROUP = "shop.example.com"


def crd(plural: str) -> dict[str, Any]:
    kind = plural[:-1].capitalize()
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": plural[:-1], "kind": kind, "shortNames": [plural[:3]]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Flavour", "type": "string", "jsonPath": ".spec.flavour"},
                        {"name": "Scoops", "type": "integer", "jsonPath": ".spec.scoops"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "description": "What the customer ordered.",
                                    "required": ["flavour"],
                                    "properties": {
                                        "flavour": {"type": "string", "description": "The ice cream's flavour."},
                                        "scoops": {"type": "integer", "minimum": 1, "maximum": 4, "default": 2},
                                        "toppings": {
                                            "type": "array",
                                            "x-kubernetes-list-type": "map",
                                            "x-kubernetes-list-map-keys": ["name"],
                                            "items": {
                                                "type": "object",
                                                "required": ["name"],
                                                "properties": {
                                                    "name": {"type": "string"},
                                                    "grams": {"type": "integer"},
                                                },
                                            },
                                        },
                                    },
                                },
                                "status": {"type": "object", "properties": {"served": {"type": "boolean"}}},
                            },
                        }
                    },
                }
            ],
        },
    }


def order(plural: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": plural[:-1].capitalize(),
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


@pytest.mark.parametrize("minor", MINORS)
def test_kubectl_applies_gets_explains_and_deletes_a_crd(
    raftkube_apiserver: ApiserverUnderTest, tmp_path: Path, minor: int
) -> None:
    api = raftkube_apiserver
    plural = f"sundae{minor}s"
    short = plural[:3]

    def kubectl(*args: str) -> str:
        done = api.kubectl(*args, minor=minor)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    kubectl("apply", "-f", write(tmp_path, "crd.json", crd(plural)))
    kubectl("wait", "--for=condition=Established", f"crd/{plural}.{GROUP}", "--timeout=30s")

    kubectl("create", "-f", write(tmp_path, "a.json", order(plural, "a", flavour="vanilla")))
    applied = order(plural, "b", flavour="mint", scoops=3, toppings=[{"name": "nuts", "grams": 5}])
    kubectl("apply", "--server-side", "--field-manager=shop", "-f", write(tmp_path, "b.json", applied))
    # a second manager's apply merges into the list by its key, as the schema says
    second = order(plural, "b", flavour="mint", toppings=[{"name": "sauce"}])
    kubectl("apply", "--server-side", "--field-manager=other", "-f", write(tmp_path, "b2.json", second))
    b = json.loads(kubectl("get", plural, "b", "-o", "json"))
    assert sorted(t["name"] for t in b["spec"]["toppings"]) == ["nuts", "sauce"]

    table = rows(kubectl("get", short))
    assert table[0] == ["NAME", "FLAVOUR", "SCOOPS"]
    assert table[1:] == [["a", "vanilla", "2"], ["b", "mint", "3"]]  # a's scoops: the schema's default

    explained = kubectl("explain", f"{plural}.spec")
    assert "What the customer ordered." in explained and "flavour" in explained, explained

    bad = api.kubectl("create", "-f", write(tmp_path, "c.json", order(plural, "c", scoops=9)), minor=minor)
    assert bad.returncode != 0
    assert "spec.flavour: Required value" in bad.stderr, bad.stderr
    assert "spec.scoops in body should be less than or equal to 4" in bad.stderr, bad.stderr

    kubectl("delete", "crd", f"{plural}.{GROUP}", "--timeout=60s")
    # the kind is withdrawn just after the CRD goes (the server notices it on its watch)
    for _ in range(40):
        gone = api.kubectl("get", plural, minor=minor)
        if gone.returncode != 0:
            break
        time.sleep(0.25)
    # (kubectl's cached discovery may still name the kind: then the server's 404 shows)
    assert gone.returncode != 0, gone.stdout
    assert "doesn't have a resource type" in gone.stderr or "could not find the requested" in gone.stderr
