"""The decoding budgets at their lowest layer: `jsonbudget` (a value's JSON size and depth,
walked once and stopped at the budget), `yamlbody` (aliases expanded under the budget, depth
counted before recursing) and `negotiation.decode` (every body type, as the Status it answers)."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver import errors, jsonbudget
from apiserver.http import negotiation, yamlbody

LIMIT = jsonbudget.MAX_BYTES

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=40,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_measure_is_the_compact_json_size(value: Any) -> None:
    """Exact for ASCII text without escapes; numbers within a few bytes of their digits."""
    printed = orjson.dumps(value)
    measured = jsonbudget.measure(value)
    slack = 24 * _count_numbers(value)
    escapes = sum(1 for c in printed.decode() if not c.isascii() or not c.isprintable()) + printed.count(b"\\")
    assert len(printed) - slack - 6 * escapes <= measured <= len(printed) + slack


def _count_numbers(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_count_numbers(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_numbers(v) for v in value)
    return 1 if isinstance(value, int | float) and not isinstance(value, bool) else 0


def test_measure_stops_at_the_budget_on_shared_and_self_containing_values() -> None:
    shared: list[Any] = ["lol"] * 10
    for _ in range(12):  # 10^13 strings if expanded
        shared = [shared] * 10
    started = time.monotonic()
    with pytest.raises(jsonbudget.TooLarge) as caught:
        jsonbudget.measure(shared)
    assert caught.value.limit == LIMIT and caught.value.at_least > LIMIT
    assert time.monotonic() - started < 5
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(jsonbudget.TooDeep):
        jsonbudget.measure(loop)
    with pytest.raises(jsonbudget.TooLarge):
        jsonbudget.measure(loop, max_depth=1 << 30, max_bytes=10_000)


def test_measure_counts_depth_of_containers() -> None:
    value: Any = "leaf"
    for _ in range(100):
        value = [value]
    assert jsonbudget.measure(value) > 0
    with pytest.raises(jsonbudget.TooDeep):
        jsonbudget.measure([value])
    assert jsonbudget.measure(10**5000) > 5000 / 2  # never printed: Python refuses a 5000-digit str()


def test_tree_copy_unshares() -> None:
    inner = {"a": [1, 2]}
    value = {"x": inner, "y": [inner, inner]}
    copied = jsonbudget.tree_copy(value)
    assert copied == value
    assert copied["x"] is not copied["y"][0] and copied["y"][0] is not copied["y"][1]
    copied["x"]["a"].append(3)
    assert copied["y"][0]["a"] == [1, 2]


def laughs(levels: int) -> bytes:
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines).encode()


def test_yaml_aliases_expand_within_the_budget_and_are_unshared() -> None:
    (doc,) = yamlbody.load_documents(laughs(3))
    assert len(doc["l2"]) == 10 and doc["l2"][0] == [["lol"] * 10] * 10
    assert doc["l2"][0] is not doc["l2"][1]
    merged = yamlbody.load_documents(b"base: &b {x: 1, y: 2}\nc: {<<: *b, z: 3}\n")[0]
    assert merged["c"] == {"x": 1, "y": 2, "z": 3}


@pytest.mark.parametrize("levels", [6, 7, 12])
def test_yaml_aliases_past_the_budget_stop_before_expanding(levels: int) -> None:
    started = time.monotonic()
    with pytest.raises(yamlbody.YamlTooLarge):
        yamlbody.load_documents(laughs(levels))
    assert time.monotonic() - started < 1  # counted while composing: nothing was built


def test_yaml_budget_is_the_json_size() -> None:
    """A body just under the limit decodes; the same grown past it by aliases does not."""
    body = b"a: &a " + b"x" * 1_000_000 + b"\nb: *a\nc: *a\n"
    (doc,) = yamlbody.load_documents(body)
    assert doc["c"] == "x" * 1_000_000
    with pytest.raises(yamlbody.YamlTooLarge):
        yamlbody.load_documents(body + b"d: *a\n")


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,  # libyaml's own limit (1,000) or ours, whichever first
        b"[" * 101 + b"]" * 101,
        "".join(f"{' ' * i}a{i}:\n" for i in range(2_000)).encode(),
        "".join(f"{' ' * i}- \n" for i in range(500)).encode(),
    ],
)
def test_yaml_depth_is_refused_before_recursing(body: bytes) -> None:
    with pytest.raises(yamlbody.YamlTooDeep):
        yamlbody.load_documents(body)


def test_yaml_at_the_depth_limit_decodes() -> None:
    (doc,) = yamlbody.load_documents(b"[" * 100 + b"]" * 100)
    assert jsonbudget.measure(doc) == 200


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"1: a\ntrue: b\nnull: c\n1.5: d\n", {"1": "a", "true": "b", "null": "c", "1.5": "d"}),
        (
            b"d: 2001-01-01\nt: !!timestamp 2001-12-14t21:59:43.10-05:00\n",
            {"d": "2001-01-01", "t": "2001-12-14t21:59:43.10-05:00"},
        ),
        (b"b: !!binary aGVs\n  bG8=\n", {"b": "aGVsbG8="}),
        (b"s: !!set {a, b}\no: !!omap [a: 1, b: 2]\n", {"s": {"a": None, "b": None}, "o": [{"a": 1}, {"b": 2}]}),
    ],
)
def test_yaml_builds_only_what_json_holds(body: bytes, expected: dict[str, Any]) -> None:
    (doc,) = yamlbody.load_documents(body)
    assert doc == expected
    orjson.dumps(doc)


@pytest.mark.parametrize(
    "body",
    [b"a: &a [*a]\n", b"a: &a {b: *a}\n", b"? [1]\n: 2\n", b"a: " + b"1" * 5000 + b"\n", b"? {a: 1}\n: 2\n"],
)
def test_yaml_refusals_are_typed(body: bytes) -> None:
    with pytest.raises(yamlbody.YamlRefused):
        yamlbody.load_documents(body)


def _status(body: bytes, content_type: str, expect: type = dict) -> errors.StatusError:
    with pytest.raises(errors.StatusError) as caught:
        negotiation.decode(body, content_type, expect=expect)
    return caught.value


def test_decode_answers_413_in_kubes_words_for_what_a_body_expands_to() -> None:
    err = _status(laughs(8), "application/yaml")
    assert (err.code, err.reason) == (413, "RequestEntityTooLarge")
    assert err.message.startswith("Request entity too large: limit is 3145728")
    apply = _status(laughs(8), "application/apply-patch+yaml")
    assert apply.code == 413
    raw = _status(b" " * (LIMIT + 1), "application/json")
    assert raw.code == 413 and "limit is 3145728" in raw.message


def test_decode_answers_400_naming_the_depth_limit_for_json_and_yaml() -> None:
    for body, content_type in [
        (b"[" * 101 + b"]" * 101, "application/json"),
        (b"[" * 101 + b"]" * 101, "application/yaml"),
        (b"[" * 100_000 + b"]" * 100_000, "application/yaml"),
    ]:
        err = _status(body, content_type, expect=list)
        assert (err.code, err.message) == (400, "the body is nested deeper than 100 levels")


def test_decode_of_a_json_body_under_the_limit_is_measured_too() -> None:
    body = orjson.dumps({"a": ["x" * 1000] * 3000})  # 3 MB: under the byte limit, and its JSON too
    assert len(body) < LIMIT
    assert negotiation.decode(body, "application/json")["a"][0] == "x" * 1000


def test_decode_yaml_errors_are_400() -> None:
    for body in [b"a: *nowhere\n", b"a: &a [*a]\n", b"? [1]\n: 2\n", b"a: [1, 2"]:
        err = _status(body, "application/yaml")
        assert err.code == 400 and err.message.startswith("the body is not valid YAML"), err.message


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300) | st.text(alphabet="[]{}&*ab:- ,\n!<>'\"", max_size=300).map(str.encode))
def test_decode_of_any_yaml_answers_a_status_or_a_value(body: bytes) -> None:
    try:
        value = negotiation.decode(body, "application/yaml")
    except errors.StatusError as e:
        assert e.code in (400, 413), e
        return
    orjson.dumps(value)  # what decodes is JSON


def test_the_yaml_loader_is_the_safe_one() -> None:
    with pytest.raises(yaml.YAMLError):
        yamlbody.load_documents(b"a: !!python/object/apply:os.system ['true']\n")


def test_a_protobuf_envelope_whose_type_is_not_utf8_is_400() -> None:
    """Found by the body fuzz: proto2 strings that are not UTF-8 arrive as bytes (it was a 500)."""
    body = b'k8s\x00\n\x0f\n\x02\x801\x12\tConfigMap\x12\x12\n\x08\n\x06fp-567\x12\x06\n\x01a\x12\x01b\x1a\x00"\x00'
    err = _status(body, "application/vnd.kubernetes.protobuf")
    assert (err.code, err.message) == (
        400,
        "the protobuf body's runtime.Unknown typeMeta.apiVersion is not valid UTF-8",
    )
