"""`spec.securityContext.sysctls`: kube refuses malformed and repeated names at create
(conformance "Sysctls should reject invalid sysctls"), whatever the values."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.resources._podspec import SYSCTL_NAME, validate_pod_spec


def spec_with(sysctls: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "busybox"}], "securityContext": {"sysctls": sysctls}}


def test_the_conformance_pod_is_refused_for_its_two_malformed_names_only() -> None:
    sysctls = [
        {"name": "foo-", "value": "bar"},
        {"name": "kernel.shmmax", "value": "100000000"},
        {"name": "safe-and-unsafe", "value": "100000000"},
        {"name": "bar..", "value": "42"},
    ]
    causes = validate_pod_spec(spec_with(sysctls), "spec")
    assert [(c.field, c.reason) for c in causes] == [
        ("spec.securityContext.sysctls[0].name", "FieldValueInvalid"),
        ("spec.securityContext.sysctls[3].name", "FieldValueInvalid"),
    ]
    text = " ".join(c.message for c in causes)
    assert 'Invalid value: "foo-"' in text and 'Invalid value: "bar.."' in text
    assert "safe-and-unsafe" not in text and "kernel.shmmax" not in text


def test_slash_separated_names_are_valid_and_a_name_appears_once() -> None:
    ok = [{"name": "net/ipv4/ip_forward", "value": "1"}, {"name": "kernel.msgmax", "value": "1"}]
    assert validate_pod_spec(spec_with(ok), "spec") == []
    causes = validate_pod_spec(spec_with([*ok, {"name": "kernel.msgmax", "value": "2"}]), "spec")
    assert [(c.field, c.reason) for c in causes] == [("spec.securityContext.sysctls[2].name", "FieldValueDuplicate")]


def test_missing_overlong_and_mistyped_names_are_causes() -> None:
    causes = validate_pod_spec(spec_with([{"value": "1"}, {"name": "a" * 254}, {"name": 5}, "x"]), "spec")
    assert [(c.field, c.reason) for c in causes] == [
        ("spec.securityContext.sysctls[0].name", "FieldValueRequired"),
        ("spec.securityContext.sysctls[1].name", "FieldValueInvalid"),
        ("spec.securityContext.sysctls[2].name", "FieldValueInvalid"),
        ("spec.securityContext.sysctls[3]", "FieldValueInvalid"),
        ("spec.securityContext.sysctls[3].name", "FieldValueRequired"),
    ]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_name_is_judged_by_the_grammar_and_never_raises(name: str) -> None:
    causes = validate_pod_spec(spec_with([{"name": name, "value": "1"}]), "spec")
    valid = bool(name) and len(name) <= 253 and SYSCTL_NAME.fullmatch(name) is not None
    assert (causes == []) == valid
