"""A create's managedFields come from a one-walk fast path: it must equal the general
ownership computation (compare against nothing, then encode) for any object."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.patch import apply
from apiserver.patch.managed import UPDATE, key_for
from apiserver.patch.schema import UNKNOWN, meta_for

NOW = "2026-12-01T00:00:00Z"
POD = meta_for("", "v1", "Pod")

scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["a", "b", "TCP", "UDP"])
names = st.sampled_from(["c1", "c2", "c3"])
containers = st.lists(
    st.fixed_dictionaries(
        {"name": names},
        optional={
            "image": st.sampled_from(["i", "j"]),
            "ports": st.lists(
                st.fixed_dictionaries(
                    {"containerPort": st.integers(1, 3)}, optional={"protocol": st.sampled_from(["TCP", "UDP"])}
                ),
                max_size=3,
            ),
            "env": st.lists(st.fixed_dictionaries({"name": names}, optional={"value": scalars}), max_size=3),
            "args": st.lists(st.sampled_from(["x", "y"]), max_size=3),
        },
    ),
    max_size=3,
    unique_by=lambda c: c["name"],
)
free = st.recursive(
    scalars, lambda inner: st.dictionaries(st.sampled_from(["p", "q", "r"]), inner, max_size=3), max_leaves=8
)
pods = st.fixed_dictionaries(
    {"apiVersion": st.just("v1"), "kind": st.just("Pod")},
    optional={
        "metadata": st.fixed_dictionaries(
            {"name": st.just("p")},
            optional={
                "labels": st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"]), max_size=2),
                "finalizers": st.lists(st.sampled_from(["f1", "f2"]), max_size=2, unique=True),
                "namespace": st.just("default"),
            },
        ),
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "containers": containers,
                "nodeName": st.just("n1"),
                "nodeSelector": st.dictionaries(st.sampled_from(["k", "l"]), st.just("v"), max_size=2),
                "tolerations": st.lists(st.fixed_dictionaries({"key": st.sampled_from(["t1", "t2"])}), max_size=2),
                "weird": free,
            },
        ),
        "status": st.fixed_dictionaries({}, optional={"phase": st.just("Pending"), "extra": free}),
    },
)


def general(obj: dict[str, Any], meta: Any) -> dict[str, Any]:
    """The general path: what record_update computes for an update from an empty object."""
    managers: dict[Any, Any] = {}
    result = apply._without_managed_fields(dict(obj))
    apply._record(managers, {}, result, key_for("m", UPDATE, "v1", ""), meta, NOW)
    return apply._with_managed_fields(result, managers)


@settings(max_examples=300, deadline=None)
@given(obj=pods)
def test_fast_path_equals_the_general_path_for_pods(obj: dict[str, Any]) -> None:
    assert apply.record_update(None, obj, "m", NOW, meta=POD) == general(obj, POD)


@settings(max_examples=100, deadline=None)
@given(obj=st.dictionaries(st.sampled_from(["spec", "data"]), free, max_size=2).map(lambda o: {**o, "metadata": {}}))
def test_fast_path_equals_the_general_path_without_a_schema(obj: dict[str, Any]) -> None:
    assert apply.record_update(None, obj, "m", NOW, meta=UNKNOWN) == general(obj, UNKNOWN)
