"""A container's environment as kube's kubelet builds it: envFrom then env, $(VAR) expansion,
fieldRef / resourceFieldRef / ConfigMap and Secret keys, optional sources, and what a missing
source or a bad entry gets."""

from __future__ import annotations

import base64
import contextlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.kubelet.envvars import EnvError, Sources, build, expand, expand_sub_path, service_env, service_links
from machinery.objects import Obj

POD: Obj = {
    "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "labels": {"app": "web"}, "annotations": {}},
    "spec": {"nodeName": "n1", "serviceAccountName": "default"},
    "status": {"podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}], "hostIP": "192.168.1.2"},
}
CONFIG_MAPS = {("shop", "settings"): {"data": {"MODE": "fast", "LEVEL": "3", "bad key": "x"}}}
SECRETS = {("shop", "creds"): {"data": {"PASSWORD": base64.b64encode(b"s3cret").decode()}}}
SOURCES = Sources(lambda ns, n: CONFIG_MAPS.get((ns, n)), lambda ns, n: SECRETS.get((ns, n)))


def env_of(container: Obj) -> dict[str, str]:
    return build(POD, container, SOURCES).values


def test_expansion_as_kube_does_it() -> None:
    defined = {"A": "1", "B": "two"}
    assert expand("$(A)-$(B)", defined) == "1-two"
    assert expand("$$(A) costs $$5", defined) == "$(A) costs $5"
    assert expand("$(MISSING) and $(A", defined) == "$(MISSING) and $(A"
    assert expand("trailing $", defined) == "trailing $"
    assert expand("$x$(A)", defined) == "$x1"


def test_a_sub_path_expression_names_every_variable_it_lacks() -> None:
    """kube's ExpandContainerVolumeMounts: the syntax of command expansion, but an undefined or
    empty variable fails the start (conformance "Variable Expansion should verify that a failing
    subpath expansion can be modified": an annotation not there yet reads as empty)."""
    defined = {"POD": "p-1", "ANNOTATION": "", "DIR": "logs"}
    assert expand_sub_path("$(DIR)/$(POD)", defined) == "logs/p-1"
    assert expand_sub_path("$$(POD)/x$(", defined) == "$(POD)/x$("
    with pytest.raises(EnvError, match=r"^missing value for ANNOTATION, NOPE$"):
        expand_sub_path("$(NOPE)/$(ANNOTATION)/$(POD)", defined)


def test_env_from_then_env_in_order_with_references() -> None:
    c = {
        "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "APP_"}, {"secretRef": {"name": "creds"}}],
        "env": [
            {"name": "APP_MODE", "value": "slow"},  # overrides the ConfigMap's
            {"name": "URL", "value": "db://$(PASSWORD)@$(HOST)"},  # HOST is not defined yet
            {"name": "HOST", "value": "db"},
        ],
    }
    built = build(POD, c, SOURCES)
    assert built.values == {
        "APP_MODE": "slow",
        "APP_LEVEL": "3",
        "PASSWORD": "s3cret",
        "URL": "db://s3cret@$(HOST)",
        "HOST": "db",
    }
    assert built.invalid_keys == ["APP_bad key"]


def test_value_from_the_pod_and_its_resources() -> None:
    c = {
        "resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}},
        "env": [
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
            {"name": "REQ", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu"}}},
        ],
    }
    assert env_of(c) == {
        "POD": "web-1",
        "NS": "shop",
        "APP": "web",
        "IP": "10.0.0.7",
        "NODE": "n1",
        "CPUS": "2",  # 1.5 cores rounded up
        "MEM_MI": "1024",
        "REQ": "0",
    }


def test_optional_sources_are_skipped_and_required_ones_fail_the_start() -> None:
    c = {
        "envFrom": [{"configMapRef": {"name": "absent", "optional": True}}],
        "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "NOPE", "optional": True}}}],
    }
    assert env_of(c) == {}
    with pytest.raises(EnvError, match="couldn't find key NOPE in Secret shop/creds"):
        env_of({"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "NOPE"}}}]})
    with pytest.raises(EnvError, match='configmap "absent" not found'):
        env_of({"envFrom": [{"configMapRef": {"name": "absent"}}]})


@pytest.mark.parametrize(
    ("container", "says"),
    [
        ({"env": ["X=1"]}, r"container.env\[0\]: must be an object with a name"),
        ({"env": [{"name": "X", "valueFrom": {}}]}, r"container.env\[0\].valueFrom: names no source"),
        ({"env": [{"name": "X", "valueFrom": "x"}]}, r"container.env\[0\].valueFrom: must be an object"),
        (
            {"env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.secret"}}}]},
            r"fieldRef.fieldPath: unsupported field 'spec.secret'",
        ),
        (
            {"env": [{"name": "X", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}]},
            r"resourceFieldRef.resource: unsupported resource 'limits.gpu'",
        ),
        ({"envFrom": [7]}, r"container.envFrom\[0\]: must be an object"),
    ],
)
def test_bad_entries_are_refused_naming_the_field(container: Obj, says: str) -> None:
    with pytest.raises(EnvError, match=says):
        env_of(container)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="$()AB x", max_size=20))
def test_expansion_never_fails_and_leaves_text_without_dollars_alone(text: str) -> None:
    out = expand(text, {"A": "1"})
    if "$" not in text:
        assert out == text
    assert "$(A)" not in out or "$$(A)" in text  # a defined reference is always replaced unless escaped


def test_an_empty_key_reference_is_refused_not_crashed_on() -> None:
    with pytest.raises(EnvError, match='configmap "" not found'):
        env_of({"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {}}}]})
    with pytest.raises(EnvError, match=r"secretKeyRef: must be an object"):
        env_of({"env": [{"name": "X", "valueFrom": {"secretKeyRef": "creds"}}]})


junk = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["name", "value", "valueFrom", "fieldRef", "fieldPath", "configMapRef", "key", "prefix"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(junk, junk, junk)
def test_a_container_of_any_shape_gives_an_env_or_an_env_error(env: Any, env_from: Any, resources: Any) -> None:
    with contextlib.suppress(EnvError):  # anything else fails the test
        build(POD, {"env": env, "envFrom": env_from, "resources": resources}, SOURCES)


API_SERVICE: Obj = {
    "metadata": {"name": "kubernetes", "namespace": "default"},
    "spec": {
        "clusterIP": "10.96.0.1",
        "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
    },
}
API_ENDPOINTS: Obj = {
    "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]
}


def test_kubernetes_service_variables_point_at_its_endpoints() -> None:
    """kube's names (pkg/kubelet/envvars), the endpoints' address and port as values: no service
    proxy runs, so the ClusterIP would be unreachable from our host-network pods."""
    assert service_env(API_SERVICE, API_ENDPOINTS) == {
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": "6443",
        "KUBERNETES_PORT": "tcp://127.0.0.1:6443",
        "KUBERNETES_SERVICE_PORT_HTTPS": "6443",
        "KUBERNETES_PORT_443_TCP": "tcp://127.0.0.1:6443",
        "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
        "KUBERNETES_PORT_443_TCP_PORT": "6443",
        "KUBERNETES_PORT_443_TCP_ADDR": "127.0.0.1",
    }
    # no endpoints yet: the ClusterIP and the Service's port, as kube's kubelet gives them
    assert service_env(API_SERVICE, None)["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert service_env(API_SERVICE, {"subsets": [{"addresses": [], "ports": []}]})["KUBERNETES_PORT"] == (
        "tcp://10.96.0.1:443"
    )
    headless = {"metadata": {"name": "kubernetes"}, "spec": {"clusterIP": "None", "ports": [{"port": 443}]}}
    assert service_env(headless, API_ENDPOINTS) == {}


def test_service_variables_sit_below_the_pods_own_and_expand_in_them() -> None:
    sources = Sources(lambda ns, n: None, lambda ns, n: None, service_env=service_env(API_SERVICE, API_ENDPOINTS))
    container = {
        "name": "c",
        "env": [
            {"name": "KUBERNETES_SERVICE_PORT", "value": "1"},
            {"name": "API", "value": "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_PORT_443_TCP_PORT)"},
        ],
    }
    got = build({"metadata": {"name": "p", "namespace": "ns"}}, container, sources).values
    assert got["KUBERNETES_SERVICE_PORT"] == "1" and got["API"] == "https://127.0.0.1:6443"
    assert got["KUBERNETES_SERVICE_HOST"] == "127.0.0.1" and list(got)[:2] == ["KUBERNETES_SERVICE_PORT", "API"]


def _service(name: str, namespace: str, cluster_ip: str, ports: list[Obj]) -> Obj:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"clusterIP": cluster_ip, "ports": ports}}


REDIS = _service("redis-primary", "shop", "10.96.5.6", [{"port": 6379}])  # one unnamed port
WEB = _service(
    "web", "shop", "10.96.7.8", [{"name": "http", "port": 80}, {"name": "udp-dns", "port": 53, "protocol": "UDP"}]
)
SHOP_SERVICES = [
    REDIS,
    WEB,
    _service("headless", "shop", "None", [{"port": 1}]),
    _service("external", "shop", "", [{"port": 1}]),
    _service("elsewhere", "other", "10.96.9.9", [{"port": 2}]),
]


def test_service_links_of_the_namespace_as_kube_names_them() -> None:
    """kube's pkg/kubelet/envvars: the first port unnamed-compatible, every named port, the docker
    link variables per port; headless, ExternalName and other namespaces' Services give none."""
    got = service_links(POD, SHOP_SERVICES, API_SERVICE, API_ENDPOINTS)
    assert {k: v for k, v in got.items() if k.startswith("REDIS_PRIMARY_")} == {
        "REDIS_PRIMARY_SERVICE_HOST": "10.96.5.6",
        "REDIS_PRIMARY_SERVICE_PORT": "6379",
        "REDIS_PRIMARY_PORT": "tcp://10.96.5.6:6379",
        "REDIS_PRIMARY_PORT_6379_TCP": "tcp://10.96.5.6:6379",
        "REDIS_PRIMARY_PORT_6379_TCP_PROTO": "tcp",
        "REDIS_PRIMARY_PORT_6379_TCP_PORT": "6379",
        "REDIS_PRIMARY_PORT_6379_TCP_ADDR": "10.96.5.6",
    }
    assert {k: v for k, v in got.items() if k.startswith("WEB_")} == {
        "WEB_SERVICE_HOST": "10.96.7.8",
        "WEB_SERVICE_PORT": "80",
        "WEB_SERVICE_PORT_HTTP": "80",
        "WEB_SERVICE_PORT_UDP_DNS": "53",
        "WEB_PORT": "tcp://10.96.7.8:80",
        "WEB_PORT_80_TCP": "tcp://10.96.7.8:80",
        "WEB_PORT_80_TCP_PROTO": "tcp",
        "WEB_PORT_80_TCP_PORT": "80",
        "WEB_PORT_80_TCP_ADDR": "10.96.7.8",
        "WEB_PORT_53_UDP": "udp://10.96.7.8:53",
        "WEB_PORT_53_UDP_PROTO": "udp",
        "WEB_PORT_53_UDP_PORT": "53",
        "WEB_PORT_53_UDP_ADDR": "10.96.7.8",
    }
    assert got["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"  # the API's endpoints, our decision
    assert not any(k.startswith(("HEADLESS_", "EXTERNAL_", "ELSEWHERE_")) for k in got)
    v6 = _service("v6", "shop", "fd00::1", [{"port": 80}])
    assert service_links(POD, [v6], None, None)["V6_PORT"] == "tcp://[fd00::1]:80"


def test_service_links_off_keeps_only_the_api_service() -> None:
    pod = {**POD, "spec": {**POD["spec"], "enableServiceLinks": False}}
    got = service_links(pod, SHOP_SERVICES, API_SERVICE, API_ENDPOINTS)
    assert got == service_env(API_SERVICE, API_ENDPOINTS)
    assert service_links(pod, SHOP_SERVICES, None, None) == {}


def test_the_api_service_keeps_its_endpoints_and_a_namespace_kubernetes_service_replaces_it() -> None:
    in_default = {"metadata": {"name": "p", "namespace": "default"}, "spec": {}}
    listed_api = {**API_SERVICE}  # the informer's copy of default/kubernetes: not read twice
    assert service_links(in_default, [listed_api], API_SERVICE, API_ENDPOINTS)["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    own = _service("kubernetes", "shop", "10.96.1.1", [{"port": 8080}])
    assert service_links(POD, [own], API_SERVICE, API_ENDPOINTS)["KUBERNETES_SERVICE_PORT"] == "8080"  # as kube's


def test_the_pods_env_and_env_from_win_over_service_links() -> None:
    links = service_links(POD, [REDIS], None, None)
    sources = Sources(lambda ns, n: CONFIG_MAPS.get((ns, n)), lambda ns, n: None, service_env=links)
    container = {
        "envFrom": [{"prefix": "REDIS_PRIMARY_", "configMapRef": {"name": "settings"}}],
        "env": [
            {"name": "REDIS_PRIMARY_SERVICE_HOST", "value": "mine"},
            {"name": "URL", "value": "redis://$(REDIS_PRIMARY_SERVICE_HOST):$(REDIS_PRIMARY_SERVICE_PORT)"},
        ],
    }
    got = build(POD, container, sources).values
    assert got["REDIS_PRIMARY_MODE"] == "fast" and got["REDIS_PRIMARY_SERVICE_HOST"] == "mine"
    assert got["URL"] == "redis://mine:6379" and got["REDIS_PRIMARY_PORT_6379_TCP_ADDR"] == "10.96.5.6"


def test_unset_limits_read_the_nodes_allocatable_with_the_divisor() -> None:
    """kube's downward API defaulting: a container without a limit may use what the node has."""
    sources = Sources(lambda ns, n: None, lambda ns, n: None, allocatable={"cpu": "3500m", "memory": "2Gi"})
    container = {
        "resources": {"requests": {"cpu": "250m"}},
        "env": [
            # a zero divisor is 1 (conformance's pods send Go's zero Quantity, "0")
            {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "0"}}},
            {"name": "CPU_M", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "1m"}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
            {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
            {"name": "REQ_M", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}},
            {"name": "MEM_REQ", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory"}}},
        ],
    }
    assert build(POD, container, sources).values == {
        "CPU": "4",  # 3.5 cores rounded up
        "CPU_M": "3500",
        "MEM": str(2 * 1024**3),
        "MEM_MI": "2048",
        "REQ_M": "250",
        "MEM_REQ": "0",  # an unset request is not defaulted
    }
    set_limit = {"resources": {"limits": {"memory": "1Gi"}}, "env": container["env"][3:4]}
    assert build(POD, set_limit, sources).values == {"MEM_MI": "1024"}  # a set limit wins
