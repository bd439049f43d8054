"""apiserver.protobuf: bodies kubectl really sent decode to the JSON kubectl prints for the same
object; hostile bytes get 400/413/415 and nothing else; JSON -> protobuf -> JSON is the
identity on what Go prints, for random messages of many kinds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apiserver.errors import StatusError
from apiserver.http import negotiation
from apiserver.protobuf import MAGIC, decode_body, encode_object, gotime
from apiserver.protobuf import build_descriptors as build
from apiserver.protobuf.schema import SPECIAL, UNKNOWN, schema
from apiserver.protobuf.to_json import to_json
from machinery.duration import format_duration, parse_duration

# Captured with `kubectl.1.33 -v=9` (request bodies) and `--dry-run=client -o json` (the same
# object as kubectl prints it) for deployment, secret, rolebinding, job, service; `create token`
# and `drain --disable-eviction --grace-period=0` have no JSON twin: expected values below.
GOLDEN = json.loads((Path(__file__).parent / "protobuf_golden.json").read_text())


def envelope(api_version: str, kind: str, raw: bytes, *, encoding: str = "", content_type: str = "") -> bytes:
    s = schema()
    msg = s.message_class(UNKNOWN)()
    msg.typeMeta.apiVersion, msg.typeMeta.kind = api_version, kind
    msg.raw, msg.contentEncoding, msg.contentType = raw, encoding, content_type
    return bytes(MAGIC + msg.SerializeToString())


def refused(body: bytes, code: int) -> str:
    with pytest.raises(StatusError) as e:
        decode_body(body)
    assert e.value.code == code, e.value
    return e.value.message


# -- what kubectl sends ---------------------------------------------------------------------


@pytest.mark.parametrize("name", [k for k, v in GOLDEN.items() if "json" in v])
def test_kubectl_bodies_decode_to_what_kubectl_prints(name: str) -> None:
    assert decode_body(bytes.fromhex(GOLDEN[name]["hex"])) == GOLDEN[name]["json"]


@pytest.mark.parametrize("name", [k for k, v in GOLDEN.items() if "json" in v])
def test_our_encoding_of_those_objects_decodes_back(name: str) -> None:
    obj = GOLDEN[name]["json"]
    body = encode_object(obj)
    assert body is not None and body.startswith(MAGIC)
    assert decode_body(body) == obj


def test_token_request_from_kubectl_create_token() -> None:
    assert decode_body(bytes.fromhex(GOLDEN["token"]["hex"])) == {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        # Go: BoundObjectRef is a pointer without omitempty, so a nil one prints null
        "spec": {"audiences": ["a"], "expirationSeconds": 3600, "boundObjectRef": None},
        "status": {"token": "", "expirationTimestamp": None},
    }


def test_drain_delete_options() -> None:
    assert decode_body(bytes.fromhex(GOLDEN["deleteoptions"]["hex"])) == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "gracePeriodSeconds": 0,
    }


# -- hostile bodies -------------------------------------------------------------------------


def configmap_raw(extra: bytes = b"", meta_extra: bytes = b"") -> bytes:
    meta = b"\x0a\x01x" + meta_extra  # ObjectMeta{name: "x"}
    return b"\x0a" + bytes([len(meta)]) + meta + extra


def test_a_body_without_the_magic_is_400() -> None:
    assert "magic bytes" in refused(b'{"kind": "ConfigMap"}', 400)


def test_garbage_and_truncation_are_400() -> None:
    assert "not a valid runtime.Unknown" in refused(MAGIC + b"\x0a\xff\xff", 400)
    full = bytes.fromhex(GOLDEN["deployment"]["hex"])
    assert "not a valid" in refused(full[:-1], 400)


def test_unknown_fields_are_refused_by_number_and_message() -> None:
    body = envelope("v1", "ConfigMap", configmap_raw(extra=b"\xf8\x06\x01"))  # field 111, varint
    message = refused(body, 400)
    assert "unknown field 111 (wire type 0) in k8s.io.api.core.v1.ConfigMap" in message
    nested = envelope("v1", "ConfigMap", configmap_raw(meta_extra=b"\xa0\x06\x05"))  # field 100 in ObjectMeta
    assert "unknown field 100 (wire type 0) in k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta at metadata" in (
        refused(nested, 400)
    )


def test_a_known_field_with_the_wrong_wire_type_is_refused() -> None:
    body = envelope("v1", "ConfigMap", b"\x08\x01")  # field 1 (metadata) as a varint
    assert "unknown field 1 (wire type 0) in k8s.io.api.core.v1.ConfigMap" in refused(body, 400)


def test_unknown_fields_in_the_envelope_are_refused() -> None:
    assert "k8s.io.apimachinery.pkg.runtime.Unknown" in refused(envelope("v1", "ConfigMap", b"") + b"\x28\x01", 400)


@pytest.mark.parametrize(
    ("api_version", "kind"),
    [("example.com/v1", "Widget"), ("v1", "Widget"), ("apps/v1", "Pod"), ("apps/v9", "Deployment"), ("v1", "a.b")],
)
def test_a_kind_we_have_no_schema_for_is_415(api_version: str, kind: str) -> None:
    message = refused(envelope(api_version, kind, b""), 415)
    assert f'kind "{kind}" in "{api_version}" are not supported' in message


def test_encodings_and_content_types_we_do_not_read_are_415() -> None:
    assert "gzip" in refused(envelope("v1", "ConfigMap", b"", encoding="gzip"), 415)
    assert "application/json" in refused(envelope("v1", "ConfigMap", b"", content_type="application/json"), 415)


def test_a_map_key_that_is_not_utf8_is_400() -> None:
    """Found by the body fuzz (a 500): protobuf decodes map keys only when they are read."""
    body = b'k8s\x00\n\x0f\n\x02v1\x12\tConfigMap\x12\x12\n\x08\n\x06fp-325\x12\x06\n\x01\x80\x12\x01b\x1a\x00"\x00'
    assert "data has a key that is not valid UTF-8" in refused(body, 400)


def test_a_body_with_no_kind_is_400() -> None:
    assert "does not name its kind" in refused(envelope("v1", "", b""), 400)


def test_expansion_is_bounded() -> None:
    # 1,000 empty containers are 2 bytes each on the wire and a dozen JSON keys each once printed
    spec = b"\x12\x00" * 1000
    pod = schema().message_class("k8s.io.api.core.v1.Pod")()
    pod.ParseFromString(b"\x12" + _varint(len(spec)) + spec)
    with pytest.raises(StatusError) as e:
        to_json(schema(), pod, budget=5000)
    assert e.value.code == 413
    assert len(to_json(schema(), pod)["spec"]["containers"]) == 1000


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200), st.booleans())
def test_random_bytes_only_ever_raise_status_errors(data: bytes, magic: bool) -> None:
    try:
        decode_body(MAGIC + data if magic else data)
    except StatusError as e:
        assert e.code in (400, 413, 415)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["Deployment", "Pod", "Service", "Secret"]), st.binary(max_size=300))
def test_random_object_bytes_only_ever_raise_status_errors(kind: str, raw: bytes) -> None:
    api_version = "apps/v1" if kind == "Deployment" else "v1"
    try:
        obj = decode_body(envelope(api_version, kind, raw))
    except StatusError as e:
        assert e.code in (400, 413)
    else:
        assert obj["kind"] == kind


# -- encoding -------------------------------------------------------------------------------


def test_status_and_lists_encode() -> None:
    status = StatusError(404, "NotFound", 'pods "p" not found', {"name": "p", "kind": "pods"}).to_status()
    assert decode_body(encode_object(status) or b"") == status
    items = [{"metadata": {"name": f"c{i}", "creationTimestamp": None}, "data": {"a": str(i)}} for i in range(3)]
    cm_list = {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": items}
    assert decode_body(encode_object(cm_list) or b"") == cm_list


def test_list_items_may_carry_their_kind() -> None:
    """Go's TypeMeta has no protobuf field: an item's kind/apiVersion is simply not sent."""
    item = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c", "creationTimestamp": None}}
    body = encode_object({"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": [item]})
    assert body is not None
    assert decode_body(body)["items"] == [{"metadata": {"name": "c", "creationTimestamp": None}}]


@pytest.mark.parametrize(
    "obj",
    [
        {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c"}, "surprise": 1},  # no such field
        {"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": 5}},  # wrong JSON type
        {"kind": "Deployment", "apiVersion": "apps/v1", "spec": {"replicas": 2**31}},  # out of int32
        {"kind": "Deployment", "apiVersion": "apps/v1", "spec": {"replicas": 1.5}},
        {"kind": "Pod", "apiVersion": "v1", "metadata": {"creationTimestamp": "yesterday"}},
        {"kind": "Secret", "apiVersion": "v1", "data": {"a": "not base64!"}},
        {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "rows": []},  # no protobuf for Tables
        {"kind": "Widget", "apiVersion": "example.com/v1"},
        {"apiVersion": "v1"},
    ],
)
def test_what_protobuf_cannot_carry_exactly_is_not_encoded(obj: dict[str, Any]) -> None:
    assert encode_object(obj) is None
    body, content_type = negotiation.encode(obj, negotiation.Wanted(protobuf=True))
    assert content_type == negotiation.JSON and json.loads(body) == obj


def test_quantities_given_as_numbers_are_sent_as_their_text() -> None:
    """Go parses a Quantity from a JSON number or string alike, so `1` and `"1"` are one value."""
    quota = {"kind": "ResourceQuota", "apiVersion": "v1", "spec": {"hard": {"cpu": 1, "memory": "1Gi"}}}
    assert decode_body(encode_object(quota) or b"")["spec"]["hard"] == {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("accept", "protobuf"),
    [
        ("application/vnd.kubernetes.protobuf,application/json", True),
        ("application/vnd.kubernetes.protobuf", True),
        ("application/json,application/vnd.kubernetes.protobuf", False),
        ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", False),
        ("*/*", False),
        (None, False),
    ],
)
def test_protobuf_is_answered_only_when_asked_first(accept: str | None, protobuf: bool) -> None:
    assert negotiation.wanted(accept).protobuf is protobuf


def test_a_protobuf_patch_is_415() -> None:
    with pytest.raises(StatusError) as e:
        negotiation.decode(b"k8s\x00", negotiation.PROTOBUF, expect=list)
    assert e.value.code == 415


# -- Go's JSON names and forms -----------------------------------------------------------------


def test_json_names_come_from_the_go_tags_not_the_proto_names() -> None:
    s = schema()
    ref = {f.number: f for f in s.message("k8s.io.api.networking.v1.IngressClassParametersReference").fields}
    assert (ref[1].name, ref[1].json) == ("aPIGroup", "apiGroup")
    webhooks = s.by_json("k8s.io.api.admissionregistration.v1.ValidatingWebhookConfiguration")
    assert webhooks["webhooks"][0].name == "Webhooks"
    volume = s.by_json("k8s.io.api.core.v1.Volume")  # VolumeSource is inline in Go, a field in protobuf
    assert [f.name for f in volume["secret"]] == ["volumeSource", "secret"]
    probe = s.by_json("k8s.io.api.core.v1.Probe")
    assert [f.name for f in probe["httpGet"]] == ["handler", "httpGet"]


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1100, "1.1µs"),
        (2_200_000, "2.2ms"),
        (3_300_000_000, "3.3s"),
        (245_000_000_000, "4m5s"),
        (245_001_000_000, "4m5.001s"),
        (18_367_001_000_000, "5h6m7.001s"),
        (480_000_000_001, "8m0.000000001s"),
        (3_600_000_000_000, "1h0m0s"),
        (2**63 - 1, "2562047h47m16.854775807s"),
        (-(2**63), "-2562047h47m16.854775808s"),
    ],
)
def test_durations_print_and_parse_as_go_does(ns: int, text: str) -> None:
    assert format_duration(ns) == text
    assert parse_duration(text) == ns


def test_times_print_as_kubernetes_does() -> None:
    assert gotime.format_time(0, 0, micro=False) == "1970-01-01T00:00:00Z"
    assert gotime.format_time(1_700_000_000, 123_456_789, micro=True) == "2023-11-14T22:13:20.123456Z"
    assert gotime.format_time(1_700_000_000, 123_456_789, micro=False) == "2023-11-14T22:13:20Z"
    assert gotime.parse_time("2023-11-14T23:13:20.5+01:00") == (1_700_000_000, 500_000_000)
    with pytest.raises(gotime.TimeError):
        gotime.parse_time("2023-13-01T00:00:00Z")
    with pytest.raises(gotime.TimeError):
        gotime.format_time(2**40, 0, micro=False)


def test_special_types_print_as_go_prints_them() -> None:
    body: dict[str, Any] = {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": {
            "name": "d",
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}, "time": "2024-05-01T10:00:00Z"}],
        },
        "spec": {
            "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
            "template": {
                "metadata": {"creationTimestamp": None},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "500m"}}}]},
            },
        },
        "status": {},
    }
    got = decode_body(encode_object(body) or b"")
    assert got["metadata"] == body["metadata"]
    assert got["spec"]["strategy"] == body["spec"]["strategy"]
    assert got["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "500m"}}
    # Go prints the non-pointer, non-omitempty fields it has: a nil selector is null
    assert got["spec"]["selector"] is None


# -- build_descriptors: our parser of the proto2 subset and of Go struct tags ----------------------


def test_the_proto_parser_reads_messages_and_maps() -> None:
    fd = build.parse_proto(
        """// c
        syntax = "proto2";
        package a.b;
        import "k8s.io/x/generated.proto";
        option go_package = "k8s.io/a/b";
        /* block */
        message M {
          optional string name = 1;
          repeated .a.c.Other others = 2;
          map<string, Other> byName = 3;
        }
        """,
        "k8s.io/a/b/generated.proto",
    )
    assert fd.package == "a.b" and list(fd.dependency) == ["k8s.io/x/generated.proto"]
    msg = fd.message_type[0]
    assert [(f.name, f.number) for f in msg.field] == [("name", 1), ("others", 2), ("byName", 3)]
    assert msg.field[1].type_name == ".a.c.Other"
    entry = msg.nested_type[0]
    assert entry.name == "ByNameEntry" and entry.options.map_entry
    assert msg.field[2].type_name == ".a.b.M.ByNameEntry" and entry.field[1].type_name == ".a.b.Other"


@pytest.mark.parametrize("text", ["enum E { A = 0; }", 'syntax = "proto3";', "message M { oneof x { } }"])
def test_the_proto_parser_refuses_what_it_does_not_know(text: str) -> None:
    with pytest.raises(build.ParseError):
        build.parse_proto(text, "x.proto")


def test_the_go_tag_parser_reads_json_names_and_shapes() -> None:
    structs, named = build.parse_go(
        [
            """
type List []string
type S struct {
	metav1.TypeMeta `json:",inline"`
	// A comment with a `backtick` and a { brace
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	Ptr *int32 `json:"ptr,omitempty" protobuf:"varint,2,opt,name=ptr"`
	Items List `json:"items,omitempty" protobuf:"bytes,3,rep,name=items"`
	Data map[string][]byte `json:"data" protobuf:"bytes,4,rep,name=data"`
	Raw []byte `json:"-" protobuf:"bytes,5,opt,name=raw"`
	Inner `json:",inline" protobuf:"bytes,6,opt,name=inner"`
	APIGroup *string `json:"apiGroup,omitempty" protobuf:"bytes,7,opt,name=aPIGroup"`
	hidden int
}
"""
        ]
    )
    s = structs["S"]
    assert s.typemeta and named == {"List": "[]string"}
    assert [(f.number, f.json, f.flags) for f in s.fields] == [
        (1, "name", "v"),
        (2, "ptr", "op"),
        (3, "items", "os"),
        (4, "data", "m"),
        (5, "-", "xb"),
        (6, "", "iv"),
        (7, "apiGroup", "op"),
    ]


# -- round trips: JSON -> protobuf -> JSON ------------------------------------------------------

KINDS = [
    ("apps/v1", "Deployment"),
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "Secret"),
    ("v1", "Node"),
    ("batch/v1", "CronJob"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("coordination.k8s.io/v1", "Lease"),
    ("events.k8s.io/v1", "Event"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("networking.k8s.io/v1", "Ingress"),
    ("policy/v1", "PodDisruptionBudget"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    ("authentication.k8s.io/v1", "TokenRequest"),
    ("authorization.k8s.io/v1", "SubjectAccessReview"),
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("policy/v1", "Eviction"),
    ("autoscaling/v1", "Scale"),
    ("meta.k8s.io/v1", "DeleteOptions"),
]

_TEXT = st.text(st.characters(codec="utf-8"), max_size=4)


def _fill_random(data: st.DataObject, msg: Any, depth: int) -> None:
    """A random message as Go could send it: every field maybe set, specials well formed."""
    name = msg.DESCRIPTOR.full_name
    if name in SPECIAL:
        _fill_special(data, name, msg)
        return
    for fd in msg.DESCRIPTOR.fields:
        if not data.draw(st.booleans()):
            continue
        is_map = fd.message_type is not None and fd.message_type.GetOptions().map_entry
        if fd.message_type is not None and not is_map and depth <= 0 and fd.message_type.full_name not in SPECIAL:
            continue
        if is_map:
            value_fd = fd.message_type.fields_by_name["value"]
            entries = getattr(msg, fd.name)
            for key in data.draw(st.lists(_TEXT, max_size=2)):
                if value_fd.message_type is not None:
                    _fill_random(data, entries[key], depth - 1)
                else:
                    entries[key] = data.draw(_scalar(value_fd))
        elif fd.is_repeated:
            items = getattr(msg, fd.name)
            for _ in range(data.draw(st.integers(0, 2))):
                if fd.message_type is not None:
                    _fill_random(data, items.add(), depth - 1)
                else:
                    items.append(data.draw(_scalar(fd)))
        elif fd.message_type is not None:
            sub = getattr(msg, fd.name)
            sub.SetInParent()
            _fill_random(data, sub, depth - 1)
        else:
            setattr(msg, fd.name, data.draw(_scalar(fd)))


def _scalar(fd: Any) -> st.SearchStrategy[Any]:
    if fd.type == fd.TYPE_STRING:
        return _TEXT
    if fd.type == fd.TYPE_BYTES:
        return st.binary(max_size=4)
    if fd.type == fd.TYPE_BOOL:
        return st.booleans()
    if fd.type == fd.TYPE_INT32:
        return st.integers(-(2**31), 2**31 - 1)
    if fd.type == fd.TYPE_DOUBLE:
        return st.integers(-1000, 1000).map(float)
    return st.integers(-(2**63), 2**63 - 1)


def _fill_special(data: st.DataObject, name: str, msg: Any) -> None:
    short = name.rsplit(".", 1)[-1]
    if short in ("Time", "MicroTime"):
        msg.seconds = data.draw(st.integers(0, 253402300799))
        msg.nanos = data.draw(st.integers(0, 999_999)) * 1000 if short == "MicroTime" else 0
    elif short == "Duration":
        msg.duration = data.draw(st.integers(-(2**63), 2**63 - 1))
    elif short in ("Quantity", "QuantityValue"):
        msg.string = data.draw(st.sampled_from(["1", "500m", "1Gi", "2k"]))
    elif short == "IntOrString":
        if data.draw(st.booleans()):
            msg.type, msg.strVal = 1, data.draw(_TEXT)
        else:
            msg.type, msg.intVal = 0, data.draw(st.integers(-(2**31), 2**31 - 1))
    elif short == "RawExtension":
        msg.raw = json.dumps(data.draw(st.dictionaries(_TEXT, st.integers(), max_size=2))).encode()
    else:  # FieldsV1
        msg.Raw = json.dumps({"f:spec": {}}).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(KINDS), st.data())
def test_json_to_protobuf_to_json_is_the_identity_on_what_go_prints(kind: tuple[str, str], data: Any) -> None:
    api_version, name = kind
    s = schema()
    full = s.message_for(api_version, name)
    assert full is not None
    msg = s.message_class(full)()
    _fill_random(data, msg, depth=5)
    first = decode_body(envelope(api_version, name, msg.SerializeToString()))
    body = encode_object(first)
    assert body is not None, first
    assert decode_body(body) == first
