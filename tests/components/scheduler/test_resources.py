"""What a pod requests, in the scheduler's units: machinery.podresources' rule (tested there),
taken into millicores and bytes, and the non-zero requests scoring counts."""

from __future__ import annotations

from components.scheduler.resources import DEFAULT_MEMORY_REQUEST, non_zero_requests, pod_requests, resources_of
from tests.components.scheduler.support import pod


def test_init_containers_take_the_max_of_init_and_the_sum_of_app_containers() -> None:
    p = pod("p", cpu="100m", memory="64Mi")
    p["spec"]["containers"].append({"name": "d", "resources": {"requests": {"cpu": "200m"}}})
    p["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}]
    r = pod_requests(p)
    assert (r.milli_cpu, r.memory) == (300, 1024**3)
    p["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] = "1"
    assert pod_requests(p).milli_cpu == 1000


def test_sidecars_and_overhead_count_and_units_round_up() -> None:
    p = pod("p", cpu="100m")
    p["spec"]["initContainers"] = [
        {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "0.0005", "memory": "1.5"}}}
    ]
    p["spec"]["overhead"] = {"ephemeral-storage": "1k"}
    r = pod_requests(p)
    assert (r.milli_cpu, r.memory, r.ephemeral_storage) == (101, 2, 1000)


def test_limits_stand_in_for_missing_requests() -> None:
    p = pod("p")
    p["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2", "memory": "1Gi"}}
    assert pod_requests(p).milli_cpu == 2000


def test_scoring_counts_defaults_for_every_container_that_states_no_request() -> None:
    p = pod("p", cpu="300m")
    p["spec"]["initContainers"] = [{"name": "s", "restartPolicy": "Always"}]
    assert non_zero_requests(p) == (400, 2 * DEFAULT_MEMORY_REQUEST)
    assert (pod_requests(p).milli_cpu, pod_requests(p).memory) == (300, 0)


def test_scalar_resources_are_counted_by_name_in_whole_units() -> None:
    p = pod("p", cpu="100m", extra={"example.com/fakecpu": "200", "hugepages-2Mi": "4Mi", "kubernetes.io/x": "1"})
    p["spec"]["containers"][0]["resources"]["limits"] = {"example.com/gpu": "2"}  # requests default to limits
    p["spec"]["containers"][0]["resources"]["requests"]["example.com/none"] = "0"  # zero: as if absent
    p["spec"]["containers"][0]["resources"]["requests"]["requests.example.com/q"] = "1"  # a quota name: ignored
    r = pod_requests(p)
    assert r.scalars == (
        ("example.com/fakecpu", 200),
        ("example.com/gpu", 2),
        ("hugepages-2Mi", 4 * 1024**2),
        ("kubernetes.io/x", 1),
    )
    assert r.milli_cpu == 100


def test_a_node_offers_the_scalars_its_allocatable_lists() -> None:
    alloc = {"cpu": "2", "pods": "10", "example.com/fakecpu": "1k", "example.com/bad": "x", "foo": "3"}
    r = resources_of(alloc)
    assert r.scalars == (("example.com/fakecpu", 1000),)  # unparsable and unknown plain names: none
    assert (r + r).scalar("example.com/fakecpu") == 2000
    assert (r - r).scalars == () and r.scalar("example.com/other") == 0
