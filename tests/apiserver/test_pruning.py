"""Unknown-field pruning against the kinds' schemas (apiserver/pruning.py), without a server.

What is dropped and what is kept follows kube's decoding into its Go types: only fields a struct
does not have go; free-form maps (labels, annotations, data, resource lists) and schema-less
values (managedFields' FieldsV1, IntOrString) keep everything.
"""

from __future__ import annotations

import copy
import timeit
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver import pruning
from apiserver.resources import catalog


def pod(**extra_container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web", "bogus": "a label is free-form"},
            "annotations": {"note": "x"},
            "managedFields": [
                {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:anything": {}}}}
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "nginx:1.27",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": "1", "example.com/gpu": "2"}},
                    "env": [{"name": "A", "value": "1"}],
                    "livenessProbe": {"httpGet": {"path": "/", "port": "http"}},
                    **extra_container,
                }
            ],
            "nodeSelector": {"disk": "ssd"},
        },
        "status": {"phase": "Pending"},
    }


def test_a_pod_that_has_only_known_fields_is_left_as_it_is() -> None:
    obj = pod()
    assert pruning.prune("", "v1", "Pod", obj) == []
    assert obj == pod()


def test_unknown_fields_are_dropped_at_every_level_and_named_in_document_order() -> None:
    obj = pod(bogus=2)
    obj["foo"] = "bar"
    obj["metadata"]["bogus"] = 1
    obj["spec"]["containers"][0]["ports"][0]["nope"] = True
    found = pruning.prune("", "v1", "Pod", obj)
    assert found == [
        "metadata.bogus",
        "spec.containers[0].ports[0].nope",
        "spec.containers[0].bogus",
        "foo",
    ]
    assert obj == pod()  # and nothing else moved: labels' "bogus" key is data, not a field


def test_a_configmap_keeps_its_data_keys_and_loses_foo() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"foo": "bar"}, "foo": "bar"}
    assert pruning.prune("", "v1", "ConfigMap", cm) == ["foo"]
    assert cm == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"foo": "bar"}}


def test_deployment_template_is_pruned_as_a_pod_spec() -> None:
    d = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "unknownMeta": "x"},
        "spec": {
            "unknown1": "v",
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "n", "image": "i", "unknownNested": "v"}]},
            },
        },
    }
    assert pruning.prune("apps", "v1", "Deployment", d) == [
        "metadata.unknownMeta",
        "spec.unknown1",
        "spec.template.spec.containers[0].unknownNested",
    ]
    assert d["spec"]["template"]["spec"]["containers"] == [{"name": "n", "image": "i"}]


def test_values_of_a_map_of_structs_are_pruned_too() -> None:
    # ResourceQuota status is maps of quantities (free-form); a Secret's data likewise
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dg=="}, "x": 1}
    assert pruning.prune("", "v1", "Secret", secret) == ["x"]
    assert secret["data"] == {"k": "dg=="}


def test_apply_paths_name_associative_list_items_by_their_keys() -> None:
    obj = pod(bogus=2)
    obj["foo"] = 1
    assert pruning.prune("", "v1", "Pod", obj, apply_paths=True) == ['.spec.containers[name="c"].bogus', ".foo"]
    assert pruning.not_declared([".foo"]) == ".foo: field not declared in schema"
    assert pruning.not_declared([".a", ".b"]) == (
        "errors:\n  .a: field not declared in schema\n  .b: field not declared in schema"
    )


def test_wrong_types_are_left_to_validation_never_an_exception() -> None:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": "nope", "spec": {"containers": {"a": 1}}}
    assert pruning.prune("", "v1", "Pod", obj) == []
    assert obj["spec"] == {"containers": {"a": 1}}


def test_a_kind_without_a_schema_is_not_pruned() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "anything": {"goes": 1}}
    assert pruning.prune("example.com", "v1", "Widget", obj) == []
    assert obj["anything"] == {"goes": 1}


def test_the_names_reported_are_bounded_but_every_unknown_field_is_dropped() -> None:
    cm: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    cm.update({f"f{i}": i for i in range(10_000)})
    found = pruning.prune("", "v1", "ConfigMap", cm)
    assert len(found) == pruning.MAX_REPORTED
    assert set(cm) == {"apiVersion", "kind", "metadata"}


def test_every_served_kind_compiles() -> None:
    for r in catalog():
        if r.computed:
            continue  # never written: nothing to prune
        obj = {"apiVersion": r.group_version, "kind": r.kind, "metadata": {"name": "x", "zz": 1}, "zz": 1}
        assert pruning.prune(r.group, r.version, r.kind, obj) == ["metadata.zz", "zz"], r.kind


def test_pruning_a_typical_pod_costs_microseconds() -> None:
    """The create path prunes every body: a walk of a typical pod must stay far below the
    ~700 us a create costs end to end (measured ~6 us on the machine this was written on)."""
    template = pod()
    copies = [copy.deepcopy(template) for _ in range(2000)]
    it = iter(copies)
    seconds = timeit.timeit(lambda: pruning.prune("", "v1", "Pod", next(it)), number=len(copies))
    per_call_us = seconds / len(copies) * 1e6
    assert per_call_us < 200, per_call_us


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["spec", "metadata", "containers", "name", "labels", "bogus", "image", "status", "x"]),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_pruning_never_raises_and_is_idempotent(body: Any) -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", **(body if isinstance(body, dict) else {"spec": body})}
    pruning.prune("", "v1", "Pod", obj)
    again = copy.deepcopy(obj)
    assert pruning.prune("", "v1", "Pod", again) == []
    assert again == obj
