"""The admission plugins' cases that HTTP cannot reach easily (mirror pods, a globalDefault
PriorityClass, exemptions), the request-scoped warnings, and kube's pod defaulting."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from apiserver import errors, warnings
from apiserver.admission.interface import AdmissionRequest, Operation
from apiserver.admission.node_restriction import NodeRestriction
from apiserver.admission.podsecurity.plugin import Exemptions, PodSecurity
from apiserver.admission.priority import Priority
from apiserver.auth.user import User
from apiserver.resources import core_pods
from apiserver.resources._podspec import default_template
from machinery.objects import Obj

PODS = core_pods.RESOURCE
KUBELET = User("system:node:n1", ("system:nodes",))


def request(
    op: Operation, obj: Obj | None, old: Obj | None = None, user: User = KUBELET, sub: str = ""
) -> AdmissionRequest:
    name = str(((obj or old or {}).get("metadata") or {}).get("name", ""))
    return AdmissionRequest(op, PODS, sub, "default", name, user, obj, old)


def refused(coro: Any) -> str:
    with pytest.raises(errors.StatusError) as e:
        asyncio.run(coro)
    assert e.value.code == 403
    return e.value.message


def mirror(**meta: Any) -> Obj:
    owner = {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u1", "controller": True}
    return {
        "metadata": {
            "name": "m",
            "annotations": {"kubernetes.io/config.mirror": "x"},
            "ownerReferences": [owner],
            **meta,
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
    }


def test_kubelets_create_only_clean_mirror_pods_of_their_own() -> None:
    nodes = {"n1": {"metadata": {"name": "n1", "uid": "u1"}}}
    plugin = NodeRestriction(nodes.get)
    asyncio.run(plugin.validate(request("CREATE", mirror())))
    plain = mirror(annotations={})
    assert refused(plugin.validate(request("CREATE", plain))) == (
        'pods "m" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, '
        'node "n1" can only create mirror pods'
    )
    other = mirror()
    other["spec"]["nodeName"] = "n2"
    assert refused(plugin.validate(request("CREATE", other))).endswith(
        'node "n1" can only create pods with spec.nodeName set to itself'
    )
    wrong_uid = mirror()
    wrong_uid["metadata"]["ownerReferences"][0]["uid"] = "u9"
    assert refused(plugin.validate(request("CREATE", wrong_uid))).endswith("node n1 UID mismatch: expected u9 got u1")
    secret = mirror()
    secret["spec"]["volumes"] = [{"name": "s", "secret": {"secretName": "x"}}]
    assert refused(plugin.validate(request("CREATE", secret))).endswith(
        'node "n1" can not create pods that reference secrets'
    )
    assert refused(plugin.validate(request("UPDATE", mirror(), mirror()))).endswith(
        'unexpected operation "UPDATE", node "n1" can only create and delete mirror pods'
    )
    foreign = {"metadata": {"name": "m"}, "spec": {"nodeName": "n2"}}
    assert refused(plugin.validate(request("DELETE", None, foreign))).endswith(
        'node "n1" can only delete pods with spec.nodeName set to itself'
    )
    assert plugin.handles(request("CREATE", mirror(), user=User("ann"))) is False
    nameless = User("system:node:", ("system:nodes",))
    assert refused(plugin.validate(request("CREATE", mirror(), user=nameless))).endswith(
        'could not determine node from user "system:node:"'
    )


class Classes:
    def __init__(self, *items: Obj) -> None:
        self.items = {i["metadata"]["name"]: i for i in items}

    def objects(self) -> Iterator[Obj]:
        return iter(self.items.values())

    def get_object(self, namespace: str | None, name: str) -> Obj | None:
        return self.items.get(name)


def test_priority_from_the_global_default_and_named_classes() -> None:
    classes = Classes(
        {"metadata": {"name": "low"}, "value": 10, "globalDefault": True},
        {"metadata": {"name": "lower"}, "value": 5, "globalDefault": True, "preemptionPolicy": "Never"},
        {"metadata": {"name": "gold"}, "value": 1000},
    )
    plugin = Priority(classes)
    pod: Obj = {"metadata": {"name": "p"}, "spec": {}}
    asyncio.run(plugin.admit(request("CREATE", pod, user=User("ann"))))
    assert pod["spec"] == {"priorityClassName": "lower", "priority": 5, "preemptionPolicy": "Never"}
    gold: Obj = {"metadata": {"name": "g"}, "spec": {"priorityClassName": "gold", "preemptionPolicy": "Never"}}
    assert refused(plugin.admit(request("CREATE", gold, user=User("ann")))) == (
        'pods "g" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; '
        "priority admission controller computed PreemptLowerPriority from the given PriorityClass name"
    )
    kept: Obj = {"metadata": {"name": "p"}, "spec": {}}
    asyncio.run(plugin.admit(request("UPDATE", kept, {"spec": {"priority": 5}}, user=User("ann"))))
    assert kept["spec"] == {"priority": 5}
    from apiserver.resources.base import ResourceDef

    pcs = ResourceDef("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass", False)
    second = AdmissionRequest("CREATE", pcs, "", None, "new", User("ann"), {"globalDefault": True}, None)
    assert refused(plugin.validate(second)).endswith("is already marked as default. Only one default can exist")


def test_priority_reads_a_class_the_cache_has_not_seen_from_storage() -> None:
    stored = {"fresh": {"metadata": {"name": "fresh"}, "value": 77}}
    asked: list[str] = []

    async def fetch(name: str) -> Obj | None:
        asked.append(name)
        return stored.get(name)

    plugin = Priority(Classes(), fetch)
    pod: Obj = {"metadata": {"name": "p"}, "spec": {"priorityClassName": "fresh"}}
    asyncio.run(plugin.admit(request("CREATE", pod, user=User("ann"))))
    assert pod["spec"]["priority"] == 77
    missing: Obj = {"metadata": {"name": "m"}, "spec": {"priorityClassName": "nope"}}
    assert refused(plugin.admit(request("CREATE", missing, user=User("ann")))) == (
        'pods "m" is forbidden: no PriorityClass with name nope was found'
    )
    built_in: Obj = {"metadata": {"name": "b"}, "spec": {"priorityClassName": "system-node-critical"}}
    asyncio.run(plugin.admit(request("CREATE", built_in, user=User("ann"))))
    assert asked == ["fresh", "nope"]  # the built-in classes never cost a read


def test_pod_security_exemptions_skip_everything() -> None:
    namespaces = {"ns": {"metadata": {"name": "ns", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}}

    async def get(name: str) -> Obj | None:
        return namespaces.get(name)

    bad: Obj = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "privileged": True}]}}

    def create(user: str = "ann", runtime: str | None = None) -> AdmissionRequest:
        obj = {**bad, "spec": {**bad["spec"], **({"runtimeClassName": runtime} if runtime else {})}}
        return AdmissionRequest("CREATE", PODS, "", "ns", "p", User(user), obj, None)

    plain = PodSecurity(get, lambda ns: [])
    assert refused(plain.validate(create())).startswith(
        'pods "p" is forbidden: violates PodSecurity "restricted:latest"'
    )
    exempt = PodSecurity(get, lambda ns: [], Exemptions(frozenset({"ci"}), frozenset({"ns"}), frozenset({"kata"})))
    asyncio.run(exempt.validate(create("ci")))
    asyncio.run(exempt.validate(create(runtime="kata")))
    by_user = PodSecurity(get, lambda ns: [], Exemptions(usernames=frozenset({"ci"})))
    asyncio.run(by_user.validate(create("ci")))


def test_warnings_are_collected_once_and_bounded() -> None:
    warnings.add_warning("nobody collects this one")
    with warnings.collect([]) as found:
        warnings.add_warning("a")
        warnings.add_warning("a")
        warnings.add_warning("b")
    assert found == ["a", "b"]
    with warnings.collect([]) as many:
        for i in range(200):
            warnings.add_warning(str(i))
    assert len(many) == warnings.MAX_WARNINGS


def test_pods_get_kubes_defaults_and_templates_only_the_pod_spec_ones() -> None:
    probe = {"httpGet": {"port": 80}}
    pod: Obj = {
        "metadata": {"name": "p"},
        "spec": {
            "hostNetwork": True,
            "containers": [
                {
                    "name": "c",
                    "image": "nginx:1.25",
                    "ports": [{"containerPort": 80}],
                    "livenessProbe": probe,
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}},
                    "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                }
            ],
            "ephemeralContainers": [{"name": "e", "image": "busybox"}],
            "volumes": [
                {"name": "a"},
                {"name": "s", "secret": {"secretName": "x"}},
                {"name": "h", "hostPath": {"path": "/"}},
                {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
            ],
        },
    }
    core_pods.default(pod)
    spec = pod["spec"]
    assert {k: spec[k] for k in ("restartPolicy", "dnsPolicy", "terminationGracePeriodSeconds", "schedulerName")} == {
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "terminationGracePeriodSeconds": 30,
        "schedulerName": "default-scheduler",
    }
    assert (spec["securityContext"], spec["enableServiceLinks"]) == ({}, True)
    c = spec["containers"][0]
    assert (c["imagePullPolicy"], c["terminationMessagePath"], c["terminationMessagePolicy"]) == (
        "IfNotPresent",
        "/dev/termination-log",
        "File",
    )
    assert c["ports"] == [{"containerPort": 80, "protocol": "TCP", "hostPort": 80}]
    assert c["livenessProbe"] == {
        "httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    assert c["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}
    assert c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert spec["ephemeralContainers"][0]["imagePullPolicy"] == "Always"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["a"]["emptyDir"] == {}
    assert volumes["s"]["secret"]["defaultMode"] == 420
    assert volumes["h"]["hostPath"]["type"] == ""
    assert volumes["t"]["projected"]["defaultMode"] == 420
    assert volumes["t"]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] == 3600
    assert pod["status"]["qosClass"] == "Burstable"  # computed after requests were defaulted

    deployment: Obj = {
        "spec": {
            "template": {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "1"}}}]}}
        }
    }
    default_template(deployment)
    template = deployment["spec"]["template"]["spec"]
    assert "enableServiceLinks" not in template
    assert template["containers"][0]["resources"] == {"limits": {"cpu": "1"}}
    assert template["restartPolicy"] == "Always"
