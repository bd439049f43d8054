"""(f) Custom resources against pods: the creates (d) and watch throughput (b) of a CRD's kind.

A CustomResourceDefinition `widgets.bench.raftkube.io` (namespaced, a structural schema shaped
like the pod the other phases create, so pruning and validation do work) is created and
awaited Established; then widgets are created at the same in-flight count as (d) and watched
by as many unfiltered watchers as (b).  The figures are set beside the pod phases' of the same
backend in the same run: the ratio is the target (custom resources at >= 0.8x pods), which
shows what serving a kind from a schema known only at run time costs.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from bench.apiserver.backends import Backend, BackendError
from bench.apiserver.context import Context
from bench.apiserver.loadgen import CUSTOM_GROUP, CUSTOM_PLURAL, CUSTOM_VERSION
from bench.apiserver.phases import creates, throughput

CRD_NAME = f"{CUSTOM_PLURAL}.{CUSTOM_GROUP}"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ESTABLISH_TIMEOUT_S = 30.0

_CONTAINER = {
    "type": "object",
    "required": ["name", "image"],
    "properties": {"name": {"type": "string"}, "image": {"type": "string"}},
}
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {
        "group": CUSTOM_GROUP,
        "scope": "Namespaced",
        "names": {"plural": CUSTOM_PLURAL, "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": CUSTOM_VERSION,
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "nodeName": {"type": "string"},
                                    "containers": {"type": "array", "items": _CONTAINER},
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}


def establish(backend: Backend) -> None:
    """Create the CRD (unless there) and wait, bounded, until it is Established."""
    r = backend.request("POST", CRDS, orjson.dumps(CRD))
    if r.status not in (201, 409):
        raise BackendError(f"creating CRD {CRD_NAME}: HTTP {r.status} {r.body[:200]!r}")
    deadline = time.monotonic() + ESTABLISH_TIMEOUT_S
    while time.monotonic() < deadline:
        r = backend.request("GET", f"{CRDS}/{CRD_NAME}")
        conditions = orjson.loads(r.body).get("status", {}).get("conditions", []) if r.status == 200 else []
        served = backend.request("GET", f"/apis/{CUSTOM_GROUP}/{CUSTOM_VERSION}/{CUSTOM_PLURAL}?limit=1")
        if served.status == 200 and any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return
        time.sleep(0.2)
    raise BackendError(f"CRD {CRD_NAME} was not Established within {ESTABLISH_TIMEOUT_S:.0f}s")


def run(ctx: Context, backend: Backend, namespaces: list[str]) -> dict[str, Any]:
    establish(backend)
    return {
        "creates": creates.run(ctx, backend, namespaces, kind=CUSTOM_PLURAL),
        "throughput": throughput.run(ctx, backend, namespaces, kind=CUSTOM_PLURAL),
    }


def ratios(phases: dict[str, Any], backend: str) -> dict[str, float | None]:
    """Widgets over pods, per figure, for `backend` (None where a phase did not run)."""
    custom = phases.get("custom", {}).get(backend)
    pods_creates = phases.get("creates", {}).get(backend)
    pods_events = phases.get("throughput", {}).get(backend)

    def ratio(mine: float | None, theirs: float | None) -> float | None:
        return None if not mine or not theirs else mine / theirs

    return {
        "creates_per_s": ratio(
            custom and custom["creates"]["creates_per_s"], pods_creates and pods_creates["creates_per_s"]
        ),
        "events_per_s": ratio(
            custom and custom["throughput"]["events_per_s"], pods_events and pods_events["events_per_s"]
        ),
    }
