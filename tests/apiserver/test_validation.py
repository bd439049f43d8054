"""The shared checks word their causes exactly as kube-apiserver does (kubectl prints them verbatim)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver import validation as v
from apiserver.errors import Cause, invalid


def messages(causes: list[Cause]) -> list[str]:
    return [f"{c.field}: {c.message}" if c.field else c.message for c in causes]


SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def test_subdomain_name_is_worded_as_kube() -> None:
    causes = v.validate_object_meta(
        {"metadata": {"name": "Foo_bar", "namespace": "default"}}, namespaced=True, name_fn=v.name_is_dns_subdomain
    )
    assert messages(causes) == [f'metadata.name: Invalid value: "Foo_bar": {SUBDOMAIN_MSG}']
    assert causes[0].reason == "FieldValueInvalid"
    err = invalid("Pod", "Foo_bar", causes)
    assert err.message == f'Pod "Foo_bar" is invalid: metadata.name: Invalid value: "Foo_bar": {SUBDOMAIN_MSG}'


def test_lengths() -> None:
    assert v.is_dns1123_subdomain("a" * 253) == []
    assert v.is_dns1123_subdomain("a" * 254) == ["must be no more than 253 characters"]
    assert v.is_dns1123_label("a" * 63) == []
    assert v.is_dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert v.is_dns1123_label("a.b") == ["must not contain dots"]
    assert v.is_dns1123_label("Ab") == [LABEL_MSG]
    assert v.is_dns1035_label("1abc") != [] and v.is_dns1035_label("abc-1") == []


def test_generate_name_prefix_may_end_in_a_dash() -> None:
    ok = v.validate_object_meta(
        {"metadata": {"generateName": "web-", "name": "web-x7k2p"}}, namespaced=False, name_fn=v.name_is_dns_label
    )
    assert ok == []
    bad = v.validate_object_meta({"metadata": {"generateName": "Web-"}}, namespaced=False, name_fn=v.name_is_dns_label)
    assert [c.field for c in bad] == ["metadata.generateName", "metadata.name"]
    assert bad[1].message == "Required value: name or generateName is required"


def test_namespace_required_iff_namespaced() -> None:
    missing = v.validate_object_meta({"metadata": {"name": "a"}}, namespaced=True, name_fn=v.name_is_dns_subdomain)
    assert messages(missing) == ["metadata.namespace: Required value"]
    extra = v.validate_object_meta(
        {"metadata": {"name": "a", "namespace": "x"}}, namespaced=False, name_fn=v.name_is_dns_subdomain
    )
    assert messages(extra) == ["metadata.namespace: Forbidden: not allowed on this type"]
    assert extra[0].reason == "FieldValueForbidden"


def test_labels_and_annotations() -> None:
    causes = v.validate_labels({"app": "ok", "bad key!": "x", "k": "-v"}, "metadata.labels")
    assert [c.field for c in causes] == ["metadata.labels", "metadata.labels"]
    assert causes[0].message.startswith('Invalid value: "bad key!": name part must consist of alphanumeric')
    assert causes[1].message.startswith('Invalid value: "-v": a valid label must be an empty string')
    assert v.validate_labels({"example.com/app": "", "a/b/c": "x"}, "l")[0].message.startswith(
        'Invalid value: "a/b/c": a qualified name must consist'
    )
    big = v.validate_annotations({"a": "x" * (256 * 1024)}, "metadata.annotations")
    assert messages(big) == ["metadata.annotations: Too long: may not be more than 262144 bytes"]
    assert big[0].reason == "FieldValueTooLong"


def test_enum_non_negative_immutable_duplicate() -> None:
    assert messages(v.validate_enum("X", "spec.restartPolicy", ("Always", "Never"))) == [
        'spec.restartPolicy: Unsupported value: "X": supported values: "Always", "Never"'
    ]
    assert v.validate_enum(None, "f", ("A",)) == []
    assert messages(v.validate_non_negative(-1, "spec.replicas")) == [
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    ]
    assert messages(v.validate_immutable({"a": {"b": 2}}, {"a": {"b": 1}}, "a.b")) == [
        "a.b: Invalid value: 2: field is immutable"
    ]
    dup = v.validate_unique([("c[0].name", "a"), ("c[1].name", "a")])
    assert messages(dup) == ['c[1].name: Duplicate value: "a"'] and dup[0].reason == "FieldValueDuplicate"
    assert v.required("x").reason == "FieldValueRequired"


def test_update_keeps_identity() -> None:
    old = {"metadata": {"name": "a", "uid": "1", "namespace": "n"}}
    new = {"metadata": {"name": "a", "uid": "2", "namespace": "n"}}
    causes = v.validate_object_meta(new, namespaced=True, name_fn=v.name_is_dns_subdomain, old=old)
    assert messages(causes) == ['metadata.uid: Invalid value: "2": field is immutable']


def test_wrong_types_are_causes_not_exceptions() -> None:
    causes = v.validate_object_meta(
        {"metadata": {"name": 5, "labels": ["x"], "finalizers": "f"}}, namespaced=False, name_fn=v.name_is_dns_label
    )
    fields = [c.field for c in causes]
    assert "metadata.name" in fields and "metadata.labels" in fields and "metadata.finalizers" in fields


def test_go_value() -> None:
    assert v.go_value({"app": "x", "a": "y"}) == 'map[string]string{"a":"y", "app":"x"}'
    assert v.go_value(True) == "true" and v.go_value(None) == "null" and v.go_value(3) == "3"


names = st.text(alphabet="abcxyzABC019-._/%", max_size=70)


@settings(max_examples=200, deadline=None)
@given(name=names)
def test_name_checks_agree_with_the_grammar(name: str) -> None:
    label_ok = re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) is not None and len(name) <= 63
    assert (v.is_dns1123_label(name) == []) == label_ok
    parts = name.split(".")
    subdomain_ok = len(name) <= 253 and all(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", p) for p in parts)
    assert (v.is_dns1123_subdomain(name) == []) == subdomain_ok
    for check in (v.is_qualified_name, v.is_label_value, v.is_config_key, v.is_port_name, v.is_dns1035_label):
        assert all(isinstance(m, str) and m for m in check(name))
    assert (v.name_is_path_segment(name, False) == []) == (name not in (".", "..") and not set(name) & {"/", "%"})
