"""What a pod requests: init containers, limits standing in for requests."""

from __future__ import annotations

from components.scheduler.resources import pod_requests
from tests.components.scheduler.support import pod


def test_init_containers_take_the_max_of_init_and_the_sum_of_app_containers() -> None:
    p = pod("p", cpu="100m", memory="64Mi")
    p["spec"]["containers"].append({"name": "d", "resources": {"requests": {"cpu": "200m"}}})
    p["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}}]
    r = pod_requests(p)
    assert (r.milli_cpu, r.memory) == (300, 1024**3)
    p["spec"]["initContainers"][0]["resources"]["requests"]["cpu"] = "1"
    assert pod_requests(p).milli_cpu == 1000


def test_limits_stand_in_for_missing_requests() -> None:
    p = pod("p")
    p["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2", "memory": "1Gi"}}
    assert pod_requests(p).milli_cpu == 2000
