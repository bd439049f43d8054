"""The Kubernetes protobuf schema at run time: descriptors, Go JSON rules, kinds.

`k8s.desc` (upstream field numbers) and `k8s_go.json` (the Go struct tags' JSON names and
omitempty/pointer/slice/map/inline flags) are made by `build_descriptors.py` from the
upstream sources; this module loads them once and answers "which message is this kind" and
"how does Go print this field".
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

HERE = Path(__file__).resolve().parent

META = "k8s.io.apimachinery.pkg.apis.meta.v1"
TIME = f"{META}.Time"
MICRO_TIME = f"{META}.MicroTime"
DURATION = f"{META}.Duration"
FIELDS_V1 = f"{META}.FieldsV1"
QUANTITY = "k8s.io.apimachinery.pkg.api.resource.Quantity"
QUANTITY_VALUE = "k8s.io.apimachinery.pkg.api.resource.QuantityValue"
INT_OR_STRING = "k8s.io.apimachinery.pkg.util.intstr.IntOrString"
RAW_EXTENSION = "k8s.io.apimachinery.pkg.runtime.RawExtension"
UNKNOWN = "k8s.io.apimachinery.pkg.runtime.Unknown"
APIEXTENSIONS = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1"
JSON_VALUE = f"{APIEXTENSIONS}.JSON"  # any JSON value, as raw bytes (a schema's default, enum, example)
# a JSON schema's unions: the schema when it is set, else the other member
PROPS_OR_BOOL = f"{APIEXTENSIONS}.JSONSchemaPropsOrBool"  # additionalProperties: a schema or a bool
PROPS_OR_ARRAY = f"{APIEXTENSIONS}.JSONSchemaPropsOrArray"  # items: a schema or an array of schemas
PROPS_OR_STRINGS = f"{APIEXTENSIONS}.JSONSchemaPropsOrStringArray"  # dependencies: a schema or names
SCHEMA_UNIONS = frozenset({PROPS_OR_BOOL, PROPS_OR_ARRAY, PROPS_OR_STRINGS})

# messages whose Go type has its own JSON form (a string, a number, raw JSON)
SPECIAL = frozenset(
    {TIME, MICRO_TIME, DURATION, FIELDS_V1, QUANTITY, QUANTITY_VALUE, INT_OR_STRING, RAW_EXTENSION, JSON_VALUE}
)

# API group -> proto package prefix (the version is appended)
GROUP_PACKAGES = {
    "": "k8s.io.api.core",
    "apps": "k8s.io.api.apps",
    "batch": "k8s.io.api.batch",
    "rbac.authorization.k8s.io": "k8s.io.api.rbac",
    "coordination.k8s.io": "k8s.io.api.coordination",
    "discovery.k8s.io": "k8s.io.api.discovery",
    "events.k8s.io": "k8s.io.api.events",
    "scheduling.k8s.io": "k8s.io.api.scheduling",
    "policy": "k8s.io.api.policy",
    "networking.k8s.io": "k8s.io.api.networking",
    "autoscaling": "k8s.io.api.autoscaling",
    "admissionregistration.k8s.io": "k8s.io.api.admissionregistration",
    "authentication.k8s.io": "k8s.io.api.authentication",
    "authorization.k8s.io": "k8s.io.api.authorization",
    "storage.k8s.io": "k8s.io.api.storage",
    "certificates.k8s.io": "k8s.io.api.certificates",
    "node.k8s.io": "k8s.io.api.node",
    "flowcontrol.apiserver.k8s.io": "k8s.io.api.flowcontrol",
    "meta.k8s.io": "k8s.io.apimachinery.pkg.apis.meta",
    "apiextensions.k8s.io": "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions",
    "apiregistration.k8s.io": "k8s.io.kube_aggregator.pkg.apis.apiregistration",
}

# meta/v1 kinds that every group version carries (client-go sends DeleteOptions as `v1`,
# `apps/v1`, ... whatever the resource's group is)
META_KINDS = frozenset({"DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions", "GetOptions", "Status"})


@dataclass(frozen=True, slots=True)
class Field:
    """One proto field and what Go's encoding/json does with it."""

    name: str  # the proto field name
    json: str  # the Go JSON name ("" for an inline embedded struct)
    omitempty: bool
    inline: bool
    skip: bool  # json:"-"
    kind: str  # Go shape: p pointer, b []byte, s slice, m map, v value
    repeated: bool
    is_map: bool
    message: str  # the field's message type ("" for scalars)
    number: int


@dataclass(frozen=True, slots=True)
class Message:
    full_name: str
    fields: tuple[Field, ...]
    typemeta: bool  # the Go struct embeds TypeMeta: `apiVersion`/`kind` have no proto field
    slice_of: bool  # a named slice type (Verbs, ExtraValue): JSON is the `items` array


class Schema:
    def __init__(self, desc: bytes, go: dict[str, Any]) -> None:
        fds = descriptor_pb2.FileDescriptorSet()
        fds.ParseFromString(desc)
        self.pool = descriptor_pool.DescriptorPool()
        for fd in fds.file:
            self.pool.Add(fd)
        self.go_messages: dict[str, Any] = go["messages"]
        self.slices = frozenset(go["slices"])
        self.ref: str = go["ref"]

    def descriptor(self, full_name: str) -> Any:
        return self.pool.FindMessageTypeByName(full_name)

    @functools.cache  # noqa: B019 - one Schema per process
    def message_class(self, full_name: str) -> Any:
        return message_factory.GetMessageClass(self.descriptor(full_name))

    @functools.cache  # noqa: B019
    def message(self, full_name: str) -> Message:
        desc = self.descriptor(full_name)
        go = self.go_messages.get(full_name)
        fields: list[Field] = []
        for fd in desc.fields:
            is_map = fd.message_type is not None and fd.message_type.GetOptions().map_entry
            repeated = fd.is_repeated and not is_map
            msg = fd.message_type.full_name if fd.message_type is not None and not is_map else ""
            tag = go["f"].get(str(fd.number)) if go is not None else None
            if tag is None:
                # no Go struct (aliases such as core/v1 List): the proto name, omitted when unset
                json_name, flags = fd.name, "o" + ("m" if is_map else "s" if repeated else "p")
            else:
                json_name, flags = tag
            fields.append(
                Field(
                    name=fd.name,
                    json=json_name,
                    omitempty="o" in flags,
                    inline="i" in flags,
                    skip="x" in flags,
                    kind=flags[-1],
                    repeated=repeated,
                    is_map=is_map,
                    message=msg,
                    number=fd.number,
                )
            )
        return Message(
            full_name=full_name,
            fields=tuple(fields),
            typemeta=bool(go and go["tm"]),
            slice_of=full_name in self.slices,
        )

    @functools.cache  # noqa: B019
    def by_json(self, full_name: str) -> dict[str, tuple[Field, ...]]:
        """JSON key -> the chain of fields that reaches it (inline structs flattened; the
        shallower field wins a name clash, as in encoding/json)."""
        out: dict[str, tuple[Field, ...]] = {}
        inline: list[Field] = []
        for f in self.message(full_name).fields:
            if f.skip:
                continue
            if f.inline:
                inline.append(f)
            else:
                out[f.json] = (f,)
        for f in inline:
            for key, chain in self.by_json(f.message).items():
                out.setdefault(key, (f, *chain))
        return out

    def message_for(self, api_version: str, kind: str) -> str | None:
        """The proto message of a kind in a group version, or None when we have none."""
        group, _, version = api_version.rpartition("/")
        if kind in META_KINDS:
            return f"{META}.{kind}"
        prefix = GROUP_PACKAGES.get(group)
        if prefix is None or not version or not kind.isidentifier():
            return None
        full = f"{prefix}.{version}.{kind}"
        try:
            self.descriptor(full)
        except KeyError:
            return None
        return full


@functools.cache
def schema() -> Schema:
    """The process-wide schema, loaded on first use (~100 ms)."""
    desc = (HERE / "k8s.desc").read_bytes()
    go = json.loads((HERE / "k8s_go.json").read_text())
    return Schema(desc, go)
