"""A CustomResourceDefinition in protobuf (client-go's apiextensions clientset sends nothing
else): its JSON schema's unions and raw JSON values come back as the JSON that was sent."""

from __future__ import annotations

import copy
from typing import Any

from apiserver.protobuf import decode_body, encode_object
from tests.apiserver.crd.test_crd_serving import widget_crd


def test_a_crd_round_trips_through_protobuf_with_every_schema_union() -> None:
    crd = widget_crd()
    crd["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    spec["properties"]["tags"]["items"] = {"type": "string", "enum": ["a", 1, None, {"k": [True]}]}
    spec["properties"]["labels"] = {"type": "object", "additionalProperties": {"type": "string"}}
    spec["properties"]["closed"] = {"type": "object", "additionalProperties": False}
    spec["properties"]["size"]["multipleOf"] = 0.5
    spec["dependencies"] = {"size": ["color"], "color": {"required": ["size"]}}
    crd["status"] = {
        "conditions": [{"type": "Established", "status": "True", "lastTransitionTime": "2024-01-01T00:00:01Z"}],
        "acceptedNames": {"plural": "widgets", "kind": "Widget"},
        "storedVersions": ["v1"],
    }
    body = encode_object(copy.deepcopy(crd))
    assert body is not None
    assert decode_body(body) == crd
